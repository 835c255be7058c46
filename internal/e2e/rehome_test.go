package e2e_test

import (
	"context"
	"strconv"
	"testing"
)

// TestRehomedOrderOverGraphQL: an admitted order whose id is, by the time the consumer writes
// it, another user's persisted order (Redis lost its id counter and the id was issued twice).
// The user who was told the id still finds their order through every door of the API:
// order(id) and orderStatus(orderId) under the id they were told, myOrders, and the orderId of
// ALREADY_PURCHASED; the other user's order is untouched.
func TestRehomedOrderOverGraphQL(t *testing.T) {
	e := start(t, func(c *appConfig) { c.SeckillConsumer = false })
	ctx := context.Background()
	v := e.warmVoucher(5)
	token, user := e.user()
	otherToken, other := e.user()
	told := e.grab(user, v)
	id := strconv.FormatInt(told, 10)
	// The other user's order took that id first (as a second server would have after a flush).
	_, err := e.app.DB.SQL.ExecContext(ctx, "INSERT INTO tb_voucher_order (id, created_at, updated_at, user_id, voucher_id, status, slot) VALUES (?, NOW(), NOW(), ?, ?, 'CREATED', 1)",
		told, other, v)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.app.DB.SQL.ExecContext(ctx, "UPDATE vouchers SET stock = stock - 1 WHERE id = ?", v); err != nil {
		t.Fatal(err)
	}
	ws := e.ws(map[string]any{"Authorization": "Bearer " + token}, nil)
	ws.subscribe("o", orderSub, map[string]any{"o": id})
	if got := ws.nextData("o", "orderStatus"); got != "QUEUED" {
		t.Fatalf("orderStatus before the consumer = %v, want QUEUED", got)
	}

	start(t, func(c *appConfig) { *c = e.app.Config; c.SeckillConsumer = true })
	if got := ws.nextData("o", "orderStatus"); got != "CREATED" {
		t.Fatalf("orderStatus = %v, want CREATED", got)
	}
	ws.complete("o")
	o, _ := get(e.ok(token, orderQuery, map[string]any{"id": id}), "order").(map[string]any)
	stored := str(o, "id")
	if o == nil || stored == id || str(o, "status") != "CREATED" || str(o, "user", "id") != itoa(user) || str(o, "voucher", "id") != itoa(v) {
		t.Fatalf("order(%s) for its user = %v, want their order, CREATED, under a fresh id", id, o)
	}
	d := e.ok(token, myOrders, nil)
	if get(d, "myOrders", "totalCount").(float64) != 1 || str(d, "myOrders", "edges", 0, "node", "id") != stored {
		t.Fatalf("myOrders = %v, want the one order %s", d, stored)
	}
	r := e.wantCode("ALREADY_PURCHASED", token, grab, map[string]any{"v": itoa(v)})
	if r.Errors[0].Extensions["orderId"] != stored {
		t.Fatalf("ALREADY_PURCHASED names %v, want %s", r.Errors[0].Extensions["orderId"], stored)
	}
	theirs, _ := get(e.ok(otherToken, orderQuery, map[string]any{"id": id}), "order").(map[string]any)
	if str(theirs, "id") != id || str(theirs, "user", "id") != itoa(other) {
		t.Fatalf("the other user's order(%s) = %v", id, theirs)
	}
}
