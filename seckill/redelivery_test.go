package seckill_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/seckill"
)

// TestRedeliveredBatchIsWrittenOnce: a consumer committed a batch and died before
// acknowledging it, with the next batch read and not written; another consumer claims both at
// once, in one batch whose first orders the database holds already and whose stock is lower
// than the batch (exactly the unwritten orders' units). The batch is written whole on its
// first delivery (each entry is claimed once): the written orders are acknowledged, not
// written or counted again, the others inserted; the stock ends at zero in both stores, nothing is dead-lettered or FAILED.
func TestRedeliveredBatchIsWrittenOnce(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		e := newEnv(t, rdb)
		ctx := context.Background()
		const stock, committed = 40, 10
		users := e.users(stock)
		s := e.service(seckill.Options{})
		v := e.onSale(s, stock)
		for _, u := range users {
			if _, err := s.Grab(ctx, u, v); err != nil {
				t.Fatal(err)
			}
		}
		read := e.readAsDoomed(v, stock)
		e.commitAsConsumer(v, read[:committed]) // its first batch
		reg := prometheus.NewRegistry()
		rescuer := e.service(seckill.Options{ClaimIdle: 300 * time.Millisecond, MaxDeliveries: 2, Registerer: reg})
		e.consume(rescuer)
		e.drained(v, 20*time.Second)
		if n := counter(t, reg, "surge_seckill_claimed_total"); n != stock {
			t.Errorf("%v entries claimed, want %d: each once (an order the batch could not write waits for another claim)", n, stock)
		}
		st := e.state(v)
		if st.orders != stock || st.failed != 0 || st.dupUsers != 0 || st.dbStock != 0 || st.redisStock != 0 || st.buyers != stock {
			t.Fatalf("after the redelivery: %+v, want %d orders, none failed, stock 0 in both stores, %d buyers", st, stock, stock)
		}
		if n, err := rdb.XLen(ctx, seckill.KeysOf(e.prefix, v).Dead).Result(); err != nil || n != 0 {
			t.Fatalf("%d dead letters (%v)", n, err)
		}
	})
}

// readAsDoomed reads n new entries of v's stream as the consumer "doomed" (which then dies):
// they stay pending with it.
func (e *env) readAsDoomed(v, n int) []redis.XMessage {
	e.t.Helper()
	read, err := e.rdb.XReadGroup(context.Background(), &redis.XReadGroupArgs{
		Group: "orders", Consumer: "doomed", Streams: []string{seckill.KeysOf(e.prefix, v).Orders, ">"}, Count: int64(n),
	}).Result()
	if err != nil || len(read[0].Messages) != n {
		e.t.Fatalf("doomed read: %v %v", read, err)
	}
	return read[0].Messages
}

// commitAsConsumer writes the orders of entries as a consumer's transaction does (rows
// CREATED, the stock decremented), without acknowledging them.
func (e *env) commitAsConsumer(v int, entries []redis.XMessage) {
	e.t.Helper()
	ctx := context.Background()
	for _, m := range entries {
		if _, err := e.db.SQL.ExecContext(ctx, "INSERT INTO tb_voucher_order (id, created_at, updated_at, user_id, voucher_id, status, slot) VALUES (?, NOW(), NOW(), ?, ?, 'CREATED', 1)",
			m.Values["o"], m.Values["u"], v); err != nil {
			e.t.Fatal(err)
		}
	}
	if _, err := e.db.SQL.ExecContext(ctx, "UPDATE vouchers SET stock = stock - ? WHERE id = ?", len(entries), v); err != nil {
		e.t.Fatal(err)
	}
}
