package e2e_test

// Issue 13, item 2: persisted queries. Apollo Client's PersistedQueryLink against a live server
// (automatic persisted queries, stored in Redis and shared by the servers of a deployment), and
// a server that runs only the operations of a trusted-documents manifest.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	gql "github.com/surgekit/surge/graph"
	"github.com/surgekit/surge/internal/testenv"
)

// apolloPersisted runs Apollo Client 4 (PersistedQueryLink over HttpLink, one fresh client per
// step) and prints, for each step, the result and every HTTP request the link made.
//
//	node apollo-persisted.mjs <url> <steps JSON>
//
// A step is {query, get (useGETForHashedQueries), ids ({operationName: id}: hashes taken from
// a manifest, as GraphQL Codegen's client preset does; absent: sha256 of the printed query)}.
const apolloPersisted = `
import { ApolloClient, InMemoryCache, HttpLink, gql } from '@apollo/client';
import { PersistedQueryLink } from '@apollo/client/link/persisted-queries';
import { getOperationName } from '@apollo/client/utilities/internal';
import { createHash } from 'node:crypto';

const [url, stepsJSON] = process.argv.slice(2);
let requests;
async function logged(uri, init) {
  const u = new URL(uri);
  const body = init.body ? JSON.parse(init.body) : null;
  const ext = body ? body.extensions : JSON.parse(u.searchParams.get('extensions') || 'null');
  const r = await fetch(uri, init);
  const text = await r.clone().text();
  let codes = [];
  try { codes = (JSON.parse(text).errors || []).map((e) => e.extensions && e.extensions.code); } catch {}
  requests.push({ method: init.method || 'GET', withQuery: !!(body ? body.query : u.searchParams.get('query')),
    hash: ext && ext.persistedQuery ? ext.persistedQuery.sha256Hash : '', status: r.status, codes });
  return r;
}
const sha256 = (s) => createHash('sha256').update(s).digest('hex');
const out = [];
for (const step of JSON.parse(stepsJSON)) {
  requests = [];
  const options = step.ids ? { generateHash: (doc) => step.ids[getOperationName(doc)] } : { sha256 };
  options.useGETForHashedQueries = !!step.get;
  const client = new ApolloClient({ cache: new InMemoryCache(),
    link: new PersistedQueryLink(options).concat(new HttpLink({ uri: url, fetch: logged })) });
  const result = { requests };
  try {
    result.data = (await client.query({ query: gql(step.query), fetchPolicy: 'network-only' })).data;
  } catch (e) {
    result.error = String(e.message);
    result.codes = (e.errors || []).map((x) => x.extensions && x.extensions.code);
  }
  out.push(result);
}
console.log(JSON.stringify(out));
`

type apolloStep struct {
	Query string            `json:"query"`
	GET   bool              `json:"get,omitempty"`
	IDs   map[string]string `json:"ids,omitempty"`
}

type apolloRequest struct {
	Method    string
	WithQuery bool
	Hash      string
	Status    int
	Codes     []string
}

type apolloResult struct {
	Data     map[string]any
	Error    string
	Codes    []string
	Requests []apolloRequest
}

func runApollo(t *testing.T, url string, steps ...apolloStep) []apolloResult {
	t.Helper()
	raw, _ := json.Marshal(steps)
	var out []apolloResult
	runNode(t, apolloPersisted, &out, url, string(raw))
	if len(out) != len(steps) {
		t.Fatalf("%d results for %d steps", len(out), len(steps))
	}
	return out
}

// requestsAre checks the requests of a step: method, whether the query text was sent, and the
// error code of the answer ("" for none).
func requestsAre(t *testing.T, step string, r apolloResult, want ...apolloRequest) {
	t.Helper()
	ok := len(r.Requests) == len(want)
	for i := 0; ok && i < len(want); i++ {
		got := r.Requests[i]
		code := ""
		if len(got.Codes) > 0 {
			code = got.Codes[0]
		}
		wantCode := ""
		if len(want[i].Codes) > 0 {
			wantCode = want[i].Codes[0]
		}
		ok = got.Method == want[i].Method && got.WithQuery == want[i].WithQuery && code == wantCode
	}
	if !ok {
		t.Errorf("%s: requests %+v (result %+v), want %+v", step, r.Requests, r, want)
	}
}

