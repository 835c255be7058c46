package e2e_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/surgekit/surge/ent/seckillorder"
	"github.com/surgekit/surge/internal/app"
	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/seckill"
)

const (
	grab = `mutation($v: ID!) { seckillVoucher(voucherId: $v) {
  orderId status order { id status voucher { id title } user { id } } } }`
	orderQuery = `query($id: ID!) { order(id: $id) { id status createdAt voucher { id title } user { id } } }`
	myOrders   = `query($first: Int, $after: Cursor) { myOrders(first: $first, after: $after) {
  totalCount pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
  edges { cursor node { id status voucher { id title } user { id } } } } }`
	updateVoucher = `mutation($id: ID!, $in: UpdateVoucherInput!) { updateVoucher(id: $id, input: $in) {
  id title subtitle kind status stock beginAt endAt payValue actualValue } }`
	// A voucher id in the vouchers' id range that no voucher has.
	unknownVoucher = "17180000000"
)

// seckillVoucher creates a SECKILL voucher as the admin and returns its id.
func (e *env) seckillVoucher(admin, shopID, title string, stock int, begin, end time.Time) string {
	e.t.Helper()
	d := e.ok(admin, createVoucher, map[string]any{"in": map[string]any{
		"shopID": shopID, "title": title, "payValue": 8000, "actualValue": 10000, "kind": "SECKILL",
		"stock": stock, "beginAt": begin.Format(time.RFC3339), "endAt": end.Format(time.RFC3339)}})
	return str(d, "createVoucher", "id")
}

