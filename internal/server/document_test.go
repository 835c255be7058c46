package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/lexer"
	"github.com/vektah/gqlparser/v2/parser"
)

// introspectionQuery is GraphiQL's schema query (graphql-js getIntrospectionQuery with
// descriptions, specifiedByURL, directive isRepeatable, schema description and deprecated
// input values): the largest document a legitimate client sends this server.
const introspectionQuery = `
    query IntrospectionQuery {
      __schema {
        description
        queryType { name kind }
        mutationType { name kind }
        subscriptionType { name kind }
        types { ...FullType }
        directives {
          name description isRepeatable locations
          args(includeDeprecated: true) { ...InputValue }
        }
      }
    }
    fragment FullType on __Type {
      kind name description specifiedByURL
      fields(includeDeprecated: true) {
        name description
        args(includeDeprecated: true) { ...InputValue }
        type { ...TypeRef }
        isDeprecated deprecationReason
      }
      inputFields(includeDeprecated: true) { ...InputValue }
      interfaces { ...TypeRef }
      enumValues(includeDeprecated: true) { name description isDeprecated deprecationReason }
      possibleTypes { ...TypeRef }
    }
    fragment InputValue on __InputValue {
      name description type { ...TypeRef } defaultValue isDeprecated deprecationReason
    }
    fragment TypeRef on __Type {
      kind name
      ofType { kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name
        ofType { kind name ofType { kind name ofType { kind name ofType { kind name } } } } } } } } }
    }`

var lexerSamples = []string{
	introspectionQuery,
	`{ shops(first: 3, orderBy: [{field: SCORE, direction: DESC}]) { totalCount pageInfo { hasNextPage endCursor } edges { node { id name score type { name } vouchers { id title kind stock beginAt endAt } } } } }`,
	`query Q($id: ID!, $n: Int = -12, $f: Float = 1.5e-3, $s: String = "a \"quoted\" \\ \u00e9 string") @dir(x: [1, 2.0, -3e4]) { ...on Query { shop(id: $id) { ...F } } }
	 # a comment with "quotes" and { braces }
	 fragment F on Shop { id, name,, area }`,
	"{ a(s: \"\"\"block \\\"\"\" string with \" and \"\" and { braces }\n  over lines\"\"\") }",
	"\ufeff{ __typename }",
	`mutation { sendLoginCode(phone: "13800000000") { phone expiresIn retryAfter devCode } }`,
	`subscription S($v: ID!) { voucherStock(voucherId: $v) }`,
	`{ a: nodes(ids: ["1", "2"]) { id ... on Shop { name } } b: node(id: "3") { __typename } }`,
}

// gqlparserTokens counts the tokens of the parser's own lexer, comments aside (they are no
// tokens in the GraphQL grammar, nor for graphql-js's maxTokens).
func gqlparserTokens(t *testing.T, src string) int {
	t.Helper()
	lx := lexer.New(&ast.Source{Input: src})
	n := 0
	for {
		tok, err := lx.ReadToken()
		if err != nil {
			t.Fatalf("gqlparser lexer: %v in %q", err, src)
		}
		switch tok.Kind {
		case lexer.EOF:
			return n
		case lexer.Comment:
		default:
			n++
		}
	}
}

func TestScanDocumentCountsTokensLikeTheParser(t *testing.T) {
	for _, src := range lexerSamples {
		want := gqlparserTokens(t, src)
		l := DocumentLimits{MaxTokens: want, MaxNesting: 100, MaxNameBytes: 256}
		if err := scanDocument(src, l); err != nil {
			t.Errorf("%d tokens refused at a limit of %d: %v\n%s", want, want, err, src)
		}
		l.MaxTokens = want - 1
		if err := scanDocument(src, l); err == nil || err.Extensions["code"] != CodeDocumentTooLarge {
			t.Errorf("%d tokens accepted at a limit of %d (%v)\n%s", want, want-1, err, src)
		}
	}
	t.Logf("introspection query: %d tokens", gqlparserTokens(t, introspectionQuery))
}