func hashOnly(method string, code ...string) apolloRequest {
	return apolloRequest{Method: method, Codes: code}
}

func withQuery(method string, code ...string) apolloRequest {
	return apolloRequest{Method: method, WithQuery: true, Codes: code}
}

func sha256Hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

const (
	shopTypesQuery = `query ShopTypes { shopTypes { id name } }`
	firstShopQuery = `query FirstShop { shops(first: 1) { totalCount } }`
)

// cleanAPQ deletes the persisted queries a test's servers stored (they would expire anyway).
func cleanAPQ(t *testing.T, e *env) {
	rdb := testenv.Redis(t)
	t.Cleanup(func() {
		ctx := context.Background()
		iter := rdb.Scan(ctx, 0, e.app.Config.Namespace+":apq:*", 1000).Iterator()
		for iter.Next(ctx) {
			rdb.Del(ctx, iter.Val())
		}
	})
}

func TestApolloPersistedQueries(t *testing.T) {
	e := start(t)
	cleanAPQ(t, e)
	other := e.another() // a second server of the deployment: one store in Redis
	res := runApollo(t, e.url+"/query",
		apolloStep{Query: shopTypesQuery},
		apolloStep{Query: shopTypesQuery},
		apolloStep{Query: firstShopQuery, GET: true},
		apolloStep{Query: firstShopQuery, GET: true},
	)
	// A hash the server has not seen: PERSISTED_QUERY_NOT_FOUND, and the link resends it with
	// its query, which the server runs and stores.
	requestsAre(t, "first use", res[0], hashOnly("POST", "PERSISTED_QUERY_NOT_FOUND"), withQuery("POST"))
	// A fresh client: the hash alone is enough now.
	requestsAre(t, "second use", res[1], hashOnly("POST"))
	// useGETForHashedQueries: the hash goes by GET, the query (after NOT_FOUND) by POST.
	requestsAre(t, "GET, first use", res[2], hashOnly("GET", "PERSISTED_QUERY_NOT_FOUND"), withQuery("POST"))
	requestsAre(t, "GET, second use", res[3], hashOnly("GET"))
	for i, r := range res {
		if r.Error != "" || r.Data == nil {
			t.Errorf("step %d: %+v", i, r)
		}
	}
	if n := len(list(res[1].Data, "shopTypes")); n != 10 {
		t.Errorf("shopTypes through its hash: %d types, want the 10 seeded", n)
	}

	// The other server of the deployment knows the hash too; the key lives with a TTL.
	hash := res[1].Requests[0].Hash
	again := runApollo(t, other.url+"/query", apolloStep{Query: shopTypesQuery})
	requestsAre(t, "another server", again[0], hashOnly("POST"))
	key := e.app.Config.Namespace + ":apq:" + hash
	if ttl := testenv.Redis(t).TTL(context.Background(), key).Val(); ttl <= 0 || ttl > 24*time.Hour {
		t.Errorf("%s: TTL %v, want (0, 24h]", key, ttl)
	}
}

// apqPost posts a hash-only or full persisted query as Apollo does.
func (e *env) apqPost(query, hash string, vars map[string]any) *result {
	e.t.Helper()
	body := map[string]any{"extensions": map[string]any{"persistedQuery": map[string]any{"version": 1, "sha256Hash": hash}}}
	if query != "" {
		body["query"] = query
	}
	if vars != nil {
		body["variables"] = vars
	}
	raw, _ := json.Marshal(body)
	return e.send(mustRequest(http.MethodPost, e.url+"/query", raw, "application/json"))
}

