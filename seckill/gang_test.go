package seckill_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/ent/seckillorder"
	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/seckill"
)

// TestGangWrites: quiet vouchers waiting together are written several per transaction (gang
// writes), and what only a voucher's own write sorts out still is: a poisoned order in one
// voucher is dead-lettered while the others' orders are written, and an order already in the
// database (a redelivery after a commit whose acknowledgement was lost) is settled, not
// written twice. Every sale ends exact.
func TestGangWrites(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		e := newEnv(t, rdb)
		ctx := context.Background()
		reg := prometheus.NewRegistry()
		s := e.service(seckill.Options{Registerer: reg, ClaimIdle: 200 * time.Millisecond, MaxDeliveries: 3})
		const vouchers, stock = 40, 10
		users := e.users(3)
		vs := make([]int, vouchers)
		for i := range vs {
			vs[i] = e.onSale(s, stock)
		}
		poisonedV, poisonedU := vs[7], users[1]
		_, err := e.db.SQL.ExecContext(ctx, fmt.Sprintf(`CREATE TRIGGER poison BEFORE INSERT ON tb_voucher_order FOR EACH ROW
			BEGIN IF NEW.user_id = %d AND NEW.voucher_id = %d AND NEW.status = 'CREATED' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'poisoned order'; END IF; END`,
			poisonedU, poisonedV))
		if err != nil {
			t.Fatal(err)
		}
		// Every grab before the consumer starts: all 40 vouchers wait in its queue together.
		var redelivered seckill.Admission
		for _, v := range vs {
			for _, u := range users {
				a, err := s.Grab(ctx, u, v)
				if err != nil {
					t.Fatal(err)
				}
				if v == vs[20] && u == users[2] {
					redelivered = a
				}
			}
		}
		// vs[20]'s last order is in the database already, its unit taken: as if a consumer had
		// committed it and died before acknowledging.
		e.db.Ent.SeckillOrder.Create().SetID(int(redelivered.OrderID)).SetUserID(users[2]).SetVoucherID(vs[20]).
			SetStatus(seckillorder.StatusCREATED).SaveX(ctx)
		e.db.Ent.Voucher.UpdateOneID(vs[20]).AddStock(-1).ExecX(ctx)

		e.consume(s)
		for _, v := range vs {
			e.drained(v, 30*time.Second)
		}
		for _, v := range vs {
			st := e.state(v)
			wantOrders, wantFailed := len(users), 0
			if v == poisonedV {
				wantOrders, wantFailed = len(users)-1, 1
			}
			if st.orders != wantOrders || st.failed != wantFailed || st.dbStock != stock-wantOrders ||
				st.redisStock != stock-wantOrders || st.buyers != wantOrders || st.dupUsers != 0 {
				t.Errorf("voucher %d: %+v; want %d orders, %d failed, stock %d on both sides", v, st, wantOrders, wantFailed, stock-wantOrders)
			}
		}
		committed := series(t, reg, "surge_seckill_gang_writes_total", "outcome", "committed").GetCounter().GetValue()
		split := series(t, reg, "surge_seckill_gang_writes_total", "outcome", "split").GetCounter().GetValue()
		if committed == 0 || split == 0 {
			t.Errorf("gang writes: %v committed, %v split; want both (the poisoned and the redelivered order split theirs)", committed, split)
		}
		t.Logf("gang writes: %v committed, %v split", committed, split)
	})
}
