package seckill_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/seckill"
)

// No key of a sale lives without a TTL: the buyers and the stream grow with orders. They all
// expire a week after the sale's end, also the ones a grab creates after the warm, and a sale
// warmed after its end keeps its keys a week from then.
func TestSaleKeysExpireWithTheSale(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		e := newEnv(t, rdb)
		ctx := context.Background()
		const week = 7 * 24 * time.Hour
		end := time.Now().Add(24 * time.Hour)
		v := e.voucherWindow(5, time.Now().Add(-time.Hour), end)
		ended := e.voucherWindow(5, time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour))
		users := e.users(1)
		s := e.service(seckill.Options{})
		for _, id := range []int{v, ended} {
			if err := s.Warm(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Grab(ctx, users[0], v); err != nil {
			t.Fatal(err)
		}
		check := func(id int, want time.Time) {
			t.Helper()
			k := seckill.KeysOf(e.prefix, id)
			for _, key := range []string{k.Meta, k.Stock, k.Buyers, k.Orders} {
				if id == ended && (key == k.Buyers || key == k.Orders) {
					continue // no grab: never created
				}
				ttl := rdb.PTTL(ctx, key).Val()
				if got := time.Now().Add(ttl); ttl <= 0 || got.Sub(want).Abs() > time.Minute {
					t.Errorf("%s: TTL %v, want it to expire at %v (a week after the sale)", key, ttl, want.Format(time.RFC3339))
				}
			}
		}
		check(v, end.Add(week))
		check(ended, time.Now().Add(week))
	})
}