// TestPersistedQueryRules covers what Apollo's link never does: hashes that do not match,
// documents that are too large or invalid (never stored), mutations over GET, and APQ turned off.
func TestPersistedQueryRules(t *testing.T) {
	e := startWith(t, map[string]string{"SURGE_APQ_MAX_BYTES": "200", "SURGE_APQ_TTL": "90s"})
	cleanAPQ(t, e)
	rdb := testenv.Redis(t)
	stored := func(hash string) bool {
		return rdb.Exists(context.Background(), e.app.Config.Namespace+":apq:"+hash).Val() == 1
	}
	q := `{ shopTypes { id } }`
	if r := e.apqPost(q, sha256Hex("something else"), nil); r.Status != http.StatusBadRequest || r.code() != "BAD_REQUEST" {
		t.Errorf("a hash that does not match its query: %d %s; want 400 BAD_REQUEST", r.Status, r.Raw)
	}
	if stored(sha256Hex("something else")) || stored(sha256Hex(q)) {
		t.Error("a query stored under a hash that does not match it")
	}
	// The client preset's "sha256:" form of the hash is the same hash.
	if r := e.apqPost(q, "sha256:"+sha256Hex(q), nil); r.Status != http.StatusOK || len(r.Errors) > 0 {
		t.Fatalf("register: %d %s", r.Status, r.Raw)
	}
	if ttl := rdb.TTL(context.Background(), e.app.Config.Namespace+":apq:"+sha256Hex(q)).Val(); ttl <= 0 || ttl > 90*time.Second {
		t.Errorf("stored with TTL %v, want SURGE_APQ_TTL (90s)", ttl)
	}

	// Over SURGE_APQ_MAX_BYTES: run, not stored. Invalid: refused, not stored.
	long := `{ shopTypes { id name ` + strings.Repeat("__typename ", 20) + `} }`
	invalid := `{ shopTypes { nope } }`
	for name, doc := range map[string]string{"too large": long, "invalid": invalid} {
		e.apqPost(doc, sha256Hex(doc), nil)
		if stored(sha256Hex(doc)) {
			t.Errorf("%s document stored", name)
		}
		if r := e.apqPost("", sha256Hex(doc), nil); r.code() != "PERSISTED_QUERY_NOT_FOUND" || r.Errors[0].Message != "PersistedQueryNotFound" {
			t.Errorf("%s document, hash only: %s", name, r.Raw)
		}
	}

	// A stored mutation never runs over GET.
	m := `mutation { logout }`
	if r := e.apqPost(m, sha256Hex(m), nil); r.Status != http.StatusOK {
		t.Fatalf("register a mutation: %s", r.Raw)
	}
	ext := `{"persistedQuery":{"version":1,"sha256Hash":"` + sha256Hex(m) + `"}}`
	req, _ := http.NewRequest(http.MethodGet, e.url+"/query?extensions="+url.QueryEscape(ext), nil)
	if r := e.send(req); r.Status != http.StatusMethodNotAllowed {
		t.Errorf("a stored mutation by GET: %d %s; want 405", r.Status, r.Raw)
	}
	// Nor is one stored by a GET.
	m2 := `mutation { logout } # by GET`
	req, _ = http.NewRequest(http.MethodGet, e.url+"/query?query="+url.QueryEscape(m2)+"&extensions="+
		url.QueryEscape(`{"persistedQuery":{"version":1,"sha256Hash":"`+sha256Hex(m2)+`"}}`), nil)
	if r := e.send(req); r.Status != http.StatusMethodNotAllowed || stored(sha256Hex(m2)) {
		t.Errorf("a mutation with its hash by GET: %d %s, stored %v", r.Status, r.Raw, stored(sha256Hex(m2)))
	}

	// With APQ off, Apollo's link is told to stop sending hashes.
	off := e.another(func(c *appConfig) { c.APQ = false })
	if r := off.apqPost("", sha256Hex(q), nil); r.code() != "PERSISTED_QUERY_NOT_SUPPORTED" {
		t.Errorf("APQ off: %s; want PERSISTED_QUERY_NOT_SUPPORTED", r.Raw)
	}
}

