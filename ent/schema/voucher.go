package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/dialect/entsql"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
)

// Voucher is a coupon a shop sells. A SECKILL voucher also has a stock and a sale window;
// a NORMAL one has neither. Money is in integer cents.
type Voucher struct{ ent.Schema }

func (Voucher) Mixin() []ent.Mixin { return []ent.Mixin{TimeMixin{}} }

func (Voucher) Fields() []ent.Field {
	return []ent.Field{
		field.Int("shop_id"),
		field.String("title").NotEmpty().MaxLen(255),
		field.String("subtitle").MaxLen(255).Default(""),
		field.String("rules").MaxLen(1024).Default(""),
		field.Int64("pay_value").NonNegative(),
		field.Int64("actual_value").NonNegative(),
		field.Enum("kind").Values("NORMAL", "SECKILL").Default("NORMAL").Immutable(),
		field.Enum("status").Values("ACTIVE", "INACTIVE", "EXPIRED").Default("ACTIVE"),
		field.Int("stock").Optional().Nillable().NonNegative(),
		field.Time("begin_at").Optional().Nillable(),
		field.Time("end_at").Optional().Nillable(),
		// buckets splits a SECKILL voucher's stock over this many Redis hash tags (Cluster
		// slots), so one hot sale runs on several masters (docs/seckill.md, "Stock buckets").
		// 1 is one slot, the layout of a voucher without buckets.
		field.Int("buckets").Default(1).Range(1, 64),
	}
}

func (Voucher) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("shop", Shop.Type).Ref("vouchers").Field("shop_id").Unique().Required(),
		edge.To("orders", SeckillOrder.Type).Annotations(entgql.Skip(entgql.SkipAll)),
	}
}

func (Voucher) Annotations() []schema.Annotation {
	return []schema.Annotation{
		// The database refuses what the application also refuses, so no writer can bypass it.
		entsql.Checks(map[string]string{
			"voucher_stock_non_negative": "stock IS NULL OR stock >= 0",
			"voucher_window_ordered":     "begin_at IS NULL OR end_at IS NULL OR begin_at < end_at",
		}),
	}
}
