package e2e_test

// Issue 13, item 3: batched requests (a JSON array of operations, as Apollo's BatchHttpLink
// sends them): refused with a clear BAD_REQUEST unless SURGE_BATCH_MAX allows them, and then
// each operation counted against the request's limits.

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/surgekit/surge/internal/testenv"
)

// apolloBatch runs Apollo Client 4's BatchHttpLink: the operations of one tick go as one
// request; it prints each operation's result and the requests made.
//
//	node apollo-batch.mjs <url> <queries JSON>
const apolloBatch = `
import { ApolloClient, InMemoryCache, gql } from '@apollo/client';
import { BatchHttpLink } from '@apollo/client/link/batch-http';

const [url, queriesJSON] = process.argv.slice(2);
const requests = [];
async function logged(uri, init) {
  const r = await fetch(uri, init);
  requests.push({ operations: JSON.parse(init.body).length, status: r.status });
  return r;
}
const client = new ApolloClient({ cache: new InMemoryCache(),
  link: new BatchHttpLink({ uri: url, fetch: logged, batchMax: 10, batchInterval: 20 }) });
const results = await Promise.all(JSON.parse(queriesJSON).map(async (q) => {
  try {
    return { data: (await client.query({ query: gql(q), fetchPolicy: 'network-only' })).data };
  } catch (e) {
    return { error: String(e.message), codes: (e.errors || []).map((x) => x.extensions && x.extensions.code) };
  }
}));
console.log(JSON.stringify({ results, requests }));
`

type apolloBatchOut struct {
	Results []struct {
		Data  map[string]any
		Error string
		Codes []string
	}
	Requests []struct{ Operations, Status int }
}

func TestBatchedRequests(t *testing.T) {
	queries := []string{
		`query A { shopTypes { id } }`,
		`query B { shops(first: 2) { totalCount } }`,
		`query C { me { id } }`,
	}
	raw, _ := json.Marshal(queries)

	t.Run("off", func(t *testing.T) {
		e := start(t)
		var out apolloBatchOut
		runNode(t, apolloBatch, &out, e.url+"/query", string(raw))
		for i, r := range out.Results {
			if r.Data != nil || !strings.Contains(r.Error, "batch") {
				t.Errorf("operation %d: %+v; want the batch refused, saying why", i, r)
			}
		}
		// Each operation of the batch gets the refusal, so that a batching client shows it.
		body := `[{"query":"{ __typename }"},{"query":"{ __typename }"}]`
		resp, err := http.DefaultClient.Do(mustRequest(http.MethodPost, e.url+"/query", []byte(body), "application/json"))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var each []struct{ Errors []gqlError }
		if err := json.NewDecoder(resp.Body).Decode(&each); err != nil || resp.StatusCode != http.StatusBadRequest || len(each) != 2 ||
			code(each[1].Errors[0]) != "BAD_REQUEST" || !strings.Contains(each[1].Errors[0].Message, "SURGE_BATCH_MAX") {
			t.Errorf("a batch on a server without batching: %d %+v %v", resp.StatusCode, each, err)
		}
	})

	t.Run("on", func(t *testing.T) {
		e := startWith(t, map[string]string{"SURGE_BATCH_MAX": "3"})
		var out apolloBatchOut
		runNode(t, apolloBatch, &out, e.url+"/query", string(raw))
		if len(out.Requests) != 1 || out.Requests[0].Operations != 3 || out.Requests[0].Status != http.StatusOK {
			t.Errorf("requests: %+v; want one of 3 operations", out.Requests)
		}
		if len(list(out.Results[0].Data, "shopTypes")) != 10 || get(out.Results[1].Data, "shops", "totalCount") != float64(10) ||
			out.Results[2].Error != "" {
			t.Errorf("results: %+v", out.Results)
		}

		post := func(ops ...string) (int, []json.RawMessage, string) {
			body := "[" + strings.Join(ops, ",") + "]"
			req := mustRequest(http.MethodPost, e.url+"/query", []byte(body), "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var all json.RawMessage
			_ = json.NewDecoder(resp.Body).Decode(&all)
			var each []json.RawMessage
			_ = json.Unmarshal(all, &each)
			return resp.StatusCode, each, string(all)
		}
		op := func(q string) string { b, _ := json.Marshal(map[string]any{"query": q}); return string(b) }

		// Over SURGE_BATCH_MAX, and empty: refused whole (each operation told why).
		if status, _, body := post(op("{ __typename }"), op("{ __typename }"), op("{ __typename }"), op("{ __typename }")); status != http.StatusBadRequest || !strings.Contains(body, "BAD_REQUEST") {
			t.Errorf("4 operations, max 3: %d %s", status, body)
		}
		if status, _, body := post(); status != http.StatusBadRequest || !strings.Contains(body, "BAD_REQUEST") {
			t.Errorf("empty batch: %d %s", status, body)
		}
		// Each operation answers for itself: one invalid among valid ones.
		status, each, body := post(op("{ __typename }"), op("{ nope }"), `{"variables": {}}`)
		if status != http.StatusOK || len(each) != 3 || !strings.Contains(string(each[0]), `"__typename":"Query"`) ||
			!strings.Contains(string(each[1]), "GRAPHQL_VALIDATION_FAILED") || !strings.Contains(string(each[2]), "BAD_REQUEST") {
			t.Errorf("a valid, an invalid and a query-less operation: %d %s", status, body)
		}
		// The operations share the complexity budget (3000): two pages of 100 shops with every
		// field (1 951 each) pass one by one, not in one batch.
		page := `{ shops(first: 100) { edges { node { id createdAt updatedAt name typeID images area address longitude latitude avgPrice sold comments score openHours type { name } } } } }`
		if r := e.do("", page, nil); len(r.Errors) > 0 {
			t.Fatalf("one page alone: %s", r.Raw)
		}
		status, each, body = post(op(page), op(page))
		if status != http.StatusOK || len(each) != 2 || strings.Contains(string(each[0]), "errors") ||
			!strings.Contains(string(each[1]), "COMPLEXITY_LIMIT_EXCEEDED") {
			t.Errorf("two pages in one batch: %d %.600s", status, body)
		}
		// One side effect per batch, as per operation: two sendLoginCode in two operations.
		send := func(phone string) string {
			return op(`mutation { sendLoginCode(phone: "` + phone + `") { expiresIn } }`)
		}
		status, each, body = post(send(testenv.Phone()), send(testenv.Phone()))
		if status != http.StatusOK || len(each) != 2 || strings.Contains(string(each[0]), "errors") ||
			!strings.Contains(string(each[1]), "GRAPHQL_VALIDATION_FAILED") {
			t.Errorf("two sendLoginCode in one batch: %d %s", status, body)
		}
	})
}
