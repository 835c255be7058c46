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
		// QUEUED is never stored: it is how the API shows an order admitted in Redis whose row
		// the stream consumer has not written yet. A FAILED row is one the consumer gave up on;
		// a LOST row, an order its user was told that Redis lost before it was written (a
		// flush, a failover to a lagging replica, an AOF's lost tail): its unit is back on sale.
		field.Enum("status").Values("QUEUED", "CREATED", "PAID", "CANCELLED", "REFUNDED", "FAILED", "LOST").Default("CREATED"),
		// slot is true while the order holds the user's one order of the voucher, and NULL
		// once it FAILED or was LOST: the unique index below treats NULLs as distinct, so such
		// an order does not block the user's retry while two live orders can never coexist.
		field.Bool("slot").Optional().Nillable().Annotations(entgql.Skip(entgql.SkipAll)),
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
		// One live order per user per voucher, enforced by the database whatever the caller
		// does (failed orders have a NULL slot and do not count).
		index.Fields("user_id", "voucher_id", "slot").Unique(),
		index.Fields("voucher_id"),
	}
}

func (SeckillOrder) Annotations() []schema.Annotation {
	return []schema.Annotation{
		entsql.Table("tb_voucher_order"),
		entgql.RelayConnection(),
	}
}