// codegenManifest runs GraphQL Codegen's client preset with persistedDocuments over documents,
// against the served schema (graph.SDL: what surge schema prints), and returns the path of the
// persisted-documents.json it writes and its ids by operation name.
func codegenManifest(t *testing.T, documents string) (string, map[string]string) {
	t.Helper()
	dir, err := os.MkdirTemp(jsTool(t, "SURGE_CODEGEN_DIR"), "run-") // the preset resolves from here
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	config := `{"schema": "schema.graphql", "documents": ["operations.graphql"],
	  "generates": {"gql/": {"preset": "client", "presetConfig": {"persistedDocuments": true}}}}`
	for name, content := range map[string]string{"schema.graphql": gql.SDL(), "operations.graphql": documents, "codegen.json": config} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(filepath.Join(dir, "../node_modules/.bin/graphql-codegen"), "--config", "codegen.json")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("graphql-codegen: %v\n%s", err, out)
	}
	manifest := filepath.Join(dir, "gql/persisted-documents.json")
	raw, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	var docs map[string]string
	if err := json.Unmarshal(raw, &docs); err != nil {
		t.Fatalf("persisted-documents.json: %v\n%s", err, raw)
	}
	ids := map[string]string{}
	for id, doc := range docs {
		if m := operationName.FindStringSubmatch(doc); m != nil {
			ids[m[1]] = id
		}
	}
	return manifest, ids
}

var operationName = regexp.MustCompile(`^(?:query|mutation|subscription)\s+(\w+)`)

