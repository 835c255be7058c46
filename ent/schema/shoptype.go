package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
)

// ShopType is a category such as "food" or "KTV", listed in sort order.
type ShopType struct{ ent.Schema }

func (ShopType) Mixin() []ent.Mixin { return []ent.Mixin{TimeMixin{}} }

func (ShopType) Fields() []ent.Field {
	return []ent.Field{
		field.String("name").NotEmpty().MaxLen(32),
		field.String("icon").MaxLen(255).Default(""),
		field.Int("sort").Default(0),
	}
}

func (ShopType) Edges() []ent.Edge {
	return []ent.Edge{
		// A type's shops are paged through Query.shops(where: {typeID: …}).
		edge.To("shops", Shop.Type).Annotations(entgql.Skip(entgql.SkipAll)),
	}
}

func (ShopType) Annotations() []schema.Annotation {
	// createShopType and updateShopType take the generated inputs: a fresh database gets its
	// first shop type, and so its first shop, through the API.
	return []schema.Annotation{entgql.Mutations(entgql.MutationCreate(), entgql.MutationUpdate())}
}
