package graph

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2"
)

// The loaders wait (loaderWait) for every lookup rootLookups expects, so it must expect only
// lookups that will come: not an alias left out by @skip or @include, nor an id the ID scalar
// refuses (its field fails before any lookup); ids that differ only in spelling are one.
func TestRootLookupsCountOnlyLookupsThatCome(t *testing.T) {
	schema := NewExecutableSchema(Config{Resolvers: &Resolver{}}).Schema()
	doc, errs := gqlparser.LoadQuery(schema, `query($no: Boolean!, $v: ID!) {
		a: shop(id: 1) { id }
		b: shop(id: "2") { id }
		c: shop(id: 3) @skip(if: true) { id }
		d: shop(id: 4) @include(if: $no) { id }
		e: shop(id: "x") { id }
		f: shop(id: "02") { id }
		... @skip(if: true) { g: shop(id: 5) { id } }
		... on Query { h: voucher(id: $v) { id } }
		...More
	}
	fragment More on Query { i: voucher(id: 7) { id } j: voucher(id: 8) @include(if: $no) { id } }`)
	if errs != nil {
		t.Fatal(errs)
	}
	op := &graphql.OperationContext{Doc: doc, Operation: doc.Operations[0], Variables: map[string]any{"no": false, "v": "6"}}
	got := rootLookups(op)
	for field, want := range map[string][]string{"shop": {"1", "2"}, "voucher": {"6", "7"}} {
		var ids []string
		for id := range maps.Keys(got[field]) {
			ids = append(ids, fmt.Sprint(id))
		}
		if slices.Sort(ids); !slices.Equal(ids, want) {
			t.Errorf("%s: expects ids %v, want %v", field, ids, want)
		}
	}
}
