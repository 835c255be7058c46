package autopipe

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/testenv"
)

// Concurrent calls share pipelines, and each gets its own commands' results.
func TestConcurrentCallsShareRoundTrips(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		key := "autopipe-test:{" + testenv.Phone() + "}"
		t.Cleanup(func() { rdb.Del(ctx, key) })
		p := New(rdb, 1, 64)
		defer p.Close()
		const n = 500
		got := make([]int64, n)
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				var cmd *redis.IntCmd
				if err := p.Do(ctx, func(pp redis.Pipeliner) { cmd = pp.Incr(ctx, key) }); err != nil {
					t.Error(err)
					return
				}
				got[i] = cmd.Val()
			}(i)
		}
		wg.Wait()
		seen := map[int64]bool{}
		for _, v := range got {
			if v < 1 || v > n || seen[v] {
				t.Fatalf("results are not 1..%d each once: %v", n, got)
			}
			seen[v] = true
		}
		if f, in := p.flushes.Load(), p.inline.Count(); f >= n || f == in {
			t.Fatalf("%d calls took %d round trips (%d from the caller's goroutine): nothing was batched", n, f, in)
		} else {
			t.Logf("%d calls in %d pipelines (%d from the caller's goroutine)", n, f, in)
		}
	})
}

func TestClosedAndCancelled(t *testing.T) {
	rdb := testenv.Redis(t)
	p := New(rdb, 1, 8)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Do(ctx, func(redis.Pipeliner) {}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	p.Close()
	if err := p.Do(context.Background(), func(redis.Pipeliner) {}); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed: %v", err)
	}
}

// A call that meets no other goes out from its caller's goroutine, one pipeline each.
func TestLoneCallsGoOutFromTheirGoroutine(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		key := "autopipe-test:{" + testenv.Phone() + "}"
		t.Cleanup(func() { rdb.Del(ctx, key) })
		p := New(rdb, 2, 64)
		defer p.Close()
		for i := int64(1); i <= 5; i++ {
			var cmd *redis.IntCmd
			if err := p.Do(ctx, func(pp redis.Pipeliner) { cmd = pp.Incr(ctx, key) }); err != nil || cmd.Val() != i {
				t.Fatalf("call %d: %d, %v", i, cmd.Val(), err)
			}
		}
		if f, in := p.flushes.Load(), p.inline.Count(); f != 5 || in != 5 {
			t.Fatalf("5 calls one after another: %d pipelines, %d from the caller's goroutine; want 5 and 5", f, in)
		}
	})
}

// On a frozen Redis every call returns at its ctx's deadline, the one sent from its caller's
// goroutine included, with a client that does not honour deadlines itself.
func TestFrozenRedisCallsEndAtTheirDeadline(t *testing.T) {
	r := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr, PoolSize: 8}) // no ContextTimeoutEnabled
	defer rdb.Close()
	p := New(rdb, 1, 8)
	defer func() { r.Thaw(); p.Close() }()
	if err := p.Do(context.Background(), func(pp redis.Pipeliner) { pp.Ping(context.Background()) }); err != nil {
		t.Fatal(err)
	}
	r.Freeze()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			start := time.Now()
			err := p.Do(ctx, func(pp redis.Pipeliner) { pp.Ping(ctx) })
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("a call on a frozen Redis took %v with a 300 ms deadline", took)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("frozen Redis: %v, want the deadline", err)
		}
	}
	if in := p.inline.Count(); in < 2 {
		t.Errorf("%d calls from the caller's goroutine, want the first and at least one on the frozen Redis", in)
	}
}
