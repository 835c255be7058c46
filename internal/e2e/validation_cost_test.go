package e2e_test

// Issue 23, items 1 and 2, on `surge serve` (the built binary): what validation's "did you
// mean" hints and introspection cost the server, in CPU read from /proc and measured against
// a baseline taken in the same run.

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql/introspection"

	"github.com/surgekit/surge/internal/testenv"
)

// cpuTick is /proc's CPU resolution.
const cpuTick = 10 * time.Millisecond

// meanCPU posts body n times and returns the last answer with, as its cpu, the server CPU
// each cost on average (/proc counts in ticks of 10 ms: one request's figure is coarse).
func (p *surgeProc) meanCPU(body []byte, n int) answer {
	p.t.Helper()
	var a answer
	before := p.cpu()
	for range n {
		if a = p.post(body); a.err != nil {
			break
		}
	}
	a.cpu = (p.cpu() - before) / time.Duration(n)
	return a
}

// baseline is meanCPU of a request that must succeed.
func (p *surgeProc) baseline(body []byte, n int) answer {
	p.t.Helper()
	a := p.meanCPU(body, n)
	if a.err != nil || a.status != http.StatusOK || a.code() != "" {
		p.t.Fatalf("baseline %.60s: %v", body, a)
	}
	return a
}

// name returns a name of n bytes.
func name(n int) string { return "n" + strings.Repeat("x", n-1) }

// names joins n elements made by format from a distinct name of size bytes (%[1]s) and
// their index (%[2]d).
func names(n, size int, format string) string {
	var b strings.Builder
	for i := range n {
		id := fmt.Sprint(i)
		fmt.Fprintf(&b, format, name(size-len(id))+id, i)
	}
	return b.String()
}

// suggestionBodies are item 1's bodies: validation compared each unknown name (and a string
// given for an enum) with every candidate name by edit distance, hint shown or not.
func suggestionBodies() map[string][]byte {
	const mib = 1<<20 - 200 // a name that leaves room for the body's JSON in 1 MiB
	q := func(query string) []byte { return gqlBody(query, nil) }
	return map[string][]byte{
		// Names past the cap (256 bytes), refused before parsing.
		"input field name 16 KiB":   q(`{ shops(where: {nameC` + name(16<<10) + `: "a"}) { totalCount } }`),
		"input field name 1 MiB":    q(`{ shops(where: {nameC` + name(mib) + `: "a"}) { totalCount } }`),
		"fragment type 1 MiB":       q(`{ __typename } fragment F on ` + name(mib) + ` { id }`),
		"enum value 1 MiB":          q(`{ shops(orderBy: [{field: ` + name(mib) + `}]) { totalCount } }`),
		"field name 1 MiB":          q(`{ ` + name(mib) + ` }`),
		"200 input fields of 4 KiB": q(`{ shops(where: {` + names(200, 4<<10, `%[1]s: "a" `) + `}) { totalCount } }`),
		// Inside the limits: names at the cap, as many as the token limit (2000) allows.
		"600 input fields of 256 B":   q(`{ shops(where: {` + names(600, 256, `%[1]s: "a" `) + `}) { totalCount } }`),
		"280 fragment types of 256 B": q(`{ __typename }` + names(280, 256, ` fragment F%[2]d on %[1]s { id }`)),
		"500 fields of 256 B":         q(`{ ` + names(500, 256, `%[1]s `) + ` }`),
		"600 arguments of 256 B":      q(`{ shops(` + names(600, 256, `%[1]s: 1 `) + `) { totalCount } }`),
		"1 500 enum values of 256 B":  q(`{ shops(where: {hasVouchersWith: [{statusIn: [` + names(1500, 256, `%[1]s `) + `]}]}) { totalCount } }`),
		"enum string 1 MiB":           q(`{ shops(orderBy: [{field: "` + strings.Repeat("S", mib) + `"}]) { totalCount } }`),
	}
}

// TestSuggestionsCost: every body of item 1 is refused (a coded 400, no INTERNAL) within
// 100 ms of server CPU more than a trivial query, in production and in dev (whose hints are
// on), over HTTP and over an anonymous WebSocket. Before: up to 3.8 s each.
func TestSuggestionsCost(t *testing.T) {
	servers := map[string]*surgeProc{
		"production": startSurge(t, productionVars(t, testenv.Phone())),
		"dev":        startSurge(t, nil),
	}
	for mode, p := range servers {
		t.Run(mode, func(t *testing.T) {
			p.t = t
			p.post(gqlBody(`{ __typename }`, nil)) // warm up
			base := p.baseline(gqlBody(`{ __typename }`, nil), 20).cpu
			limit := base + 100*time.Millisecond + cpuTick
			t.Logf("baseline { __typename }: %v of CPU; limit %v", base, limit)
			for what, body := range suggestionBodies() {
				if len(body) > 1<<20 {
					t.Fatalf("%s: %d bytes, over the 1 MiB body limit", what, len(body))
				}
				a := p.post(body)
				switch code := a.code(); {
				case a.err != nil || a.cpu > limit:
					t.Errorf("%s (%d KB): %v of CPU, want at most %v: %v", what, len(body)>>10, a.cpu, limit, a)
				case a.status != http.StatusBadRequest || code == "" || code == "INTERNAL":
					t.Errorf("%s: %v; want a coded 400", what, a)
				case len(a.body) > maxErrorBody:
					t.Errorf("%s: a %d-byte answer", what, len(a.body))
				default:
					t.Logf("%-28s %4d KB → %d %s, cpu %v", what, len(body)>>10, a.status, code, a.cpu)
				}
			}

			// The same over an anonymous WebSocket (4.2 s before).
			ws := p.client().ws(nil, nil)
			before := p.cpu()
			ws.subscribe("1", `{ shops(where: {nameC`+name(1<<20-300)+`: "a"}) { totalCount } }`, nil)
			err := ws.nextError("1")
			if cpu := p.cpu() - before; cpu > limit || err.Extensions["code"] != "DOCUMENT_TOO_LARGE" {
				t.Errorf("1 MiB input field name over a WebSocket: %v of CPU (want at most %v), %+v", cpu, limit, err)
			} else {
				t.Logf("1 MiB input field name over a WebSocket: %s, cpu %v", err.Extensions["code"], cpu)
			}
		})
	}
}

