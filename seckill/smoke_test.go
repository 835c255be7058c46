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

func TestGrabAndPersist(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		e := newEnv(t, rdb)
		ctx := context.Background()
		v := e.voucher(2)
		users := e.users(3)
		s := e.service(seckill.Options{})
		a, err := s.Grab(ctx, users[0], v)
		if !errors.Is(err, seckill.ErrNotReady) {
			t.Fatalf("first grab on a cold voucher: %v %v, want ErrNotReady", a, err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for errors.Is(err, seckill.ErrNotReady) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
			a, err = s.Grab(ctx, users[0], v)
		}
		if err != nil || a.Status != seckill.StatusQueued || a.OrderID == 0 {
			t.Fatalf("grab: %+v %v", a, err)
		}
		if b, err := s.Grab(ctx, users[0], v); !errors.Is(err, seckill.ErrAlreadyPurchased) || b.OrderID != a.OrderID {
			t.Fatalf("second grab: %+v %v", b, err)
		}
		if _, err := s.Grab(ctx, users[1], v); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Grab(ctx, users[2], v); !errors.Is(err, seckill.ErrSoldOut) {
			t.Fatalf("third user: %v, want sold out", err)
		}
		o, err := s.Order(ctx, users[0], a.OrderID)
		if err != nil || o == nil || o.Status != "QUEUED" {
			t.Fatalf("order before the consumer: %+v %v", o, err)
		}
		e.consume(s)
		e.drained(v, 10*time.Second)
		o, err = s.Order(ctx, users[0], a.OrderID)
		if err != nil || o == nil || o.Status != "CREATED" {
			t.Fatalf("order after the consumer: %+v %v", o, err)
		}
		st := e.state(v)
		if st.orders != 2 || st.dbStock != 0 || st.redisStock != 0 || st.buyers != 2 {
			t.Fatalf("state %+v", st)
		}
	})
}
