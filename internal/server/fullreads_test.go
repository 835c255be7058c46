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
		{"ranges on the primary key within a type", `{ shops(where: {typeID: "8589934593", idGT: "1", idNotIn: ["7"], and: [{idLT: "9"}]}) { edges { node { id } } } }`, nil, 0},
		{"a filter without an index", `{ shops(where: {nameContains: "a"}) { edges { node { id } } } }`, nil, 1},
		{"each one counts", `{ shops(where: {nameContains: "a", areaEqualFold: "b", scoreGT: 3}) { edges { node { id } } } }`, nil, 3},
		{"nested in not, and, or", `{ shops(where: {not: {nameContains: "a"}, or: [{addressHasPrefix: "x"}, {typeID: "1"}], and: [{soldLT: 5}]}) { edges { node { id } } } }`, nil, 4},
		{"through an edge", `{ shops(where: {hasVouchersWith: [{titleContains: "x", shopID: "4294967297"}], hasTypeWith: [{nameContains: "K"}]}) { edges { node { id } } } }`, nil, 4},
		{"from variables", `query($w: ShopWhereInput) { shops(where: $w) { edges { node { id } } } }`, map[string]any{"w": map[string]any{"nameContains": "a", "or": []any{map[string]any{"openHoursContains": "9"}}}}, 2},
		{"null filters are none", `query($w: ShopWhereInput) { shops(where: $w) { edges { node { id } } } }`, map[string]any{"w": map[string]any{"nameContains": nil}}, 0},
		{"totalCount", `{ shops { totalCount } }`, nil, 1},
		{"pageInfo counts too", `{ shops { pageInfo { hasNextPage } } }`, nil, 1},
		{"orderBy", `{ shops(orderBy: [{field: SCORE}, {field: NAME}]) { edges { node { id } } } }`, nil, 1},
		{"an empty orderBy", `{ shops(orderBy: []) { edges { node { id } } } }`, nil, 0},
		{"all of them, aliased", `{ a: shops(where: {nameContains: "a"}, orderBy: [{field: SCORE}]) { totalCount } b: shops(where: {nameContains: "b"}) { totalCount } }`, nil, 5},
		{"through fragments", `{ ...Q ...Q } fragment Q on Query { shops(where: {nameContains: "a"}) { ...C } } fragment C on ShopConnection { totalCount }`, nil, 4},
		{"a user's orders read by index", `{ myOrders { totalCount pageInfo { hasNextPage } } }`, nil, 0},
		// Issue 33, item 1: filters on indexed fields were free however combined; a
		// contradiction of semi-joins read every shop, twice.
		{"the issue's contradiction", `query($w: ShopWhereInput) { shops(first: 1, where: $w) { edges { node { id } } } }`,
			map[string]any{"w": map[string]any{"hasVouchers": true, "not": map[string]any{"hasVouchers": true}}}, 2},
		{"the issue's nested edges", `{ shops(where: {hasVouchersWith: [{hasShopWith: [{hasVouchersWith: [{hasShopWith: [{hasVouchers: false}]}]}]}]}) { edges { node { id } } } }`, nil, 5},
		{"an edge's existence", `{ shops(where: {hasVouchers: true}) { edges { node { id } } } }`, nil, 1},
		{"an edge with an indexed filter", `{ shops(where: {hasTypeWith: [{idNEQ: "1"}]}) { edges { node { id } } } }`, nil, 1},
		{"an indexed field out of order", `{ shops(where: {typeIDNEQ: "8589934593"}) { edges { node { id } } } }`, nil, 1},
		{"several types", `{ shops(where: {typeIDIn: ["8589934593", "8589934594"]}) { edges { node { id } } } }`, nil, 1},
		{"not of an indexed field", `{ shops(where: {typeID: "8589934593", not: {typeID: "8589934593"}}) { edges { node { id } } } }`, nil, 1},
		{"deep not", `{ shops(where: {not: {not: {not: {not: {idGT: "5"}}}}}) { edges { node { id } } } }`, nil, 1},
		{"or of indexed fields", `{ shops(where: {or: [{typeID: "1"}, {typeID: "2"}, {idGT: "3"}]}) { edges { node { id } } } }`, nil, 3},
		{"or of one branch", `{ shops(where: {or: [{typeID: "1", idGT: "3"}]}) { edges { node { id } } } }`, nil, 0},
		{"a range with an order", `{ shops(where: {idGT: "4295067305"}, orderBy: [{field: NAME}]) { edges { node { id } } } }`, nil, 1},
		{"a range counted", `{ shops(where: {idGT: "4295067305"}) { totalCount } }`, nil, 1},
		{"by key, whatever else", `{ shops(where: {idIn: ["4294967296", "4294967297"], nameContains: "a", or: [{scoreGT: 3}, {soldGT: 5}]}, orderBy: [{field: NAME}]) { totalCount } }`, nil, 0},
		{"by key within and", `{ shops(where: {and: [{id: "4294967296"}], not: {nameContains: "a"}}) { edges { node { id } } } }`, nil, 0},
		{"by key with an edge", `{ shops(where: {idIn: ["4294967296"], not: {hasVouchersWith: [{titleContains: "x"}]}}) { edges { node { id } } } }`, nil, 2},
		{"a key under or is no key", `{ shops(where: {or: [{id: "4294967296"}, {nameContains: "a"}]}) { edges { node { id } } } }`, nil, 2},
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
