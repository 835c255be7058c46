package e2e_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/surgekit/surge/ent/seckillorder"
	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/seckill"
)

const addStock = `mutation($id: ID!, $n: Int!) { updateVoucher(id: $id, input: {addStock: $n}) { id stock } }`

// TestAddStockWhileSelling: an admin adds units (updateVoucher addStock) while users grab and
// the consumer writes their orders, which decrements the same database stock. Every unit is
// accounted for at the end: initial + added = orders + stock left, in the database and in
// Redis; none is lost or made, as a read-then-set of stock would.
func TestAddStockWhileSelling(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	_, shopID := firstTypeAndShop(e)
	admin := e.login(e.admin)
	const initial, users, adds, unitsPerAdd = 20, 90, 10, 5
	v := e.onSale(admin, shopID, "Restocked live", initial)
	tokens := make([]string, users)
	for i := range tokens {
		tokens[i] = e.login(testenv.Phone())
	}

	add := func() {
		d := e.ok(admin, addStock, map[string]any{"id": v, "n": unitsPerAdd})
		if get(d, "updateVoucher", "stock") == nil {
			t.Fatalf("addStock = %v", d)
		}
	}
	add() // before the grabs, so that a server without addStock fails here

	var admitted, soldOut atomic.Int64
	var wg sync.WaitGroup
	for i, tok := range tokens {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * 10 * time.Millisecond) // spread over the additions
			r := e.do(tok, grab, map[string]any{"v": v})
			switch r.code() {
			case "":
				admitted.Add(1)
			case "SOLD_OUT":
				soldOut.Add(1)
			default:
				t.Errorf("grab: %s", r.Raw)
			}
		}()
	}
	for range adds - 1 {
		time.Sleep(60 * time.Millisecond)
		add()
	}
	wg.Wait()

	deadline := time.Now().Add(20 * time.Second)
	k := seckill.KeysOf(e.app.Config.SeckillKeyPrefix(), atoi(t, v))
	for n, _ := e.app.Redis.XLen(ctx, k.Orders).Result(); n > 0; n, _ = e.app.Redis.XLen(ctx, k.Orders).Result() {
		if time.Now().After(deadline) {
			t.Fatalf("%d orders still queued after 20 s", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	orders := e.app.DB.Ent.SeckillOrder.Query().
		Where(seckillorder.VoucherID(atoi(t, v)), seckillorder.StatusEQ(seckillorder.StatusCREATED)).CountX(ctx)
	total := initial + adds*unitsPerAdd
	t.Logf("admitted %d, sold out %d; orders %d, database stock %d, Redis stock %d of %d units",
		admitted.Load(), soldOut.Load(), orders, e.dbStock(v), e.redisStock(v), total)
	if int64(orders) != admitted.Load() || orders+e.dbStock(v) != total || e.redisStock(v) != e.dbStock(v) {
		t.Fatalf("units lost or made: admitted %d, orders %d + database stock %d != %d (Redis stock %d)",
			admitted.Load(), orders, e.dbStock(v), total, e.redisStock(v))
	}
}

// TestAddStockInput: addStock takes 1 or more units, on a SECKILL voucher, not with stock,
// and not past the stock limit; a refusal writes nothing.
func TestAddStockInput(t *testing.T) {
	e := start(t)
	_, shopID := firstTypeAndShop(e)
	admin := e.login(e.admin)
	v := e.onSale(admin, shopID, "Inputs", 3)
	d := e.ok(admin, addStock, map[string]any{"id": v, "n": 4})
	if get(d, "updateVoucher", "stock").(float64) != 7 || e.redisStock(v) != 7 {
		t.Fatalf("addStock 4 on 3 = %v (Redis %d)", d, e.redisStock(v))
	}
	normal := str(e.ok(admin, createVoucher, map[string]any{"in": map[string]any{
		"shopID": shopID, "title": "Plain", "payValue": 100, "actualValue": 200}}), "createVoucher", "id")
	for _, c := range []struct {
		name, id string
		in       map[string]any
	}{
		{"zero", v, map[string]any{"addStock": 0}},
		{"negative", v, map[string]any{"addStock": -1}},
		{"with stock", v, map[string]any{"addStock": 1, "stock": 5}},
		{"past the limit", v, map[string]any{"addStock": 100_000_000}},
		{"NORMAL voucher", normal, map[string]any{"addStock": 1}},
	} {
		r := e.do(admin, updateVoucher, map[string]any{"id": c.id, "in": c.in})
		if r.code() != "BAD_USER_INPUT" || r.Errors[0].Extensions["field"] != "addStock" {
			t.Errorf("%s: want BAD_USER_INPUT on addStock, got %s", c.name, r.Raw)
		}
	}
	if e.dbStock(v) != 7 || e.redisStock(v) != 7 {
		t.Fatalf("refused additions changed the stock: database %d, Redis %d", e.dbStock(v), e.redisStock(v))
	}
}
