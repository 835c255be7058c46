package schema

import (
	"regexp"

	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
)

// PhonePattern is a mainland-China mobile number: 11 digits starting 13–19.
var PhonePattern = regexp.MustCompile(`^1[3-9]\d{9}$`)

// User is someone who logged in with a phone code. Users are created on first login.
type User struct{ ent.Schema }

func (User) Mixin() []ent.Mixin { return []ent.Mixin{TimeMixin{}} }

func (User) Fields() []ent.Field {
	return []ent.Field{
		field.String("phone").Unique().Immutable().Match(PhonePattern),
		field.String("nickname").MaxLen(32).NotEmpty(),
		field.String("icon").MaxLen(255).Default(""),
		field.Enum("role").Values("USER", "ADMIN").Default("USER"),
	}
}

func (User) Edges() []ent.Edge {
	return []ent.Edge{
		// Orders are reached through myOrders, never through another user's node.
		edge.To("orders", SeckillOrder.Type).Annotations(entgql.Skip(entgql.SkipAll)),
	}
}
