package graph

import (
	"maps"
	"strings"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/formatter"
)

// specDirectives are the directives of the GraphQL specification, which every tool knows and
// SDL leaves out.
var specDirectives = map[string]bool{"skip": true, "include": true, "deprecated": true, "specifiedBy": true, "oneOf": true}

// SDL is the schema the server serves, in GraphQL's schema definition language: what
// introspection shows, with the descriptions, for client code generators (GraphQL Codegen,
// Relay, Apollo's tooling) against servers that keep introspection off.
func SDL() string {
	schema := *NewExecutableSchema(Config{}).Schema() // a copy: the served schema is shared
	// gqlgen's built-in directives other than the specification's (@defer) are served, so
	// they are printed too; the formatter skips built-in definitions.
	schema.Directives = maps.Clone(schema.Directives)
	for name, d := range schema.Directives {
		if d.Position != nil && d.Position.Src != nil && d.Position.Src.BuiltIn && !specDirectives[name] {
			served := *d
			served.Position = &ast.Position{Src: &ast.Source{Name: "served"}}
			schema.Directives[name] = &served
		}
	}
	var b strings.Builder
	formatter.NewFormatter(&b, formatter.WithIndent("  "), formatter.WithComments()).FormatSchema(&schema)
	return b.String()
}
