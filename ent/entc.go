//go:build ignore

// entc generates the ent client and, through entgql, graph/ent.graphqls.
// Run it from the repository root (go generate ./... does): run from inside ent/ with ../
// paths, the schema generator drops `scalar Time` on every second run.
package main

import (
	"log"

	"entgo.io/contrib/entgql"
	"entgo.io/ent/entc"
	"entgo.io/ent/entc/gen"
)

func main() {
	ex, err := entgql.NewExtension(
		entgql.WithSchemaGenerator(),
		entgql.WithSchemaPath("graph/ent.graphqls"),
		entgql.WithConfigPath("gqlgen.yml"),
		entgql.WithWhereInputs(true),
	)
	if err != nil {
		log.Fatalf("creating entgql extension: %v", err)
	}
	cfg := &gen.Config{
		Target:  "ent",
		Package: "github.com/surgekit/surge/ent",
		// GlobalID gives every table its own 2^32 id range, so node(id:) knows the type.
		Features: []gen.Feature{gen.FeatureGlobalID, gen.FeatureUpsert, gen.FeatureExecQuery},
	}
	if err := entc.Generate("./ent/schema", cfg, entc.Extensions(ex), entc.TemplateFiles("ent/template/attach.tmpl")); err != nil {
		log.Fatalf("running ent codegen: %v", err)
	}
}
