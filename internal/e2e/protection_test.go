package e2e_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/surgekit/surge/internal/testenv"
)

func TestQueryDepthAndComplexityLimits(t *testing.T) {
	e := start(t)
	deep := `{ shops(first: 1) { edges { node { vouchers { shop { vouchers { shop { vouchers { shop { vouchers { id } } } } } } } } } } }`
	r := e.wantCode("DEPTH_LIMIT_EXCEEDED", "", deep, nil)
	if r.Status != http.StatusBadRequest || r.Data != nil {
		t.Fatalf("too deep: status %d, data %v; want 400 and nothing executed", r.Status, r.Data)
	}
	// Fragments count too.
	frag := `query { shops(first: 1) { ...A } } fragment A on ShopConnection { edges { node { vouchers { shop { vouchers { shop { vouchers { shop { vouchers { id } } } } } } } } } }`
	e.wantCode("DEPTH_LIMIT_EXCEEDED", "", frag, nil)

	complex := `{ shops(first: 100) { edges { node { id name area address vouchers { id title subtitle rules } } } } }`
	r = e.wantCode("COMPLEXITY_LIMIT_EXCEEDED", "", complex, nil)
	if r.Status != http.StatusBadRequest || r.Data != nil {
		t.Fatalf("too complex: status %d, data %v", r.Status, r.Data)
	}
	// The same selection on a small page is fine: the cost scales with first.
	e.ok("", strings.Replace(complex, "first: 100", "first: 5", 1), nil)
	// Aliases cannot multiply a cheap field past the budget.
	var many strings.Builder
	many.WriteString("{")
	for i := 0; i < 40; i++ {
		many.WriteString(" a" + strings.Repeat("x", i%3) + string(rune('a'+i%26)) + string(rune('a'+i/26)) + ": shops(first: 100) { totalCount }")
	}
	many.WriteString(" }")
	e.wantCode("COMPLEXITY_LIMIT_EXCEEDED", "", many.String(), nil)
	nodes := `query($ids: [ID!]!) { nodes(ids: $ids) { id } }`
	ids := make([]string, 101)
	for i := range ids {
		ids[i] = "4294967297"
	}
	e.wantCode("BAD_USER_INPUT", "", nodes, map[string]any{"ids": ids})
}