func TestScanDocumentNesting(t *testing.T) {
	l := DocumentLimits{MaxTokens: 1 << 20, MaxNesting: 5, MaxNameBytes: 256}
	for src, ok := range map[string]bool{
		`{ a { b { c(x: {y: 1}) } } }`:   true,  // { { { ( { : 5 levels
		`{ a { b { c(x: {y: [1]}) } } }`: false, // 6
		`{ a(s: "{{{{{{{{") }`:           true,  // braces inside strings do not count
		"{ a } # {{{{{{{{\n{ b }":        true,  // nor inside comments
		`{ a(s: """{{{{{{{{""") }`:       true,
		`[[[[[[`:                         false,
		`}}}}}]]]]]))))) { a }`:          true, // stray closers do not go negative
	} {
		if err := scanDocument(src, l); (err == nil) != ok {
			t.Errorf("%s: refused=%v, want refused=%v (%v)", src, err != nil, !ok, err)
		}
	}
	if err := scanDocument(introspectionQuery, DocumentLimits{MaxTokens: 2000, MaxNesting: 32, MaxNameBytes: 256}); err != nil {
		t.Fatalf("the default limits refuse GraphiQL's introspection query: %v", err)
	}
}

func TestCountFields(t *testing.T) {
	for src, want := range map[string]int{
		`{ a b { c } }`:                       3,
		`{ a ... on T { b } }`:                3,           // the inline fragment counts one
		`{ a ...F } fragment F on T { b c }`:  1 + (1 + 2), // the spread and its fields
		`{ ...F ...F } fragment F on T { b }`: 2 * (1 + 1),
		`{ a } fragment F on T { b c }`:       1 + 2, // a fragment spread nowhere counts once
		// Fragments doubling each other: counted with memoization, saturating at the limit.
		`{ ...A } fragment A on T { ...B ...B } fragment B on T { ...C ...C } fragment C on T { x }`: 1 + 2*(1+2*(1+1)),
		// A cycle (refused by validation) does not loop.
		`{ ...A } fragment A on T { ...A x }`: 1 + 2,
	} {
		doc, err := parser.ParseQuery(&ast.Source{Input: src})
		if err != nil {
			t.Fatal(err)
		}
		if got := countFields(doc, 1000); got != want {
			t.Errorf("%s: %d fields, want %d", src, got, want)
		}
	}
	// 40 fragments each spreading the next twice would be 2^40 fields: the count saturates.
	var b strings.Builder
	b.WriteString("{ ...F0 }")
	for i := range 40 {
		fmt.Fprintf(&b, " fragment F%d on T { ...F%d ...F%d }", i, i+1, i+1)
	}
	b.WriteString(" fragment F40 on T { x }")
	doc, err := parser.ParseQuery(&ast.Source{Input: b.String()})
	if err != nil {
		t.Fatal(err)
	}
	if got := countFields(doc, 500); got != 501 {
		t.Fatalf("exponential fragments: %d, want the saturated 501", got)
	}
	doc, _ = parser.ParseQuery(&ast.Source{Input: introspectionQuery})
	t.Logf("introspection query: %d fields", countFields(doc, 1<<30))
	if n := countFields(doc, 500); n > 500 {
		t.Fatalf("the default field limit refuses GraphiQL's introspection query (%d fields)", n)
	}
}

func TestVariablesBounds(t *testing.T) {
	d := documentLimits{DocumentLimits: DocumentLimits{MaxTokens: 10, MaxNesting: 3}}
	nest := func(n int) map[string]any {
		v := map[string]any{}
		for range n - 1 {
			v = map[string]any{"a": v}
		}
		return v
	}
	for name, c := range map[string]struct {
		vars map[string]any
		ok   bool
	}{
		"nil":             {nil, true},
		"3 levels":        {nest(3), true},
		"4 levels":        {nest(4), false},
		"list in a map":   {map[string]any{"ids": []any{"1", "2"}}, true},
		"lists 4 deep":    {map[string]any{"ids": []any{[]any{[]any{}}}}, false},
		"9 values":        {map[string]any{"ids": []any{1, 2, 3, 4, 5, 6, 7}}, true}, // map, list and 7 ids
		"11 values":       {map[string]any{"ids": []any{1, 2, 3, 4, 5, 6, 7, 8, 9}}, false},
		"a long string":   {map[string]any{"s": strings.Repeat("x", 1<<20)}, true},
		"many small maps": {map[string]any{"a": map[string]any{}, "b": map[string]any{}, "c": map[string]any{}, "d": map[string]any{}, "e": map[string]any{}, "f": map[string]any{}, "g": map[string]any{}, "h": map[string]any{}, "i": map[string]any{}, "j": map[string]any{}}, false},
	} {
		err := d.checkJSON("variables", c.vars)
		if (err == nil) != c.ok {
			t.Errorf("%s: refused=%v, want %v (%v)", name, err != nil, !c.ok, err)
		}
	}
}
