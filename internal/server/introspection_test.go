package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/99designs/gqlgen/graphql/introspection"
	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/gqlerror"

	gql "github.com/surgekit/surge/graph"
)

// answerFields counts the members of every object in v: the fields resolved to answer it.
func answerFields(v any) int {
	n := 0
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			n += 1 + answerFields(e)
		}
	case []any:
		for _, e := range v {
			n += answerFields(e)
		}
	}
	return n
}

// introspect runs query on gqlgen's executor (introspection needs no resolver) and returns
// its data.
func introspect(t *testing.T, query string, vars map[string]any) map[string]any {
	t.Helper()
	srv := handler.New(gql.NewExecutableSchema(gql.Config{}))
	srv.AddTransport(transport.POST{})
	srv.Use(extension.Introspection{})
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, req)
	var resp struct {
		Data   map[string]any
		Errors []any
	}
	if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil || resp.Errors != nil || resp.Data == nil {
		t.Fatalf("%s: %v %s", query, err, w.Body.Bytes())
	}
	return resp.Data
}

func countIntrospection(t *testing.T, query string, vars map[string]any, limit int) int {
	t.Helper()
	doc, errs := gqlparser.LoadQuery(testSchema, query)
	if errs != nil {
		t.Fatalf("%s: %v", query, errs)
	}
	return introspectionFields(testSchema, doc.Operations[0], vars, limit)
}

// The count is the answer's: one per member of each object, lists of the schema included.
func TestIntrospectionFieldsCountTheAnswer(t *testing.T) {
	for _, c := range []struct {
		query string
		vars  map[string]any
	}{
		{introspection.Query, nil},
		{introspectionQuery, nil}, // graphql-js's, every option on
		{`{ __type(name: "Shop") { name fields { name type { kind ofType { name } } } } }`, nil},
		{`query($n: String!) { __type(name: $n) { name inputFields { name } } }`, map[string]any{"n": "ShopWhereInput"}},
		{`{ __type(name: "Nope") { name } }`, nil},
		{`{ __schema { directives { name locations args { name type { name } } } } }`, nil},
		{`{ __schema { types { possibleTypes { name } interfaces { name } enumValues { name } inputFields { name } } } }`, nil},
		{`{ a: __schema { queryType { name } } b: __schema { types { ... on __Type { name } } } }`, nil},
	} {
		want := answerFields(introspect(t, c.query, c.vars))
		if got := countIntrospection(t, c.query, c.vars, 1<<30); got != want {
			t.Errorf("%.80s: counted %d fields, the answer has %d", c.query, got, want)
		}
	}
}

// wideIntrospection is the issue's: n aliases of __schema, each selecting every type's
// fields with their arguments and types (27 of them: 3.5 KB, 486 fields).
func wideIntrospection(n int) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		fmt.Fprintf(&b, " a%d: __schema { types { name fields { name args { name type { name } } type { name kind ofType { name } } } inputFields { name type { name } } } }", i)
	}
	return b.String() + " }"
}

func TestIntrospectionLimit(t *testing.T) {
	l := newIntrospectionLimit(testSchema)
	full := countIntrospection(t, introspection.Query, nil, 1<<30)
	if l.Max != introspectionAllowance*full {
		t.Fatalf("limit %d, want %d times GraphiQL's query (%d)", l.Max, introspectionAllowance, full)
	}
	t.Logf("GraphiQL's query (gqlgen's): %d fields; graphql-js's with every option: %d; the limit: %d",
		full, countIntrospection(t, introspectionQuery, nil, 1<<30), l.Max)

	check := func(query string) *gqlerror.Error {
		doc, errs := gqlparser.LoadQuery(testSchema, query)
		if errs != nil {
			t.Fatal(errs)
		}
		return l.MutateOperationContext(t.Context(), &graphql.OperationContext{Operation: doc.Operations[0]})
	}
	if n := countIntrospection(t, `{ __typename shopTypes { id } }`, nil, 1<<30); n != 0 {
		t.Fatalf("a query without introspection counted %d", n)
	}
	for _, q := range []string{introspection.Query, introspectionQuery, wideIntrospection(1)} {
		if err := check(q); err != nil {
			t.Errorf("%.80s: %v", q, err)
		}
	}
	err := check(wideIntrospection(27))
	if err == nil {
		t.Fatal("27 wide __schema accepted")
	}
	if err.Extensions["code"] != CodeComplexityLimit {
		t.Fatalf("27 wide __schema: %v, want %s", err, CodeComplexityLimit)
	}
	t.Logf("27 wide __schema: %d fields: %v", countIntrospection(t, wideIntrospection(27), nil, 1<<30), err)
	// Counting stops once past the limit: its cost is the limit's, not the document's.
	if n := countIntrospection(t, wideIntrospection(27), nil, 1000); n != 1001 {
		t.Fatalf("counted %d past a limit of 1000, want 1001", n)
	}
}
