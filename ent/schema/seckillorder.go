package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/dialect/entsql"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
)

// SeckillOrder is a voucher order. It is not called VoucherOrder because entgql generates
// that name for the Voucher ordering input. Its 64-bit id is assigned by the application
// (idgen), never by the database, so the id exists before the row does.
type SeckillOrder struct{ ent.Schema }

func (SeckillOrder) Mixin() []ent.Mixin { return []ent.Mixin{TimeMixin{}} }

func (SeckillOrder) Fields() []ent.Field {
	return []ent.Field{
		field.Int("id").Positive().Immutable(),
		field.Int("user_id").Immutable(),
		field.Int("voucher_id").Immutable(),
		field.Enum("status").Values("CREATED", "PAID", "CANCELLED", "REFUNDED", "FAILED").Default("CREATED"),
	}
}

func (SeckillOrder) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("user", User.Type).Ref("orders").Field("user_id").Unique().Required().Immutable(),
		edge.From("voucher", Voucher.Type).Ref("orders").Field("voucher_id").Unique().Required().Immutable(),
	}
}

func (SeckillOrder) Indexes() []ent.Index {
	return []ent.Index{
		// One order per user per voucher, enforced by the database whatever the caller does.
		index.Fields("user_id", "voucher_id").Unique(),
		index.Fields("voucher_id"),
	}
}

func (SeckillOrder) Annotations() []schema.Annotation {
	return []schema.Annotation{
		entsql.Table("tb_voucher_order"),
		entgql.RelayConnection(),
	}
}