func TestGraphQLOverHTTP(t *testing.T) {
	e := start(t)
	request := func(method, path, body, accept string) *result {
		req, _ := http.NewRequest(method, e.url+path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		return e.send(req)
	}
	get := func(q, accept string) *result {
		return request(http.MethodGet, "/query?query="+url.QueryEscape(q), "", accept)
	}
	// A missing Accept, */* and application/json get application/json; clients that accept
	// application/graphql-response+json get it.
	for accept, want := range map[string]string{
		"":                                  "application/json",
		"*/*":                               "application/json",
		"application/json":                  "application/json",
		"application/graphql-response+json": "application/graphql-response+json",
		"application/graphql-response+json, application/json;q=0.9": "application/graphql-response+json",
		"application/graphql-response+json;q=0.5, application/json": "application/json",
	} {
		r := get(`{ shopTypes { name } }`, accept)
		if r.Status != 200 || !strings.HasPrefix(r.ContentType, want) || len(list(r.Data, "shopTypes")) != 10 {
			t.Fatalf("GET with Accept %q: %d %s %s", accept, r.Status, r.ContentType, r.Raw)
		}
	}
	if r := get(`{ __typename }`, "text/html"); r.Status != http.StatusNotAcceptable || r.code() != "BAD_REQUEST" {
		t.Fatalf("Accept text/html only: %d %s", r.Status, r.Raw)
	}

	req, _ := http.NewRequest(http.MethodGet, e.url+"/query?query="+url.QueryEscape(`mutation { logout }`), nil)
	r := e.send(req)
	if r.Status != http.StatusMethodNotAllowed || r.code() != "BAD_REQUEST" {
		t.Fatalf("GET mutation: %d %s, want 405", r.Status, r.Raw)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("Allow") != "POST" {
		t.Fatalf("GET mutation: Allow=%q, want POST", resp.Header.Get("Allow"))
	}
	if r := request(http.MethodPut, "/query", `{"query":"{ me { id } }"}`, ""); r.Status != http.StatusMethodNotAllowed || r.code() != "BAD_REQUEST" {
		t.Fatalf("PUT: %d %s", r.Status, r.Raw)
	}

	// Parse and validation errors: 400 under application/graphql-response+json (no data
	// entry), 200 under application/json (the spec's legacy rule).
	for _, q := range []string{`{ shopTypes { `, `{ shopTypes { nope } }`} {
		r := request(http.MethodPost, "/query", `{"query":"`+q+`"}`, "application/graphql-response+json")
		if r.Status != 400 || r.Data != nil || strings.Contains(r.Raw, `"data"`) {
			t.Fatalf("%s with graphql-response+json: %d %s", q, r.Status, r.Raw)
		}
		if r := request(http.MethodPost, "/query", `{"query":"`+q+`"}`, "application/json"); r.Status != 200 || len(r.Errors) == 0 {
			t.Fatalf("%s with application/json: %d %s", q, r.Status, r.Raw)
		}
	}
	r = e.do("", `{ shopTypes { `, nil)
	if r.code() != "GRAPHQL_PARSE_FAILED" {
		t.Fatalf("parse error: %d %s", r.Status, r.Raw)
	}
	r = e.do("", `{ shopTypes { nope } }`, nil)
	if r.code() != "GRAPHQL_VALIDATION_FAILED" {
		t.Fatalf("validation error: %d %s", r.Status, r.Raw)
	}
	// Production: no suggestions, introspection refused by validation.
	if strings.Contains(r.Raw, "Did you mean") {
		t.Fatalf("suggestions leak the schema in production: %s", r.Raw)
	}
	if r := e.do("", `{ __schema { types { name } } }`, nil); r.Status != 400 || r.code() != "GRAPHQL_VALIDATION_FAILED" {
		t.Fatalf("introspection in production: %d %s", r.Status, r.Raw[:min(200, len(r.Raw))])
	}
	// __typename is no introspection.
	e.ok("", `{ __typename shopTypes { __typename } }`, nil)
	// Oversized bodies are refused before parsing.
	big := `{"query":"{ shopTypes { id } }","variables":{"pad":"` + strings.Repeat("x", 2<<20) + `"}}`
	if r := request(http.MethodPost, "/query", big, ""); r.Status != http.StatusRequestEntityTooLarge || r.code() != "BAD_REQUEST" {
		t.Fatalf("2 MiB body: %d %s, want 413", r.Status, r.Raw)
	}
}

func TestIntrospectionInDevMode(t *testing.T) {
	e := start(t, func(c *appConfig) { c.Introspection = true; c.Mode = "dev" })
	d := e.ok("", `{ __schema { queryType { name } } }`, nil)
	if str(d, "__schema", "queryType", "name") != "Query" {
		t.Fatalf("introspection = %v", d)
	}
	r := e.do("", `{ shopTypes { nam } }`, nil)
	mustContain(t, r.Raw, "Did you mean")
}

func TestPrivateNodesStayPrivate(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	alicePhone, bobPhone := testenv.Phone(), testenv.Phone()
	alice, bob := e.login(alicePhone), e.login(bobPhone)
	aliceID := str(e.ok(alice, me, nil), "me", "id")
	admin := e.login(e.admin)

	// An order row as the seckill flow will write it (64-bit application id).
	u := e.app.DB.Ent.User.Query().Where().AllX(ctx)
	var aliceUser int
	for _, x := range u {
		if x.Phone == alicePhone {
			aliceUser = x.ID
		}
	}
	v := e.app.DB.Ent.Voucher.Query().FirstX(ctx)
	orderID := 1<<62 | 12345
	e.app.DB.Ent.SeckillOrder.Create().SetID(orderID).SetUserID(aliceUser).SetVoucherID(v.ID).SetSlot(true).SaveX(ctx)
	oid := itoa(orderID)

	node := `query($id: ID!) { node(id: $id) { id ... on User { phone } ... on SeckillOrder { status } } }`
	if get(e.ok(bob, node, map[string]any{"id": aliceID}), "node") != nil {
		t.Fatal("bob can read alice's user node")
	}
	if get(e.ok("", node, map[string]any{"id": aliceID}), "node") != nil {
		t.Fatal("anonymous can read a user node")
	}
	if str(e.ok(alice, node, map[string]any{"id": aliceID}), "node", "phone") != alicePhone {
		t.Fatal("alice cannot read herself")
	}
	if get(e.ok(bob, node, map[string]any{"id": oid}), "node") != nil {
		t.Fatal("bob can read alice's order")
	}
	if str(e.ok(alice, node, map[string]any{"id": oid}), "node", "status") != "CREATED" {
		t.Fatal("alice cannot read her order through node")
	}
	if str(e.ok(admin, node, map[string]any{"id": oid}), "node", "id") != oid {
		t.Fatal("admin cannot read an order through node")
	}
	my := `{ myOrders(first: 10) { totalCount edges { node { id voucher { id } } } } }`
	if d := e.ok(alice, my, nil); get(d, "myOrders", "totalCount").(float64) != 1 || str(d, "myOrders", "edges", 0, "node", "id") != oid {
		t.Fatalf("alice's orders = %v", d)
	}
	if d := e.ok(bob, my, nil); get(d, "myOrders", "totalCount").(float64) != 0 {
		t.Fatalf("bob sees orders: %v", d)
	}
	// The database enforces one live order (slot set; FAILED orders have none) per user and voucher.
	if _, err := e.app.DB.Ent.SeckillOrder.Create().SetID(orderID + 1).SetUserID(aliceUser).SetVoucherID(v.ID).SetSlot(true).Save(ctx); err == nil {
		t.Fatal("a second order for the same user and voucher was stored")
	}
}
