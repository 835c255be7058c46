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
	get := func(q string) *result {
		req, _ := http.NewRequest(http.MethodGet, e.url+"/query?query="+url.QueryEscape(q), nil)
		return e.send(req)
	}
	r := get(`{ shopTypes { name } }`)
	if r.Status != 200 || r.ContentType != "application/graphql-response+json" || len(list(r.Data, "shopTypes")) != 10 {
		t.Fatalf("GET query: %d %s %s", r.Status, r.ContentType, r.Raw)
	}
	req, _ := http.NewRequest(http.MethodGet, e.url+"/query?query="+url.QueryEscape(`mutation { logout }`), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
		t.Fatalf("GET mutation: %d Allow=%q, want 405 Allow: POST", resp.StatusCode, resp.Header.Get("Allow"))
	}
	req, _ = http.NewRequest(http.MethodPut, e.url+"/query", strings.NewReader(`{"query":"{ me { id } }"}`))
	if r := e.send(req); r.Status != http.StatusMethodNotAllowed {
		t.Fatalf("PUT: %d", r.Status)
	}

	// Explicit Accept: application/json gets application/json.
	req, _ = http.NewRequest(http.MethodPost, e.url+"/query", strings.NewReader(`{"query":"{ shopTypes { id } }"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if r := e.send(req); r.Status != 200 || !strings.HasPrefix(r.ContentType, "application/json") {
		t.Fatalf("Accept json: %d %s", r.Status, r.ContentType)
	}
	// Parse and validation errors are 400 with application/graphql-response+json.
	r = e.do("", `{ shopTypes { `, nil)
	if r.Status != 400 || r.code() != "GRAPHQL_PARSE_FAILED" {
		t.Fatalf("parse error: %d %s", r.Status, r.Raw)
	}
	r = e.do("", `{ shopTypes { nope } }`, nil)
	if r.Status != 400 || r.code() != "GRAPHQL_VALIDATION_FAILED" {
		t.Fatalf("validation error: %d %s", r.Status, r.Raw)
	}
	// Production: no suggestions, no introspection.
	if strings.Contains(r.Raw, "Did you mean") {
		t.Fatalf("suggestions leak the schema in production: %s", r.Raw)
	}
	if r := e.do("", `{ __schema { types { name } } }`, nil); len(r.Errors) == 0 {
		t.Fatalf("introspection allowed in production: %s", r.Raw[:min(200, len(r.Raw))])
	}
	// Oversized bodies are refused before parsing.
	big := `{"query":"{ shopTypes { id } }","variables":{"pad":"` + strings.Repeat("x", 2<<20) + `"}}`
	req, _ = http.NewRequest(http.MethodPost, e.url+"/query", strings.NewReader(big))
	req.Header.Set("Content-Type", "application/json")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("2 MiB body: %d, want 413", resp.StatusCode)
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