// TestTrustedDocuments runs a production server on the manifest GraphQL Codegen's client preset
// writes ({"sha256:<hash>": document}), and one in Apollo's persisted query manifest format.
func TestTrustedDocuments(t *testing.T) {
	manifest, ids := codegenManifest(t, shopTypesQuery+"\n"+`subscription Stock($v: ID!) { voucherStock(voucherId: $v) }`)
	if len(ids) != 2 || !strings.HasPrefix(ids["ShopTypes"], "sha256:") {
		t.Fatalf("the client preset's manifest: ids %v", ids)
	}
	e := startWith(t, map[string]string{"SURGE_TRUSTED_DOCUMENTS": manifest})

	res := runApollo(t, e.url+"/query",
		// The client preset's documents carry their hash (document.__meta__.hash), which
		// Apollo's link sends: one request, no query text.
		apolloStep{Query: shopTypesQuery, IDs: map[string]string{"ShopTypes": ids["ShopTypes"]}},
		// A document the manifest does not hold: refused, and the link does not fall back.
		apolloStep{Query: firstShopQuery},
	)
	requestsAre(t, "trusted document", res[0], hashOnly("POST"))
	if n := len(list(res[0].Data, "shopTypes")); n != 10 {
		t.Errorf("trusted document: %+v", res[0])
	}
	requestsAre(t, "unknown document", res[1], hashOnly("POST", "PERSISTED_QUERY_NOT_IN_LIST"))
	if res[1].Data != nil || !strings.Contains(strings.Join(res[1].Codes, ","), "PERSISTED_QUERY_NOT_IN_LIST") {
		t.Errorf("unknown document: %+v", res[1])
	}

	// Free-form text: only a manifest document's own text runs.
	if r := e.do("", firstShopQuery, nil); r.code() != "QUERY_NOT_IN_SAFELIST" || r.Data != nil {
		t.Errorf("free-form query: %s; want QUERY_NOT_IN_SAFELIST", r.Raw)
	}
	e.ok("", shopTypesQuery, nil)
	// documentId (GraphQL over HTTP's persisted documents), by POST and GET.
	body, _ := json.Marshal(map[string]any{"documentId": ids["ShopTypes"]})
	if r := e.send(mustRequest(http.MethodPost, e.url+"/query", body, "application/json")); len(list(r.Data, "shopTypes")) != 10 {
		t.Errorf("documentId by POST: %s", r.Raw)
	}
	req, _ := http.NewRequest(http.MethodGet, e.url+"/query?documentId="+url.QueryEscape(ids["ShopTypes"]), nil)
	if r := e.send(req); len(list(r.Data, "shopTypes")) != 10 {
		t.Errorf("documentId by GET: %s", r.Raw)
	}
	// Over the WebSocket too.
	v := e.warmVoucher(2)
	c := e.ws(nil, nil)
	c.send(map[string]any{"id": "free", "type": "subscribe", "payload": map[string]any{
		"query": `subscription($v: ID!) { voucherStock(voucherId: $v) }  `, "variables": map[string]any{"v": itoa(v)}}})
	if err := c.nextError("free"); code(err) != "QUERY_NOT_IN_SAFELIST" {
		t.Errorf("free-form subscription: %+v", err)
	}
	c.send(map[string]any{"id": "trusted", "type": "subscribe", "payload": map[string]any{
		"variables": map[string]any{"v": itoa(v)}, "extensions": map[string]any{
			"persistedQuery": map[string]any{"version": 1, "sha256Hash": ids["Stock"]}}}})
	if got := c.nextData("trusted", "voucherStock"); got != float64(2) {
		t.Errorf("trusted subscription: %v", got)
	}

	// Apollo's manifest format (generate-persisted-query-manifest) with ids of any shape.
	apollo := filepath.Join(t.TempDir(), "persisted-query-manifest.json")
	raw, _ := json.Marshal(map[string]any{"format": "apollo-persisted-query-manifest", "version": 1,
		"operations": []map[string]any{{"id": "types-v1", "name": "ShopTypes", "type": "query", "body": shopTypesQuery}}})
	if err := os.WriteFile(apollo, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	a := e.another(func(c *appConfig) { c.TrustedDocuments = apollo })
	body, _ = json.Marshal(map[string]any{"documentId": "types-v1"})
	if r := a.send(mustRequest(http.MethodPost, a.url+"/query", body, "application/json")); len(list(r.Data, "shopTypes")) != 10 {
		t.Errorf("Apollo manifest, documentId: %s", r.Raw)
	}
}

// TestPersistedQueryRegistrationsAreBounded: a client making up distinct valid documents (an
// alias each) cannot store them at its request rate. Past SURGE_APQ_RATE_IP per client address
// and SURGE_APQ_RATE_GLOBAL server-wide a registration still runs, but is not stored, and is
// counted.
func TestPersistedQueryRegistrationsAreBounded(t *testing.T) {
	e := startWith(t, map[string]string{
		"SURGE_APQ_RATE_IP": "3/1m", "SURGE_APQ_RATE_GLOBAL": "5/1m", "SURGE_TRUSTED_PROXY_HEADER": "X-Real-IP",
	})
	cleanAPQ(t, e)
	rdb := testenv.Redis(t)
	stored := 0
	register := func(client string, i int) {
		t.Helper()
		doc := fmt.Sprintf(`{ a%d: __typename }`, i)
		hash := sha256Hex(doc)
		raw, _ := json.Marshal(map[string]any{"query": doc,
			"extensions": map[string]any{"persistedQuery": map[string]any{"version": 1, "sha256Hash": hash}}})
		req := mustRequest(http.MethodPost, e.url+"/query", raw, "application/json")
		req.Header.Set("X-Real-IP", client)
		if r := e.send(req); r.Status != http.StatusOK || len(r.Errors) > 0 || r.Data == nil {
			t.Fatalf("registration %d from %s: %d %s; want it run", i, client, r.Status, r.Raw)
		}
		if rdb.Exists(context.Background(), e.app.Config.Namespace+":apq:"+hash).Val() == 1 {
			stored++
		}
	}
	for i := range 4 {
		register("192.0.2.1", i)
	}
	if stored != 3 {
		t.Errorf("one client registered 4 documents: %d stored, want 3 (SURGE_APQ_RATE_IP)", stored)
	}
	for i := 4; i < 7; i++ {
		register("192.0.2.2", i)
	}
	if stored != 5 {
		t.Errorf("two clients registered 7 documents: %d stored, want 5 (SURGE_APQ_RATE_GLOBAL)", stored)
	}
	for outcome, want := range map[string]float64{"stored": 5, "rate_limited": 2} {
		if got := e.metric(`surge_apq_registrations_total{outcome="` + outcome + `"}`); got != want {
			t.Errorf("surge_apq_registrations_total{outcome=%q} = %v, want %v", outcome, got, want)
		}
	}
	// The counters live under the namespace and expire with their window.
	keys, _ := rdb.Keys(context.Background(), e.app.Config.Namespace+":apq-rate:*").Result()
	if len(keys) != 3 {
		t.Errorf("rate keys %v, want one per client and one server-wide", keys)
	}
	for _, k := range keys {
		if ttl := rdb.TTL(context.Background(), k).Val(); ttl <= 0 || ttl > time.Minute {
			t.Errorf("%s: TTL %v, want (0, 1m]", k, ttl)
		}
	}
}
