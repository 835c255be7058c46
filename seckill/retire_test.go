package seckill_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/seckill"
)

// TestFinishedSaleIsRetired: once a sale has ended (plus Linger) and its orders are persisted,
// its keys expire within minutes rather than a week after, and it leaves the consumer's list;
// a grab meanwhile is still answered ENDED.
func TestFinishedSaleIsRetired(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		e := newEnv(t, rdb)
		ctx := context.Background()
		s := e.service(seckill.Options{Linger: 100 * time.Millisecond})
		v := e.voucherWindow(10, time.Now().Add(-time.Hour), time.Now().Add(1500*time.Millisecond))
		if err := s.Warm(ctx, v); err != nil {
			t.Fatal(err)
		}
		users := e.users(3)
		for _, u := range users {
			if _, err := s.Grab(ctx, u, v); err != nil {
				t.Fatal(err)
			}
		}
		e.consume(s)
		e.drained(v, 10*time.Second)
		k := seckill.KeysOf(e.prefix, v)
		registry := seckill.RegistryKey(e.prefix)
		e.waitFor("the sale leaves the registry", 10*time.Second, func() bool {
			return errors.Is(rdb.ZScore(ctx, registry, "").Err(), redis.Nil) &&
				errors.Is(rdb.ZScore(ctx, registry, itoa(v)).Err(), redis.Nil)
		})
		for _, key := range []string{k.Meta, k.Stock, k.Buyers} {
			ttl, err := rdb.PTTL(ctx, key).Result()
			if err != nil || ttl <= 0 || ttl > 2*time.Minute {
				t.Fatalf("%s: TTL %v (%v), want within 2 minutes", key, ttl, err)
			}
		}
		if _, err := s.Grab(ctx, users[0], v); !errors.Is(err, seckill.ErrEnded) {
			t.Fatalf("grab after the sale: %v, want ErrEnded", err)
		}
		if st := e.state(v); st.orders != len(users) || st.dbStock != 10-len(users) {
			t.Fatalf("database: %+v", st)
		}
	})
}
