package e2e_test

import (
	"strings"
	"testing"

	"github.com/surgekit/surge/internal/testenv"
)

// Issue 13, item 4: a fresh production database gets its first shop type, and so its first
// shop, through the API; shopTypes (cached in Redis, logical expiry) shows each change at once.
func TestShopTypesThroughTheAPI(t *testing.T) {
	e := startWith(t, map[string]string{"SURGE_SEED": "false"})
	admin, user := e.login(e.admin), e.login(testenv.Phone())
	if n := len(list(e.ok("", `{ shopTypes { id } }`, nil), "shopTypes")); n != 0 {
		t.Fatalf("a fresh database has %d shop types", n)
	}
	const create = `mutation($in: CreateShopTypeInput!) { createShopType(input: $in) { id name icon sort } }`
	const update = `mutation($id: ID!, $in: UpdateShopTypeInput!) { updateShopType(id: $id, input: $in) { id name icon sort } }`

	e.wantCode("UNAUTHENTICATED", "", create, map[string]any{"in": map[string]any{"name": "Food"}})
	e.wantCode("FORBIDDEN", user, create, map[string]any{"in": map[string]any{"name": "Food"}})
	for name, in := range map[string]map[string]any{
		"blank name":    {"name": "  "},
		"name too long": {"name": strings.Repeat("x", 33)},
		"icon too long": {"name": "Food", "icon": strings.Repeat("x", 256)},
	} {
		r := e.wantCode("BAD_USER_INPUT", admin, create, map[string]any{"in": in})
		if f := r.Errors[0].Extensions["field"]; f == nil {
			t.Errorf("%s: no extensions.field: %s", name, r.Raw)
		}
	}

	food := e.ok(admin, create, map[string]any{"in": map[string]any{"name": " Food ", "icon": "/icons/food.png", "sort": 2}})
	typeID := str(food, "createShopType", "id")
	if str(food, "createShopType", "name") != "Food" || !strings.HasPrefix(typeID, "858993") {
		t.Fatalf("createShopType: %v", food)
	}
	e.ok(admin, create, map[string]any{"in": map[string]any{"name": "KTV", "sort": 1}})
	names := func() string {
		var out []string
		for _, st := range list(e.ok("", `{ shopTypes { name } }`, nil), "shopTypes") {
			out = append(out, str(st, "name"))
		}
		return strings.Join(out, ",")
	}
	if got := names(); got != "KTV,Food" {
		t.Fatalf("shopTypes after two creates: %s, want KTV,Food (by sort)", got)
	}

	// The first shop, on the new type.
	shop := e.ok(admin, `mutation($in: CreateShopInput!) { createShop(input: $in) { id type { name } } }`,
		map[string]any{"in": map[string]any{"name": "First", "typeID": typeID, "longitude": 120.1, "latitude": 30.2}})
	if str(shop, "createShop", "type", "name") != "Food" {
		t.Fatalf("createShop on the new type: %v", shop)
	}

	upd := e.ok(admin, update, map[string]any{"id": typeID, "in": map[string]any{"name": "Restaurants", "sort": 0}})
	if str(upd, "updateShopType", "name") != "Restaurants" || str(upd, "updateShopType", "icon") != "/icons/food.png" {
		t.Fatalf("updateShopType: %v", upd)
	}
	if got := names(); got != "Restaurants,KTV" {
		t.Fatalf("shopTypes after the update: %s, want Restaurants,KTV", got)
	}
	e.wantCode("BAD_USER_INPUT", admin, update, map[string]any{"id": typeID, "in": map[string]any{"name": ""}})
	e.wantCode("NOT_FOUND", admin, update, map[string]any{"id": "8589934000", "in": map[string]any{"name": "x"}})
	e.wantCode("FORBIDDEN", user, update, map[string]any{"id": typeID, "in": map[string]any{"name": "x"}})
	if got := names(); got != "Restaurants,KTV" {
		t.Fatalf("shopTypes after refused updates: %s", got)
	}
}