// onSale creates a SECKILL voucher open from an hour ago for a day.
func (e *env) onSale(admin, shopID, title string, stock int) string {
	return e.seckillVoucher(admin, shopID, title, stock, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
}

func (e *env) userID(token string) string {
	e.t.Helper()
	return str(e.ok(token, `{ me { id } }`, nil), "me", "id")
}

// grabOK grabs and fails the test unless the grab succeeded; it returns the payload.
func (e *env) grabOK(token, voucherID string) map[string]any {
	e.t.Helper()
	d := e.ok(token, grab, map[string]any{"v": voucherID})
	p, _ := get(d, "seckillVoucher").(map[string]any)
	if str(p, "orderId") == "" {
		e.t.Fatalf("grab returned no order id: %v", d)
	}
	return p
}

// waitOrder polls order(id) until it has status want; until then it must be QUEUED, and it
// must never disappear.
func (e *env) waitOrder(token, orderID, want string, within time.Duration) map[string]any {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for {
		o, _ := get(e.ok(token, orderQuery, map[string]any{"id": orderID}), "order").(map[string]any)
		switch st := str(o, "status"); {
		case o == nil:
			e.t.Fatalf("order %s is null for its owner", orderID)
		case st == want:
			return o
		case st != "QUEUED":
			e.t.Fatalf("order %s is %s, waiting for %s", orderID, st, want)
		case time.Now().After(deadline):
			e.t.Fatalf("order %s still %s after %v, want %s", orderID, st, within, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (e *env) dbStock(voucherID string) int {
	e.t.Helper()
	v := e.app.DB.Ent.Voucher.GetX(context.Background(), atoi(e.t, voucherID))
	return *v.Stock
}

func (e *env) redisStock(voucherID string) int {
	e.t.Helper()
	k := seckill.KeysOf(e.app.Config.SeckillKeyPrefix(), atoi(e.t, voucherID))
	n, err := e.app.Redis.Get(context.Background(), k.Stock).Int()
	if err != nil {
		e.t.Fatalf("redis stock of %s: %v", voucherID, err)
	}
	return n
}

func TestSeckillGrab(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	_, shopID := firstTypeAndShop(e)
	admin := e.login(e.admin)
	v := e.onSale(admin, shopID, "Two for the quick", 2)
	u1, u2, u3 := e.login(testenv.Phone()), e.login(testenv.Phone()), e.login(testenv.Phone())

	e.wantCode("UNAUTHENTICATED", "", grab, map[string]any{"v": v})

	// createVoucher warmed the sale: the very first grab is admitted (not NOT_READY).
	p := e.grabOK(u1, v)
	orderID := str(p, "orderId")
	if str(p, "status") != "QUEUED" || str(p, "order", "id") != orderID {
		t.Fatalf("first grab = %v", p)
	}
	if st := str(p, "order", "status"); st != "QUEUED" && st != "CREATED" {
		t.Fatalf("order of the first grab is %s", st)
	}
	if str(p, "order", "voucher", "id") != v || str(p, "order", "voucher", "title") != "Two for the quick" ||
		str(p, "order", "user", "id") != e.userID(u1) {
		t.Fatalf("order edges = %v", get(p, "order"))
	}

	r := e.wantCode("ALREADY_PURCHASED", u1, grab, map[string]any{"v": v})
	if r.Errors[0].Extensions["orderId"] != orderID {
		t.Fatalf("ALREADY_PURCHASED orderId = %v, want %s (%s)", r.Errors[0].Extensions["orderId"], orderID, r.Raw)
	}
	mustContain(t, r.Errors[0].Message, "already")
	if get(r.Data, "seckillVoucher") != nil {
		t.Fatalf("a refused grab returned a payload: %s", r.Raw)
	}

	second := str(e.grabOK(u2, v), "orderId")
	if second == orderID {
		t.Fatal("two users got the same order id")
	}
	r = e.wantCode("SOLD_OUT", u3, grab, map[string]any{"v": v})
	mustContain(t, r.Errors[0].Message, "sold out")
	e.wantCode("SOLD_OUT", u3, grab, map[string]any{"v": v})

	// Not a seckill voucher, or no voucher at all.
	normal := ""
	for _, vo := range list(e.ok("", `query($s: ID!) { vouchers(shopId: $s) { id kind } }`, map[string]any{"s": shopID}), "vouchers") {
		if str(vo, "kind") == "NORMAL" {
			normal = str(vo, "id")
		}
	}
	e.wantCode("NOT_FOUND", u3, grab, map[string]any{"v": unknownVoucher})
	e.wantCode("NOT_FOUND", u3, grab, map[string]any{"v": normal})
	e.wantCode("BAD_USER_INPUT", u3, grab, map[string]any{"v": "abc"})

	// The in-process consumer writes the orders: QUEUED, then CREATED.
	o := e.waitOrder(u1, orderID, "CREATED", 10*time.Second)
	if str(o, "voucher", "title") != "Two for the quick" || str(o, "user", "id") != e.userID(u1) {
		t.Fatalf("created order = %v", o)
	}
	e.waitOrder(u2, second, "CREATED", 10*time.Second)
	d := e.ok(u1, myOrders, nil)
	if get(d, "myOrders", "totalCount").(float64) != 1 || len(list(d, "myOrders", "edges")) != 1 ||
		str(d, "myOrders", "edges", 0, "node", "id") != orderID || str(d, "myOrders", "edges", 0, "node", "status") != "CREATED" {
		t.Fatalf("u1's orders = %v", d)
	}
	// Orders are private: someone else's is null; so is an unknown one; order needs a login.
	if d := e.ok(u2, orderQuery, map[string]any{"id": orderID}); get(d, "order") != nil {
		t.Fatalf("u2 reads u1's order: %v", d)
	}
	if d := e.ok(u3, orderQuery, map[string]any{"id": orderID}); get(d, "order") != nil {
		t.Fatalf("u3 reads u1's order: %v", d)
	}
	if d := e.ok(u1, orderQuery, map[string]any{"id": "999999999999999999"}); get(d, "order") != nil {
		t.Fatalf("unknown order = %v", d)
	}
	e.wantCode("UNAUTHENTICATED", "", orderQuery, map[string]any{"id": orderID})

	// Database and Redis agree: two orders, nothing left.
	n := e.app.DB.Ent.SeckillOrder.Query().Where(seckillorder.VoucherID(atoi(t, v))).CountX(ctx)
	if n != 2 || e.dbStock(v) != 0 || e.redisStock(v) != 0 {
		t.Fatalf("orders %d, database stock %d, Redis stock %d; want 2, 0, 0", n, e.dbStock(v), e.redisStock(v))
	}
}

func TestSeckillWindow(t *testing.T) {
	e := start(t)
	_, shopID := firstTypeAndShop(e)
	admin := e.login(e.admin)
	u := e.login(testenv.Phone())
	now := time.Now()
	soon := e.seckillVoucher(admin, shopID, "Tomorrow", 5, now.Add(24*time.Hour), now.Add(48*time.Hour))
	past := e.seckillVoucher(admin, shopID, "Yesterday", 5, now.Add(-48*time.Hour), now.Add(-24*time.Hour))
	r := e.wantCode("NOT_STARTED", u, grab, map[string]any{"v": soon})
	mustContain(t, r.Errors[0].Message, "not started")
	r = e.wantCode("ENDED", u, grab, map[string]any{"v": past})
	mustContain(t, r.Errors[0].Message, "ended")
	if e.redisStock(soon) != 5 || e.dbStock(soon) != 5 {
		t.Fatal("a refused grab took stock")
	}
	if d := e.ok(u, myOrders, nil); get(d, "myOrders", "totalCount").(float64) != 0 {
		t.Fatalf("refused grabs left orders: %v", d)
	}
}

// With the consumer off, an order stays QUEUED and is served from Redis; a second server of
// the same deployment with the consumer on writes it.
func TestSeckillQueuedThenCreated(t *testing.T) {
	e := start(t, func(c *app.Config) { c.SeckillConsumer = false })
	_, shopID := firstTypeAndShop(e)
	admin := e.login(e.admin)
	a := e.onSale(admin, shopID, "First sale", 10)
	b := e.onSale(admin, shopID, "Second sale", 10)
	u := e.login(testenv.Phone())
	uid := e.userID(u)

	older := str(e.grabOK(u, a), "orderId")
	p := e.grabOK(u, b)
	newer := str(p, "orderId")
	if str(p, "status") != "QUEUED" || str(p, "order", "status") != "QUEUED" || str(p, "order", "voucher", "title") != "Second sale" {
		t.Fatalf("grab = %v", p)
	}
	time.Sleep(1500 * time.Millisecond) // a consumer, if one ran, would have written them by now
	o, _ := get(e.ok(u, orderQuery, map[string]any{"id": older}), "order").(map[string]any)
	if str(o, "status") != "QUEUED" || str(o, "id") != older || str(o, "voucher", "id") != a ||
		str(o, "voucher", "title") != "First sale" || str(o, "user", "id") != uid || str(o, "createdAt") == "" {
		t.Fatalf("queued order = %v", o)
	}
	if e.app.DB.Ent.SeckillOrder.Query().CountX(context.Background()) != 0 {
		t.Fatal("an order reached the database with the consumer off")
	}

	d := e.ok(u, myOrders, nil)
	edges := list(d, "myOrders", "edges")
	if get(d, "myOrders", "totalCount").(float64) != 2 || len(edges) != 2 ||
		str(edges[0], "node", "id") != newer || str(edges[1], "node", "id") != older ||
		str(edges[0], "node", "status") != "QUEUED" || str(edges[1], "node", "voucher", "title") != "First sale" ||
		str(edges[0], "cursor") == "" || get(d, "myOrders", "pageInfo", "hasNextPage") != false {
		t.Fatalf("myOrders with two queued = %v", d)
	}
	// Queued orders count toward first, and their cursors page on.
	d = e.ok(u, myOrders, map[string]any{"first": 1})
	if len(list(d, "myOrders", "edges")) != 1 || str(d, "myOrders", "edges", 0, "node", "id") != newer ||
		get(d, "myOrders", "totalCount").(float64) != 2 || get(d, "myOrders", "pageInfo", "hasNextPage") != true {
		t.Fatalf("myOrders(first: 1) = %v", d)
	}
	d = e.ok(u, myOrders, map[string]any{"first": 1, "after": get(d, "myOrders", "pageInfo", "endCursor")})
	if len(list(d, "myOrders", "edges")) != 1 || str(d, "myOrders", "edges", 0, "node", "id") != older ||
		get(d, "myOrders", "pageInfo", "hasNextPage") != false || get(d, "myOrders", "pageInfo", "hasPreviousPage") != true {
		t.Fatalf("myOrders second page = %v", d)
	}
	// ALREADY_PURCHASED also holds for a queued order.
	r := e.wantCode("ALREADY_PURCHASED", u, grab, map[string]any{"v": a})
	if r.Errors[0].Extensions["orderId"] != older {
		t.Fatalf("orderId = %v, want %s", r.Errors[0].Extensions["orderId"], older)
	}

	e2 := e.another(func(c *app.Config) { c.SeckillConsumer = true })
	e2.waitOrder(u, older, "CREATED", 10*time.Second)
	e.waitOrder(u, newer, "CREATED", 10*time.Second) // the first server reads the database too
	d = e.ok(u, myOrders, nil)
	edges = list(d, "myOrders", "edges")
	if get(d, "myOrders", "totalCount").(float64) != 2 || len(edges) != 2 ||
		str(edges[0], "node", "id") != newer || str(edges[1], "node", "id") != older ||
		str(edges[0], "node", "status") != "CREATED" || str(edges[1], "node", "status") != "CREATED" {
		t.Fatalf("myOrders once written = %v", d)
	}
	if e.dbStock(a) != 9 || e.dbStock(b) != 9 {
		t.Fatalf("database stock %d, %d; want 9, 9", e.dbStock(a), e.dbStock(b))
	}
}

func TestSeckillNotReady(t *testing.T) {
	e := start(t)
	_, shopID := firstTypeAndShop(e)
	admin := e.login(e.admin)
	v := e.onSale(admin, shopID, "Lost", 3)
	u := e.login(testenv.Phone())
	// Redis loses the sale's state: grabs say NOT_READY (never SOLD_OUT) until it is rebuilt.
	k := seckill.KeysOf(e.app.Config.SeckillKeyPrefix(), atoi(t, v))
	if err := e.app.Redis.Del(context.Background(), k.Meta, k.Stock).Err(); err != nil {
		t.Fatal(err)
	}
	r := e.wantCode("NOT_READY", u, grab, map[string]any{"v": v})
	mustContain(t, r.Errors[0].Message, "retry")
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := e.do(u, grab, map[string]any{"v": v})
		if len(r.Errors) == 0 {
			break
		}
		if r.code() != "NOT_READY" || time.Now().After(deadline) {
			t.Fatalf("grab while rebuilding: %s", r.Raw)
		}
		time.Sleep(250 * time.Millisecond)
	}
	if e.redisStock(v) != 2 {
		t.Fatalf("Redis stock after the rebuild and one grab = %d, want 2", e.redisStock(v))
	}
}

func TestSeckillRateLimit(t *testing.T) {
	e := start(t, func(c *app.Config) { c.SeckillRate = 1 }) // 1 per second, burst 2
	_, shopID := firstTypeAndShop(e)
	admin := e.login(e.admin)
	v := e.onSale(admin, shopID, "Bots", 10)
	u, other := e.login(testenv.Phone()), e.login(testenv.Phone())
	var codes []string
	for range 5 {
		codes = append(codes, e.do(u, grab, map[string]any{"v": v}).code())
	}
	if codes[0] != "" || codes[1] != "ALREADY_PURCHASED" {
		t.Fatalf("the burst was refused: %v", codes)
	}
	limited := 0
	for _, c := range codes[2:] {
		switch c {
		case "RATE_LIMITED":
			limited++
		case "ALREADY_PURCHASED":
		default:
			t.Fatalf("unexpected answer %q in %v", c, codes)
		}
	}
	if limited == 0 {
		t.Fatalf("5 grabs at once, none RATE_LIMITED: %v", codes)
	}
	r := e.do(u, grab, map[string]any{"v": v})
	if r.code() == "RATE_LIMITED" {
		mustContain(t, r.Errors[0].Message, "too many")
	}
	// The limit is per user.
	e.grabOK(other, v)
	// It recovers.
	time.Sleep(2100 * time.Millisecond)
	e.wantCode("ALREADY_PURCHASED", u, grab, map[string]any{"v": v})
}

func TestSeckillSyncStrategy(t *testing.T) {
	e := start(t, func(c *app.Config) { c.SeckillStrategy = "sync" })
	_, shopID := firstTypeAndShop(e)
	admin := e.login(e.admin)
	v := e.onSale(admin, shopID, "In one transaction", 1)
	u1, u2 := e.login(testenv.Phone()), e.login(testenv.Phone())
	p := e.grabOK(u1, v)
	id := str(p, "orderId")
	if str(p, "status") != "CREATED" || str(p, "order", "status") != "CREATED" || str(p, "order", "voucher", "title") != "In one transaction" {
		t.Fatalf("sync grab = %v", p)
	}
	if e.dbStock(v) != 0 || e.app.DB.Ent.SeckillOrder.Query().CountX(context.Background()) != 1 {
		t.Fatal("the sync grab did not write the order and the stock at once")
	}
	r := e.wantCode("ALREADY_PURCHASED", u1, grab, map[string]any{"v": v})
	if r.Errors[0].Extensions["orderId"] != id {
		t.Fatalf("orderId = %v, want %s", r.Errors[0].Extensions["orderId"], id)
	}
	e.wantCode("SOLD_OUT", u2, grab, map[string]any{"v": v})
	e.wantCode("NOT_FOUND", u2, grab, map[string]any{"v": unknownVoucher})
	now := time.Now()
	e.wantCode("NOT_STARTED", u2, grab, map[string]any{"v": e.seckillVoucher(admin, shopID, "Later", 1, now.Add(time.Hour), now.Add(2*time.Hour))})
	e.wantCode("ENDED", u2, grab, map[string]any{"v": e.seckillVoucher(admin, shopID, "Over", 1, now.Add(-2*time.Hour), now.Add(-time.Hour))})
	d := e.ok(u1, myOrders, nil)
	if get(d, "myOrders", "totalCount").(float64) != 1 || str(d, "myOrders", "edges", 0, "node", "id") != id ||
		str(d, "myOrders", "edges", 0, "node", "status") != "CREATED" {
		t.Fatalf("myOrders = %v", d)
	}
	// updateVoucher works without Redis state too.
	d = e.ok(admin, updateVoucher, map[string]any{"id": v, "in": map[string]any{"stock": 1}})
	if get(d, "updateVoucher", "stock").(float64) != 1 {
		t.Fatalf("updateVoucher = %v", d)
	}
	if str(e.grabOK(u2, v), "status") != "CREATED" {
		t.Fatal("restocked sync grab not CREATED")
	}
	d = e.ok(admin, `mutation($id: ID!) { updateVoucher(id: $id, input: {addStock: 2}) { stock } }`, map[string]any{"id": v})
	if get(d, "updateVoucher", "stock").(float64) != 2 || e.dbStock(v) != 2 {
		t.Fatalf("addStock 2 on a sold-out sync voucher = %v", d)
	}
	// The grab's answer is the order as stored.
	u3 := e.login(testenv.Phone())
	d = e.ok(u3, `mutation($v: ID!) { seckillVoucher(voucherId: $v) { orderId order { status createdAt } } }`, map[string]any{"v": v})
	stored := e.ok(u3, orderQuery, map[string]any{"id": str(d, "seckillVoucher", "orderId")})
	if str(d, "seckillVoucher", "order", "createdAt") != str(stored, "order", "createdAt") ||
		str(d, "seckillVoucher", "order", "status") != str(stored, "order", "status") {
		t.Fatalf("sync grab answered %v, the stored order is %v", d, stored)
	}
}

func TestUpdateVoucher(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	_, shopID := firstTypeAndShop(e)
	admin := e.login(e.admin)
	v := e.onSale(admin, shopID, "Restock me", 1)
	users := []string{e.login(testenv.Phone()), e.login(testenv.Phone()), e.login(testenv.Phone()), e.login(testenv.Phone())}

	first := str(e.grabOK(users[0], v), "orderId")
	e.wantCode("SOLD_OUT", users[1], grab, map[string]any{"v": v})
	e.waitOrder(users[0], first, "CREATED", 10*time.Second) // the database stock is 0 now

	// Raising the stock of a sold-out voucher puts the units on sale at once.
	d := e.ok(admin, updateVoucher, map[string]any{"id": v, "in": map[string]any{"stock": 1, "title": "  Restocked  "}})
	if get(d, "updateVoucher", "stock").(float64) != 1 || str(d, "updateVoucher", "title") != "Restocked" {
		t.Fatalf("updateVoucher = %v", d)
	}
	if e.redisStock(v) != 1 {
		t.Fatalf("Redis stock after the update = %d, want 1", e.redisStock(v))
	}
	e.grabOK(users[1], v)
	e.wantCode("SOLD_OUT", users[2], grab, map[string]any{"v": v})

	// Off sale: ENDED; back on: the stock decides again.
	d = e.ok(admin, updateVoucher, map[string]any{"id": v, "in": map[string]any{"status": "INACTIVE"}})
	if str(d, "updateVoucher", "status") != "INACTIVE" {
		t.Fatalf("updateVoucher = %v", d)
	}
	e.wantCode("ENDED", users[2], grab, map[string]any{"v": v})
	e.ok(admin, updateVoucher, map[string]any{"id": v, "in": map[string]any{"status": "ACTIVE", "stock": 5}})
	e.grabOK(users[2], v)

	// Moving the window follows too.
	now := time.Now().UTC().Truncate(time.Second)
	d = e.ok(admin, updateVoucher, map[string]any{"id": v, "in": map[string]any{"beginAt": now.Add(time.Hour).Format(time.RFC3339)}})
	if str(d, "updateVoucher", "beginAt") != now.Add(time.Hour).Format(time.RFC3339) {
		t.Fatalf("updateVoucher = %v", d)
	}
	e.wantCode("NOT_STARTED", users[3], grab, map[string]any{"v": v})

	// Bad input: refused with the field named, nothing changed in the database or Redis.
	normal := e.ok(admin, createVoucher, map[string]any{"in": map[string]any{
		"shopID": shopID, "title": "Plain", "payValue": 100, "actualValue": 200}})
	normalID := str(normal, "createVoucher", "id")
	snapshot := func() string {
		a := e.app.DB.Ent.Voucher.GetX(ctx, atoi(t, v))
		b := e.app.DB.Ent.Voucher.GetX(ctx, atoi(t, normalID))
		return a.String() + b.String() + itoa(e.redisStock(v))
	}
	before := snapshot()
	cases := []struct {
		name, id, field string
		in              map[string]any
	}{
		{"endAt before beginAt", v, "endAt", map[string]any{"endAt": now.Format(time.RFC3339)}},
		{"endAt equals beginAt", v, "endAt", map[string]any{"endAt": now.Add(time.Hour).Format(time.RFC3339)}},
		{"beginAt after endAt", v, "beginAt", map[string]any{"beginAt": now.Add(72 * time.Hour).Format(time.RFC3339)}},
		{"both reversed", v, "endAt", map[string]any{"beginAt": now.Add(2 * time.Hour).Format(time.RFC3339), "endAt": now.Add(time.Hour).Format(time.RFC3339)}},
		{"negative stock", v, "stock", map[string]any{"stock": -1}},
		{"huge stock", v, "stock", map[string]any{"stock": 2_000_000_000}},
		{"blank title", v, "title", map[string]any{"title": "  ", "stock": 7}},
		{"negative price", v, "payValue", map[string]any{"payValue": -1}},
		{"stock on a NORMAL voucher", normalID, "stock", map[string]any{"stock": 3}},
		{"window on a NORMAL voucher", normalID, "beginAt", map[string]any{"beginAt": now.Format(time.RFC3339)}},
		{"malformed time", v, "", map[string]any{"endAt": "tomorrow"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.do(admin, updateVoucher, map[string]any{"id": c.id, "in": c.in})
			if r.code() != "BAD_USER_INPUT" {
				t.Fatalf("want BAD_USER_INPUT, got %d %s", r.Status, r.Raw)
			}
			if c.field != "" && r.Errors[0].Extensions["field"] != c.field {
				t.Fatalf("field = %v, want %s (%s)", r.Errors[0].Extensions["field"], c.field, r.Raw)
			}
			if snapshot() != before {
				t.Fatal("refused input changed the voucher")
			}
		})
	}
	e.wantCode("GRAPHQL_VALIDATION_FAILED", admin, updateVoucher, map[string]any{"id": v, "in": map[string]any{"status": "SOLD"}})
	e.wantCode("NOT_FOUND", admin, updateVoucher, map[string]any{"id": unknownVoucher, "in": map[string]any{"stock": 1}})
	e.wantCode("FORBIDDEN", users[0], updateVoucher, map[string]any{"id": v, "in": map[string]any{"stock": 100}})
	e.wantCode("UNAUTHENTICATED", "", updateVoucher, map[string]any{"id": v, "in": map[string]any{"stock": 100}})
	if snapshot() != before {
		t.Fatal("a refused update changed the voucher")
	}
	// A NORMAL voucher takes its own fields.
	d = e.ok(admin, updateVoucher, map[string]any{"id": normalID, "in": map[string]any{"subtitle": "now cheaper", "payValue": 50}})
	if str(d, "updateVoucher", "subtitle") != "now cheaper" || get(d, "updateVoucher", "payValue").(float64) != 50 ||
		get(d, "updateVoucher", "stock") != nil {
		t.Fatalf("updateVoucher on NORMAL = %v", d)
	}
	if r := e.do(admin, updateVoucher, map[string]any{"id": v, "in": map[string]any{}}); r.Status != http.StatusOK || len(r.Errors) > 0 {
		t.Fatalf("empty update: %s", r.Raw)
	}
}

func atoi(t testing.TB, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("id %q: %v", s, err)
	}
	return n
}
