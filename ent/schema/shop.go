package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
)

// Shop is a merchant. Money is in integer cents; score is in tenths (0–50 means 0.0–5.0).
type Shop struct{ ent.Schema }

func (Shop) Mixin() []ent.Mixin { return []ent.Mixin{TimeMixin{}} }

func (Shop) Fields() []ent.Field {
	return []ent.Field{
		field.String("name").NotEmpty().MaxLen(128).Annotations(entgql.OrderField("NAME")),
		field.Int("type_id"),
		field.Strings("images").Optional(),
		field.String("area").MaxLen(128).Default(""),
		field.String("address").MaxLen(255).Default(""),
		field.Float("longitude").Min(-180).Max(180),
		field.Float("latitude").Min(-90).Max(90),
		field.Int64("avg_price").NonNegative().Default(0).Annotations(entgql.OrderField("AVG_PRICE")),
		field.Int("sold").NonNegative().Default(0).Annotations(entgql.OrderField("SOLD")),
		field.Int("comments").NonNegative().Default(0).Annotations(entgql.OrderField("COMMENTS")),
		field.Int("score").Min(0).Max(50).Default(0).Annotations(entgql.OrderField("SCORE")),
		field.String("open_hours").MaxLen(32).Default(""),
	}
}

func (Shop) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("type", ShopType.Type).Ref("shops").Field("type_id").Unique().Required(),
		edge.To("vouchers", Voucher.Type).
			Annotations(entgql.Skip(entgql.SkipMutationCreateInput, entgql.SkipMutationUpdateInput)),
	}
}

func (Shop) Indexes() []ent.Index {
	return []ent.Index{index.Fields("type_id")}
}

func (Shop) Annotations() []schema.Annotation {
	return []schema.Annotation{
		entgql.RelayConnection(),
		entgql.QueryField(),
		entgql.Mutations(entgql.MutationCreate(), entgql.MutationUpdate()),
		entgql.MultiOrder(),
	}
}
