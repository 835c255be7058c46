package e2e_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/surgekit/surge/idgen"
	"github.com/surgekit/surge/internal/app"
	"github.com/surgekit/surge/seckill"
)

// An order told QUEUED that the deployment's Redis loses before it is written (here its sale
// keys and order id counter deleted, as a flush of the deployment's keys would) is LOST over
// GraphQL once the sale is rebuilt: order(id) answers it LOST with its voucher, orderStatus
// sends LOST and completes, myOrders lists it, and the user's new grab is admitted. An id
// issued before the loss that no order has answers ORDER_LOST.
func TestLostOrderOverGraphQL(t *testing.T) {
	e := start(t, func(c *app.Config) { c.SeckillConsumer = false })
	ctx := context.Background()
	v := e.warmVoucher(5)
	token, user := e.user()
	told := e.grab(user, v)
	id := strconv.FormatInt(told, 10)
	if o, _ := get(e.ok(token, orderQuery, map[string]any{"id": id}), "order").(map[string]any); str(o, "status") != "QUEUED" {
		t.Fatalf("order(%s) before the loss = %v, want QUEUED", id, o)
	}

	// The loss: the sale's keys and the id counter go.
	ns := e.app.Config.Namespace
	k := seckill.KeysOf(seckill.KeyPrefix(ns, seckill.DefaultPrefix), v)
	ids, err := e.app.Redis.Keys(ctx, ns+":id:order:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.app.Redis.Del(ctx, append(ids, k.Meta, k.Stock, k.Buyers, k.Orders)...).Err(); err != nil {
		t.Fatal(err)
	}
	// Another user's grab finds the sale lost, starts its rebuild, and is admitted after it.
	_, other := e.user()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := e.app.Seckill.Grab(ctx, other, v)
		if err == nil {
			break
		}
		if !errors.Is(err, seckill.ErrNotReady) || time.Now().After(deadline) {
			t.Fatalf("grab after the loss: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// An id of the lost second that no order has: the loss is inferred at once.
	at, seq := idgen.Decompose(told)
	made, err := idgen.Compose(at, seq+1_000_000)
	if err != nil {
		t.Fatal(err)
	}
	r := e.wantCode("ORDER_LOST", token, orderQuery, map[string]any{"id": strconv.FormatInt(made, 10)})
	if r.Data["order"] != nil {
		t.Fatalf("ORDER_LOST with an order: %v", r.Data)
	}

	// The told order: recorded LOST by the server that told it, within seconds.
	var o map[string]any
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		r := e.do(token, orderQuery, map[string]any{"id": id})
		o, _ = get(r.Data, "order").(map[string]any)
		if str(o, "status") == "LOST" || time.Now().After(deadline) {
			break
		}
	}
	if str(o, "status") != "LOST" || str(o, "id") != id || str(o, "voucher", "id") != itoa(v) || str(o, "user", "id") != itoa(user) {
		t.Fatalf("order(%s) after the loss = %v, want the user's order of voucher %d, LOST", id, o, v)
	}
	ws := e.ws(map[string]any{"Authorization": "Bearer " + token}, nil)
	ws.subscribe("o", orderSub, map[string]any{"o": id})
	if got := ws.nextData("o", "orderStatus"); got != "LOST" {
		t.Fatalf("orderStatus = %v, want LOST", got)
	}
	if m := ws.next("o"); m.Type != "complete" {
		t.Fatalf("after LOST: %s %s, want complete", m.Type, m.Payload)
	}
	d := e.ok(token, myOrders, nil)
	if str(d, "myOrders", "edges", 0, "node", "id") != id || str(d, "myOrders", "edges", 0, "node", "status") != "LOST" {
		t.Fatalf("myOrders = %v, want the LOST order %s", d, id)
	}
	again := e.grabOK(token, itoa(v))
	if str(again, "orderId") == id || str(again, "status") != "QUEUED" {
		t.Fatalf("the user's grab after the loss = %v, want a new QUEUED order", again)
	}
}
