package e2e_test

import (
	"context"
	"sort"
	"testing"
	"time"
)

const shopsPage = `query($first: Int, $after: Cursor, $last: Int, $before: Cursor, $order: [ShopOrder!], $where: ShopWhereInput) {
  shops(first: $first, after: $after, last: $last, before: $before, orderBy: $order, where: $where) {
    totalCount
    pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
    edges { cursor node { id name score type { id name } } }
  }
}`

func TestShopsPaginationOrderAndFilter(t *testing.T) {
	e := start(t)
	seen := map[string]bool{}
	var after any
	pages := 0
	for {
		d := e.ok("", shopsPage, map[string]any{"first": 3, "after": after})
		if get(d, "shops", "totalCount").(float64) != 10 {
			t.Fatalf("totalCount = %v", get(d, "shops", "totalCount"))
		}
		for _, edge := range list(d, "shops", "edges") {
			id := str(edge, "node", "id")
			if seen[id] {
				t.Fatalf("shop %s on two pages", id)
			}
			seen[id] = true
		}
		pages++
		if get(d, "shops", "pageInfo", "hasNextPage") != true {
			break
		}
		after = get(d, "shops", "pageInfo", "endCursor")
	}
	if len(seen) != 10 || pages != 4 {
		t.Fatalf("walked %d shops in %d pages, want 10 in 4", len(seen), pages)
	}

	// Backwards, ordered by score descending.
	d := e.ok("", shopsPage, map[string]any{"last": 4, "order": []any{map[string]any{"field": "SCORE", "direction": "DESC"}}})
	edges := list(d, "shops", "edges")
	if len(edges) != 4 || get(d, "shops", "pageInfo", "hasPreviousPage") != true {
		t.Fatalf("last: 4 → %v", d)
	}
	scores := []float64{}
	for _, edge := range edges {
		scores = append(scores, get(edge, "node", "score").(float64))
	}
	if !sort.SliceIsSorted(scores, func(i, j int) bool { return scores[i] > scores[j] }) {
		t.Fatalf("scores not descending: %v", scores)
	}

	// Filter by type.
	types := e.ok("", `{ shopTypes { id name } }`, nil)
	ktv := ""
	for _, ty := range list(types, "shopTypes") {
		if str(ty, "name") == "KTV" {
			ktv = str(ty, "id")
		}
	}
	d = e.ok("", shopsPage, map[string]any{"first": 20, "where": map[string]any{"typeID": ktv}})
	if get(d, "shops", "totalCount").(float64) != 3 {
		t.Fatalf("KTV shops = %v, want 3", get(d, "shops", "totalCount"))
	}
	for _, edge := range list(d, "shops", "edges") {
		if str(edge, "node", "type", "name") != "KTV" {
			t.Fatalf("filter leaked %v", edge)
		}
	}

	// Page size bounds.
	e.wantCode("BAD_USER_INPUT", "", shopsPage, map[string]any{"first": 101})
	e.wantCode("BAD_USER_INPUT", "", shopsPage, map[string]any{"first": -1})
	if n := len(list(e.ok("", shopsPage, nil), "shops", "edges")); n != 10 {
		t.Fatalf("default page returned %d of 10 shops", n)
	}
}

func TestShopAndVoucherQueries(t *testing.T) {
	e := start(t)
	d := e.ok("", `{ shops(first: 1) { edges { node { id name vouchers { id title kind stock beginAt endAt payValue actualValue } } } } }`, nil)
	shop := get(d, "shops", "edges", 0, "node")
	shopID := str(shop, "id")
	vouchers := list(shop, "vouchers")
	if len(vouchers) != 2 {
		t.Fatalf("seeded shop has %d vouchers, want 2", len(vouchers))
	}
	var seckill any
	for _, v := range vouchers {
		if str(v, "kind") == "SECKILL" {
			seckill = v
		}
	}
	if seckill == nil || get(seckill, "stock").(float64) != 100 {
		t.Fatalf("seckill voucher = %v", seckill)
	}
	begin, _ := time.Parse(time.RFC3339, str(seckill, "beginAt"))
	end, _ := time.Parse(time.RFC3339, str(seckill, "endAt"))
	if now := time.Now(); !begin.Before(now) || !end.After(now) {
		t.Fatalf("seeded seckill window %v–%v is not open now", begin, end)
	}

	if str(e.ok("", `query($id: ID!) { shop(id: $id) { name } }`, map[string]any{"id": shopID}), "shop", "name") != str(shop, "name") {
		t.Fatal("shop(id) disagrees with shops")
	}
	if got := e.ok("", `query($id: ID!) { shop(id: $id) { name } }`, map[string]any{"id": "4294967296999"}); get(got, "shop") != nil {
		t.Fatalf("unknown shop = %v, want null", got)
	}
	vid := str(seckill, "id")
	if str(e.ok("", `query($id: ID!) { voucher(id: $id) { title shop { id } } }`, map[string]any{"id": vid}), "voucher", "shop", "id") != shopID {
		t.Fatal("voucher(id) lost its shop")
	}
	if n := len(list(e.ok("", `query($id: ID!) { vouchers(shopId: $id) { id } }`, map[string]any{"id": shopID}), "vouchers")); n != 2 {
		t.Fatalf("vouchers(shopId) = %d, want 2", n)
	}
	e.wantCode("NOT_FOUND", "", `{ vouchers(shopId: "4294967296999") { id } }`, nil)
	if str(e.ok("", `query($id: ID!) { node(id: $id) { ... on Voucher { title } } }`, map[string]any{"id": vid}), "node", "title") == "" {
		t.Fatal("node(id) did not resolve a voucher")
	}
	// 64-bit ids travel as strings.
	for _, bad := range []string{"abc", "-1", "0", "1.5", "99999999999999999999"} {
		e.wantCode("BAD_USER_INPUT", "", `query($id: ID!) { shop(id: $id) { id } }`, map[string]any{"id": bad})
	}
	_ = context.Background()
}