// wideIntrospection is item 2's body: n aliases of __schema, each selecting every type's
// fields with their arguments and types (27: 3.5 KB, 486 fields).
func wideIntrospection(n int) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		fmt.Fprintf(&b, " a%d: __schema { types { name fields { name args { name type { name } } type { name kind ofType { name } } } inputFields { name type { name } } } }", i)
	}
	return b.String() + " }"
}

// graphiQLTypes is GraphiQL's schema query with its types selected n times in all.
func graphiQLTypes(n int) string {
	var more strings.Builder
	for i := range n - 1 {
		fmt.Fprintf(&more, "  t%d: __schema { types { ...FullType } }\n", i)
	}
	return strings.Replace(introspection.Query, "  __schema {", more.String()+"  __schema {", 1)
}

// TestIntrospectionCost: an operation's introspection resolves at most twice the fields of
// GraphiQL's full schema query, so it costs at most about twice that query's answer and 3
// times its CPU, in dev (introspection on by default) and in production with
// SURGE_INTROSPECTION=true; past that it is refused (COMPLEXITY_LIMIT_EXCEEDED). Before, 27
// aliases of a wide __schema were answered: 1 MB and 240–430 ms of CPU.
// aliasedSchemas is n aliases of __schema { body }.
func aliasedSchemas(n int, body string) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, " s%d: __schema { %s }", i, body)
	}
	return "{" + b.String() + " }"
}

func TestIntrospectionCost(t *testing.T) {
	vars := productionVars(t, testenv.Phone())
	vars["SURGE_INTROSPECTION"] = "true"
	servers := map[string]*surgeProc{"production": startSurge(t, vars), "dev": startSurge(t, nil)}
	aliasedTypes := func(n int) string { // n lookups of each field's type inside one __schema
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, " t%d: type { ofType { fields { name } } }", i)
		}
		return "{ __schema { types { fields {" + b.String() + " } } } }"
	}
	bodies := map[string]string{
		"27 wide __schema (the issue's)":       wideIntrospection(27),
		"165 aliases of types { description }": aliasedSchemas(165, "types { description }"), // issue 33: 965 KB, 7.3×
		"45 aliases of types { description }":  aliasedSchemas(45, "types { description }"),  // accepted
		"110 aliased types in one __schema":    aliasedTypes(110),
		"GraphiQL's types twice (accepted)":    graphiQLTypes(2),
		"GraphiQL's types thrice (refused)":    graphiQLTypes(3),
		"every field of every type, 2 levels":  `{ __schema { types { fields { name args { name type { name } } type { ofType { ofType { fields { name args { name } type { name } } } } } } inputFields { name type { name inputFields { name } } } } } }`,
	}
	for mode, p := range servers {
		t.Run(mode, func(t *testing.T) {
			p.t = t
			full := gqlBody(introspection.Query, nil)
			p.post(full) // warm up
			answer := p.baseline(full, 5)
			base := answer.cpu
			// Twice the fields of the baseline: measured 1.8–2.7 times its CPU (the larger answer
			// costs the garbage collector more), hence a ceiling of 3.
			cpuLimit := 3*base + cpuTick
			t.Logf("baseline, GraphiQL's schema query: %v of CPU, a %d KB answer; limits %v and %d KB", base, len(answer.body)>>10, cpuLimit, 2*len(answer.body)>>10)
			for what, query := range bodies {
				a := p.meanCPU(gqlBody(query, nil), 5)
				switch {
				case a.err != nil || a.cpu > cpuLimit:
					t.Errorf("%s: %v of CPU, want at most %v: %v", what, a.cpu, cpuLimit, a)
				case len(a.body) > 2*len(answer.body):
					t.Errorf("%s: a %d KB answer, want at most %d KB", what, len(a.body)>>10, 2*len(answer.body)>>10)
				case a.status != http.StatusOK && a.code() != "COMPLEXITY_LIMIT_EXCEEDED":
					t.Errorf("%s: %v; want an answer or COMPLEXITY_LIMIT_EXCEEDED", what, a)
				default:
					t.Logf("%-38s → %d %s, %d KB, cpu %v (%.1f× the baseline)", what, a.status, a.code(), len(a.body)>>10, a.cpu, float64(a.cpu)/float64(base))
				}
			}
			if a := p.post(gqlBody(wideIntrospection(27), nil)); a.code() != "COMPLEXITY_LIMIT_EXCEEDED" {
				t.Errorf("27 wide __schema: %v; want COMPLEXITY_LIMIT_EXCEEDED", a)
			}
		})
	}
}
