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

// Deadlines of the frozen-Redis tests: each call gets callDeadline and must be answered within
// callDeadline + callSlack (go-redis alone would wait ReadTimeout, 3 s, per try).
const (
	callDeadline = 300 * time.Millisecond
	callSlack    = 700 * time.Millisecond
)

// within runs call with a callDeadline ctx and fails the test unless it returned a
// deadline error in time.
func within(t *testing.T, name string, call func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callDeadline)
	defer cancel()
	start := time.Now()
	err := call(ctx)
	took := time.Since(start)
	if took > callDeadline+callSlack {
		t.Errorf("%s returned after %v on a %v deadline (err %v)", name, took.Round(time.Millisecond), callDeadline, err)
		return
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("%s on a frozen Redis: err = %v, want DeadlineExceeded", name, err)
	}
}

// TestEntryPointsReturnAtDeadlineOnFrozenRedis: with a default go-redis client (which ignores
// ctx deadlines) on a Redis frozen by SIGSTOP, every public entry point of Service returns at
// its ctx deadline. A grab abandoned in flight and admitted once Redis answers again is named
// by ALREADY_PURCHASED when resent.
func TestEntryPointsReturnAtDeadlineOnFrozenRedis(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr}) // defaults: deadlines ignored
	t.Cleanup(func() { _ = rdb.Close() })
	e := newEnv(t, rdb)
	ctx := context.Background()
	users := e.users(3)
	s := e.service(seckill.Options{})
	syncSvc := e.service(seckill.Options{Strategy: seckill.StrategySync})
	v := e.onSale(s, 10)
	queued, err := s.Grab(ctx, users[0], v)
	if err != nil {
		t.Fatal(err)
	}

	srv.Freeze()
	defer srv.Thaw()
	within(t, "Grab", func(ctx context.Context) error { _, err := s.Grab(ctx, users[1], v); return err })
	within(t, "Grab (sync)", func(ctx context.Context) error { _, err := syncSvc.Grab(ctx, users[2], v); return err })
	within(t, "Order", func(ctx context.Context) error { _, err := s.Order(ctx, users[0], queued.OrderID); return err })
	within(t, "QueuedOrders", func(ctx context.Context) error { _, err := s.QueuedOrders(ctx, users[0]); return err })
	within(t, "Stock", func(ctx context.Context) error { _, err := s.Stock(ctx, v); return err })
	within(t, "Warm", func(ctx context.Context) error { return s.Warm(ctx, v) })
	within(t, "Rebuild", func(ctx context.Context) error { return s.Rebuild(ctx, v) })
	within(t, "WarmAll", func(ctx context.Context) error { return s.WarmAll(ctx) })
	within(t, "Guard", func(ctx context.Context) error {
		return s.Guard(ctx, v, func(context.Context) error { return nil })
	})
	within(t, "Reconcile", func(ctx context.Context) error {
		_, err := s.Reconcile(ctx, seckill.ReconcileOptions{VoucherIDs: []int{v}})
		return err
	})
	srv.Thaw()

	// The grab of users[1] may have reached Redis before the freeze answered: resent, it is
	// admitted once, or told ALREADY_PURCHASED naming the order Redis holds for the user.
	a, err := grabReady(t, s, users[1], v)
	if err != nil && !errors.Is(err, seckill.ErrAlreadyPurchased) {
		t.Fatalf("grab resent after the thaw: %v", err)
	}
	held, herr := rdb.HGet(ctx, seckill.KeysOf(e.prefix, v).Buyers, itoa(users[1])).Int64()
	if herr != nil || held != a.OrderID {
		t.Fatalf("after the thaw the grab answered order %d (%v), Redis holds %d (%v)", a.OrderID, err, held, herr)
	}
}

// TestConsumerSurvivesFrozenRedis: the order consumer neither wedges nor stops while Redis is
// frozen: cancelled during the freeze it returns promptly, and one left running persists the
// orders admitted before and after the freeze once Redis thaws.
func TestConsumerSurvivesFrozenRedis(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	e := newEnv(t, rdb)
	ctx := context.Background()
	users := e.users(4)
	s := e.service(seckill.Options{Block: 200 * time.Millisecond})
	v := e.onSale(s, 10)
	if _, err := s.Grab(ctx, users[0], v); err != nil {
		t.Fatal(err)
	}

	e.consume(e.service(seckill.Options{})) // runs throughout
	cctx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { defer close(stopped); _ = s.RunConsumer(cctx) }()
	e.drained(v, 10*time.Second)

	srv.Freeze()
	time.Sleep(time.Second) // the readers are now waiting on the frozen server
	cancel()
	start := time.Now()
	select {
	case <-stopped:
		if took := time.Since(start); took > callDeadline+callSlack {
			t.Errorf("RunConsumer returned %v after its ctx ended on a frozen Redis", took.Round(time.Millisecond))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("RunConsumer still running 30 s after its ctx ended on a frozen Redis")
	}
	time.Sleep(2 * time.Second) // long enough for any per-call timeout of the running consumer
	srv.Thaw()

	for _, u := range users[1:] {
		if _, err := grabReady(t, s, u, v); err != nil {
			t.Fatal(err)
		}
	}
	e.drained(v, 10*time.Second)
	if st := e.state(v); st.orders != len(users) || st.dbStock != 10-len(users) || st.redisStock != 10-len(users) {
		t.Fatalf("after the thaw: %+v, want %d orders", st, len(users))
	}
}
