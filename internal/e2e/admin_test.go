package e2e_test

import (
	"context"
	"testing"

	"github.com/surgekit/surge/internal/testenv"
)

const (
	createShop    = `mutation($in: CreateShopInput!) { createShop(input: $in) { id name type { name } } }`
	updateShop    = `mutation($id: ID!, $in: UpdateShopInput!) { updateShop(id: $id, input: $in) { id name score } }`
	createVoucher = `mutation($in: CreateVoucherInput!) { createVoucher(input: $in) { id kind stock beginAt endAt } }`
)

func firstTypeAndShop(e *env) (typeID, shopID string) {
	d := e.ok("", `{ shopTypes { id } shops(first: 1) { edges { node { id } } } }`, nil)
	return str(d, "shopTypes", 0, "id"), str(d, "shops", "edges", 0, "node", "id")
}

func TestAdminGuard(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	typeID, shopID := firstTypeAndShop(e)
	shop := map[string]any{"name": "New Shop", "typeID": typeID, "longitude": 120.1, "latitude": 30.2}
	shops := func() int { return e.app.DB.Ent.Shop.Query().CountX(ctx) }
	before := shops()

	e.wantCode("UNAUTHENTICATED", "", createShop, map[string]any{"in": shop})
	userToken := e.login(testenv.Phone())
	r := e.wantCode("FORBIDDEN", userToken, createShop, map[string]any{"in": shop})
	mustContain(t, r.Errors[0].Message, "admin")
	e.wantCode("FORBIDDEN", userToken, updateShop, map[string]any{"id": shopID, "in": map[string]any{"name": "x"}})
	e.wantCode("FORBIDDEN", userToken, createVoucher, map[string]any{"in": map[string]any{
		"shopID": shopID, "title": "t", "payValue": 1, "actualValue": 2}})
	if shops() != before {
		t.Fatal("a refused mutation changed the database")
	}

	admin := e.login(e.admin)
	if str(e.ok(admin, me, nil), "me", "role") != "ADMIN" {
		t.Fatal("configured admin phone did not get role ADMIN")
	}
	d := e.ok(admin, createShop, map[string]any{"in": shop})
	if str(d, "createShop", "name") != "New Shop" || shops() != before+1 {
		t.Fatalf("createShop = %v", d)
	}
	d = e.ok(admin, updateShop, map[string]any{"id": str(d, "createShop", "id"), "in": map[string]any{"name": "Renamed", "score": 42}})
	if str(d, "updateShop", "name") != "Renamed" || get(d, "updateShop", "score").(float64) != 42 {
		t.Fatalf("updateShop = %v", d)
	}
	d = e.ok(admin, createVoucher, map[string]any{"in": map[string]any{
		"shopID": shopID, "title": "Flash", "payValue": 8000, "actualValue": 10000, "kind": "SECKILL",
		"stock": 5, "beginAt": "2030-01-01T00:00:00Z", "endAt": "2030-01-02T00:00:00Z"}})
	if get(d, "createVoucher", "stock").(float64) != 5 || str(d, "createVoucher", "kind") != "SECKILL" {
		t.Fatalf("createVoucher = %v", d)
	}
}

func TestBadInputIsRefusedAndChangesNothing(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	typeID, shopID := firstTypeAndShop(e)
	admin := e.login(e.admin)
	count := func() [2]int {
		return [2]int{e.app.DB.Ent.Shop.Query().CountX(ctx), e.app.DB.Ent.Voucher.Query().CountX(ctx)}
	}
	before := count()
	seckill := func(over map[string]any) map[string]any {
		in := map[string]any{"shopID": shopID, "title": "Flash", "payValue": 8000, "actualValue": 10000,
			"kind": "SECKILL", "stock": 10, "beginAt": "2030-01-01T00:00:00Z", "endAt": "2030-01-02T00:00:00Z"}
		for k, v := range over {
			in[k] = v
		}
		return map[string]any{"in": in}
	}
	cases := []struct {
		name, query, field string
		vars               map[string]any
	}{
		{"negative stock", createVoucher, "stock", seckill(map[string]any{"stock": -1})},
		{"begin after end", createVoucher, "endAt", seckill(map[string]any{"beginAt": "2030-01-03T00:00:00Z"})},
		{"begin equals end", createVoucher, "endAt", seckill(map[string]any{"endAt": "2030-01-01T00:00:00Z"})},
		{"seckill without stock", createVoucher, "stock", seckill(map[string]any{"stock": nil})},
		{"normal with stock", createVoucher, "kind", seckill(map[string]any{"kind": "NORMAL"})},
		{"malformed time", createVoucher, "", seckill(map[string]any{"beginAt": "tomorrow"})},
		{"unknown shop", createVoucher, "shopID", seckill(map[string]any{"shopID": "4294967296999"})},
		{"bad shop id", createVoucher, "", seckill(map[string]any{"shopID": "abc"})},
		{"empty title", createVoucher, "title", seckill(map[string]any{"title": "   "})},
		{"negative price", createVoucher, "payValue", seckill(map[string]any{"payValue": -5})},
		{"empty shop name", createShop, "name", map[string]any{"in": map[string]any{"name": " ", "typeID": typeID, "longitude": 1, "latitude": 1}}},
		{"unknown shop type", createShop, "typeID", map[string]any{"in": map[string]any{"name": "S", "typeID": "8589934592999", "longitude": 1, "latitude": 1}}},
		{"longitude out of range", createShop, "longitude", map[string]any{"in": map[string]any{"name": "S", "typeID": typeID, "longitude": 500, "latitude": 1}}},
		{"score out of range", updateShop, "score", map[string]any{"id": shopID, "in": map[string]any{"score": 51}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.do(admin, c.query, c.vars)
			if r.code() != "BAD_USER_INPUT" {
				t.Fatalf("want BAD_USER_INPUT, got %d %s", r.Status, r.Raw)
			}
			if c.field != "" && r.Errors[0].Extensions["field"] != c.field {
				t.Fatalf("field = %v, want %s (%s)", r.Errors[0].Extensions["field"], c.field, r.Raw)
			}
			if count() != before {
				t.Fatal("refused input changed the database")
			}
		})
	}
	r := e.wantCode("NOT_FOUND", admin, updateShop, map[string]any{"id": "4294967296999", "in": map[string]any{"name": "x"}})
	mustContain(t, r.Errors[0].Message, "not found")
	if d := e.ok("", `query($id: ID!) { shop(id: $id) { score } }`, map[string]any{"id": shopID}); get(d, "shop", "score").(float64) == 51 {
		t.Fatal("refused update was applied")
	}
}
