package autopipe

import (
	"context"
	"errors"
	"sync"
	"testing"

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
		if f := p.flushes.Load(); f >= n {
			t.Fatalf("%d calls took %d round trips: nothing was batched", n, f)
		} else {
			t.Logf("%d calls in %d pipelines", n, f)
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
