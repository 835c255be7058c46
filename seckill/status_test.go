package seckill_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/seckill"
)

// QueuedOrders lists newest first, whatever the order of the vouchers' sale ends.
func TestQueuedOrdersNewestFirst(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		e := newEnv(t, rdb)
		ctx := context.Background()
		now := time.Now()
		// The first voucher's sale ends last, so the registry lists it first.
		vs := []int{e.voucherWindow(5, now.Add(-time.Hour), now.Add(48*time.Hour)), e.voucherWindow(5, now.Add(-time.Hour), now.Add(24*time.Hour))}
		user := e.users(1)[0]
		s := e.service(seckill.Options{})
		var orders []int64
		for _, v := range vs {
			if err := s.Warm(ctx, v); err != nil {
				t.Fatal(err)
			}
			a, err := s.Grab(ctx, user, v)
			if err != nil {
				t.Fatal(err)
			}
			orders = append(orders, a.OrderID)
		}
		q, err := s.QueuedOrders(ctx, user)
		if err != nil || len(q) != 2 {
			t.Fatalf("QueuedOrders = %v, %v", q, err)
		}
		if int64(q[0].ID) != orders[1] || int64(q[1].ID) != orders[0] {
			t.Fatalf("QueuedOrders = [%d %d], want newest first [%d %d]", q[0].ID, q[1].ID, orders[1], orders[0])
		}
	})
}
