package schema

import (
	"time"

	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/dialect/entsql"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
)

// SeckillOrderAlias leads from an order id a user was told at admission to the order that
// stands for it under another id. Only a Redis that lost state makes one: the id had been
// issued before and belongs to another order, so the user's order was stored under a fresh id
// (REHOMED; the row may be FAILED if it could not be kept), or the user already held an order
// of the voucher (SUPERSEDED). Looking an order up by the id the user was told follows it.
type SeckillOrderAlias struct{ ent.Schema }

func (SeckillOrderAlias) Fields() []ent.Field {
	return []ent.Field{
		field.Int("user_id").Immutable(),
		field.Int("voucher_id").Immutable(),
		field.Int("admitted_id").Positive().Immutable().Comment("the order id the user was told"),
		field.Int("order_id").Positive().Immutable().Comment("the order that stands for it"),
		field.Enum("reason").Values("REHOMED", "SUPERSEDED").Immutable(),
		field.Time("created_at").Immutable().Default(time.Now),
	}
}

func (SeckillOrderAlias) Indexes() []ent.Index {
	return []ent.Index{
		// One order per id a user was told (two users can have been told the same id).
		index.Fields("user_id", "admitted_id").Unique(),
		index.Fields("voucher_id"),
	}
}

func (SeckillOrderAlias) Annotations() []schema.Annotation {
	return []schema.Annotation{
		entsql.Table("tb_voucher_order_alias"),
		entgql.Skip(entgql.SkipAll),
	}
}
