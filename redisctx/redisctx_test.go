package redisctx_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/redisctx"
)

// A default go-redis client on a frozen Redis waits out ReadTimeout and retries; through Do
// the caller is answered at its deadline, and the abandoned call's late callback still runs
// once Redis answers again.
func TestDoReturnsAtDeadlineOnFrozenRedis(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr}) // defaults: deadlines ignored
	defer rdb.Close()
	ctx := context.Background()
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if redisctx.HonoursDeadlines(rdb) {
		t.Fatal("a default client does not honour deadlines")
	}

	srv.Freeze()
	var lateErr atomic.Value
	lateDone := make(chan string, 1)
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := redisctx.DoThen(cctx, rdb, func(ctx context.Context) (string, error) {
		return rdb.Get(ctx, "k").Result()
	}, func(v string, err error) {
		if err != nil {
			lateErr.Store(err)
		}
		lateDone <- v
	})
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	if took > time.Second {
		t.Fatalf("Do returned after %v on a 200 ms deadline", took)
	}
	if n := redisctx.Abandoned(rdb); n != 1 {
		t.Fatalf("Abandoned = %d, want 1", n)
	}
	srv.Thaw()
	select {
	case <-lateDone:
	case <-time.After(15 * time.Second):
		t.Fatal("the abandoned call never reported back")
	}
	if n := redisctx.Abandoned(rdb); n != 0 {
		t.Fatalf("Abandoned = %d after the late call ended, want 0", n)
	}
	v, err := redisctx.Do(ctx, rdb, func(ctx context.Context) (string, error) { return rdb.Get(ctx, "k").Result() })
	if err != nil || v != "v" {
		t.Fatalf("after thaw: %q, %v", v, err)
	}
}

// Without Do, the same call on the same frozen Redis outlives its deadline: the reason Do
// exists (if go-redis ever honours deadlines by default, this test says so).
func TestDefaultClientIgnoresDeadline(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ReadTimeout: time.Second, MaxRetries: -1})
	defer rdb.Close()
	ctx := context.Background()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	srv.Freeze()
	defer srv.Thaw()
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_ = rdb.Get(cctx, "k").Err()
	if took := time.Since(start); took < 500*time.Millisecond {
		t.Fatalf("a default client returned after %v: go-redis now honours deadlines, Do's goroutine could go", took)
	}
}

// Past MaxAbandoned stuck calls, Do refuses at once instead of starting more goroutines.
func TestDoBoundsAbandonedCalls(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 4, PoolTimeout: 20 * time.Second, ReadTimeout: 20 * time.Second})
	defer rdb.Close()
	ctx := context.Background()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	srv.Freeze()
	for i := 0; i < redisctx.MaxAbandoned; i++ {
		cctx, cancel := context.WithCancel(ctx)
		cancel() // already done: Do answers without calling
		if _, err := redisctx.Do(cctx, rdb, func(ctx context.Context) (string, error) { return rdb.Get(ctx, "k").Result() }); !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v", err)
		}
	}
	// Calls that really hang: each abandoned once it has started (a deadline could pass
	// before Do starts the call on a loaded machine, and then nothing is abandoned).
	for i := 0; i < redisctx.MaxAbandoned; i++ {
		cctx, cancel := context.WithCancel(ctx)
		started := make(chan struct{})
		go func() { <-started; cancel() }()
		_, _ = redisctx.Do(cctx, rdb, func(ctx context.Context) (string, error) {
			close(started)
			return rdb.Get(context.Background(), "k").Result()
		})
		cancel()
	}
	if n := redisctx.Abandoned(rdb); n != redisctx.MaxAbandoned {
		t.Fatalf("Abandoned = %d, want %d", n, redisctx.MaxAbandoned)
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	start := time.Now()
	_, err := redisctx.Do(cctx, rdb, func(ctx context.Context) (string, error) { return rdb.Get(ctx, "k").Result() })
	if !errors.Is(err, redisctx.ErrUnresponsive) || time.Since(start) > 100*time.Millisecond {
		t.Fatalf("err = %v after %v, want ErrUnresponsive at once", err, time.Since(start))
	}
	srv.Thaw()
	deadline := time.Now().Add(30 * time.Second)
	for redisctx.Abandoned(rdb) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := redisctx.Abandoned(rdb); n != 0 {
		t.Fatalf("%d abandoned calls never ended after thaw", n)
	}
}

// A client that honours deadlines with a ctx that has one: a plain call, same answer.
func TestDoPlainWhenClientHonoursDeadlines(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	if !redisctx.HonoursDeadlines(rdb) {
		t.Fatal("ContextTimeoutEnabled client not recognised")
	}
	srv.Freeze()
	defer srv.Thaw()
	cctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := redisctx.Err(cctx, rdb, func(ctx context.Context) error { return rdb.Get(ctx, "k").Err() })
	if err == nil || time.Since(start) > time.Second {
		t.Fatalf("err = %v after %v", err, time.Since(start))
	}
	if n := redisctx.Abandoned(rdb); n != 0 {
		t.Fatalf("Abandoned = %d: the call should have run in the caller's goroutine", n)
	}
}
