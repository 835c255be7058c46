package server

import (
	"testing"

	"github.com/vektah/gqlparser/v2"

	gql "github.com/surgekit/surge/graph"
)

// What counts as a full read of a table, on the served schema (validated documents, so that
// fields carry their definitions and spreads their fragments). TestFilterCost (internal/e2e)
// measures what they cost the database.
func TestFullReads(t *testing.T) {
	schema := gql.NewExecutableSchema(gql.Config{}).Schema()
	f := &fullReads{schema: schema}
	for _, c := range []struct {
		name  string
		query string
		vars  map[string]any
		want  int
	}{
		{"a page by id order", `{ shops(first: 5) { edges { node { id } } } }`, nil, 0},
		{"indexed filters", `{ shops(where: {typeID: "8589934593", idGT: "1", hasVouchers: true, typeIDNotIn: ["1"]}) { edges { node { id } } } }`, nil, 0},
		{"a filter without an index", `{ shops(where: {nameContains: "a"}) { edges { node { id } } } }`, nil, 1},
		{"each one counts", `{ shops(where: {nameContains: "a", areaEqualFold: "b", scoreGT: 3}) { edges { node { id } } } }`, nil, 3},
		{"nested in not, and, or", `{ shops(where: {not: {nameContains: "a"}, or: [{addressHasPrefix: "x"}, {typeID: "1"}], and: [{soldLT: 5}]}) { edges { node { id } } } }`, nil, 3},
		{"through an edge", `{ shops(where: {hasVouchersWith: [{titleContains: "x", shopID: "4294967297"}], hasTypeWith: [{nameContains: "K"}]}) { edges { node { id } } } }`, nil, 2},
		{"from variables", `query($w: ShopWhereInput) { shops(where: $w) { edges { node { id } } } }`, map[string]any{"w": map[string]any{"nameContains": "a", "or": []any{map[string]any{"openHoursContains": "9"}}}}, 2},
		{"null filters are none", `query($w: ShopWhereInput) { shops(where: $w) { edges { node { id } } } }`, map[string]any{"w": map[string]any{"nameContains": nil}}, 0},
		{"totalCount", `{ shops { totalCount } }`, nil, 1},
		{"pageInfo counts too", `{ shops { pageInfo { hasNextPage } } }`, nil, 1},
		{"orderBy", `{ shops(orderBy: [{field: SCORE}, {field: NAME}]) { edges { node { id } } } }`, nil, 1},
		{"an empty orderBy", `{ shops(orderBy: []) { edges { node { id } } } }`, nil, 0},
		{"all of them, aliased", `{ a: shops(where: {nameContains: "a"}, orderBy: [{field: SCORE}]) { totalCount } b: shops(where: {nameContains: "b"}) { totalCount } }`, nil, 5},
		{"through fragments", `{ ...Q ...Q } fragment Q on Query { shops(where: {nameContains: "a"}) { ...C } } fragment C on ShopConnection { totalCount }`, nil, 4},
		{"a user's orders read by index", `{ myOrders { totalCount pageInfo { hasNextPage } } }`, nil, 0},
	} {
		doc, errs := gqlparser.LoadQuery(schema, c.query)
		if errs != nil {
			t.Fatalf("%s: %v", c.name, errs)
		}
		if got := f.selections(doc.Operations[0].SelectionSet, c.vars); got != c.want {
			t.Errorf("%s: %d full reads, want %d", c.name, got, c.want)
		}
	}
}
