package cache_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/cache"
	"github.com/surgekit/surge/internal/testenv"
)

// defaultClient is a go-redis client with default options, as most services build it: it
// ignores context deadlines (no ContextTimeoutEnabled) and waits out ReadTimeout (3 s) with
// retries on a Redis that does not answer.
func defaultClient(t testing.TB, addr string) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { rdb.Close() })
	testenv.TrackKeys(t, rdb)
	return rdb
}

// Every entry point of the package returns at its context's deadline on a hung Redis (a
// redis-server stopped with SIGSTOP, which keeps connections open and answers nothing), with a
// default-configured client. New also succeeds.
func TestEntryPointsHonourDeadlinesOnFrozenRedis(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := defaultClient(t, srv.Addr)
	ctx := context.Background()
	name := uniqueName("deadline")
	filter, err := cache.NewRedisFilter(rdb, name, 1000, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := filter.Rebuild(ctx, slices.Values([]string{"1", "2"})); err != nil {
		t.Fatal(err)
	}
	c := newCacheOn[string](t, rdb, cache.Options{Name: name, Filter: filter})
	logical := newCacheOn[string](t, rdb, cache.Options{Name: name + "l", Mode: cache.ModeLogical})
	load := func(context.Context, string) (string, error) { return "db", nil }
	loadMany := func(_ context.Context, ids []string) (map[string]string, error) {
		out := map[string]string{}
		for _, id := range ids {
			out[id] = "db"
		}
		return out, nil
	}
	srv.Freeze()
	defer srv.Thaw()

	const deadline = 300 * time.Millisecond
	calls := map[string]func(ctx context.Context) error{
		"Get":       func(ctx context.Context) error { _, err := c.Get(ctx, "1"); return err },
		"GetOrLoad": func(ctx context.Context) error { _, err := c.GetOrLoad(ctx, "1", load); return err },
		"GetOrLoad logical": func(ctx context.Context) error {
			_, err := logical.GetOrLoad(ctx, "1", load)
			return err
		},
		"GetMany":  func(ctx context.Context) error { _, err := c.GetMany(ctx, []string{"1", "2"}); return err },
		"LoadMany": func(ctx context.Context) error { _, err := c.LoadMany(ctx, []string{"1", "2"}, loadMany); return err },
		"Set":      func(ctx context.Context) error { return c.Set(ctx, "1", "v") },
		"Delete":   func(ctx context.Context) error { return c.Delete(ctx, "1", "2") },
		"Invalidate": func(ctx context.Context) error {
			return c.Invalidate(ctx, "1", func(context.Context) error { return nil })
		},
		"DrainIntents": func(ctx context.Context) error { _, err := c.DrainIntents(ctx, 0); return err },
		"New": func(ctx context.Context) error {
			n, err := cache.New[string](ctx, rdb, cache.Options{Name: name + "new"})
			if err == nil {
				n.Close()
			}
			return err
		},
		"RunInvalidator": func(ctx context.Context) error {
			return c.RunInvalidator(ctx, cache.InvalidatorOptions{Every: 50 * time.Millisecond})
		},
		"Close": func(context.Context) error { // no ctx: bounded by RedisTimeout
			n := newCacheOn[string](t, defaultClient(t, srv.Addr), cache.Options{Name: name + "close", RedisTimeout: deadline})
			return n.Close()
		},
		"RedisFilter.Estimate": func(ctx context.Context) error { _, err := filter.Estimate(ctx); return err },
		"RedisFilter.Test":     func(ctx context.Context) error { _, err := filter.Test(ctx, "1"); return err },
		"RedisFilter.TestMany": func(ctx context.Context) error { _, err := filter.TestMany(ctx, []string{"1"}); return err },
		"RedisFilter.Add":      func(ctx context.Context) error { return filter.Add(ctx, "3") },
		"RedisFilter.Rebuild": func(ctx context.Context) error {
			_, err := filter.Rebuild(ctx, slices.Values([]string{"1"}))
			return err
		},
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	took := map[string]time.Duration{}
	for what, call := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, deadline)
			defer cancel()
			start := time.Now()
			err := call(cctx)
			d := time.Since(start)
			mu.Lock()
			took[what] = d
			mu.Unlock()
			if what == "New" && err != nil {
				t.Errorf("New on a hung Redis: %v, want a cache (the subscription comes up later)", err)
			}
		}()
	}
	wg.Wait()
	for what, d := range took {
		// 300 ms deadline; the slack is for -race on a shared 2-core machine, far below the
		// client's own 3 s read timeout.
		if d > deadline+time.Second {
			t.Errorf("%s returned after %v on a %v deadline", what, d.Round(time.Millisecond), deadline)
		}
	}
}

// With a hung Redis and a default client, reads do not wait out the client's timeouts: a
// breaker opens after a few failed calls, L1 copies are served past their TTL (bounded by
// MaxStale, counted), other ids go to the bounded loader, and it all recovers with Redis.
func TestOutageBreakerServesStaleL1AndLoader(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := defaultClient(t, srv.Addr)
	ctx := context.Background()
	name := uniqueName("breaker")
	m := cache.NewMetrics(nil)
	c := newCacheOn[string](t, rdb, cache.Options{Name: name, Metrics: m, OutageLoads: 2,
		Local: &cache.LocalOptions{Size: 100, TTL: 100 * time.Millisecond, MaxStale: 1500 * time.Millisecond}})
	var loads atomic.Int32
	load := func(context.Context, string) (string, error) { loads.Add(1); return "db", nil }
	if err := c.Set(ctx, "hot", "v"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "an L1 copy of hot", func() bool {
		_, _ = c.Get(ctx, "hot")
		return testutil.ToFloat64(m.LocalHits.WithLabelValues(name)) > 0
	})
	srv.Freeze()
	defer srv.Thaw()
	time.Sleep(150 * time.Millisecond) // the L1 copy is now past its TTL

	// 8 readers of the hot id for 2 s (no deadline of their own): the first calls wait out
	// RedisTimeout (1 s), then the breaker is open.
	var ok, failed atomic.Int64
	stop := time.Now().Add(2 * time.Second)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				v, err := c.GetOrLoad(ctx, "hot", load)
				if err == nil && v == "v" {
					ok.Add(1)
				} else {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("hung Redis, 2 s: %d reads served, %d failed; breaker opened %v times, %v stale L1 copies served",
		ok.Load(), failed.Load(), testutil.ToFloat64(m.BreakerOpens.WithLabelValues(name)),
		testutil.ToFloat64(m.StaleLocalServed.WithLabelValues(name)))
	if ok.Load() < 1000 {
		t.Fatalf("%d reads served in 2 s of a hung Redis, want the L1 copy served past its TTL (≥ 1000)", ok.Load())
	}
	if testutil.ToFloat64(m.BreakerOpens.WithLabelValues(name)) < 1 {
		t.Fatal("the breaker never opened")
	}
	// An id with no L1 copy goes to the loader, at once.
	start := time.Now()
	if v, err := c.GetOrLoad(ctx, "cold", load); err != nil || v != "db" {
		t.Fatalf("cold id during the outage: %q %v", v, err)
	}
	if d := time.Since(start); d > 200*time.Millisecond {
		t.Fatalf("cold id during the outage took %v: the open breaker should skip Redis", d)
	}
	// Get has no loader: it fails fast with ErrUnavailable.
	start = time.Now()
	if _, err := c.Get(ctx, "cold2"); !errors.Is(err, cache.ErrUnavailable) || time.Since(start) > 200*time.Millisecond {
		t.Fatalf("Get during the outage: %v after %v, want ErrUnavailable at once", err, time.Since(start))
	}
	// Past MaxStale the copy is no longer served: the loader answers.
	time.Sleep(1600 * time.Millisecond)
	if v, err := c.GetOrLoad(ctx, "hot", load); err != nil || v != "db" {
		t.Fatalf("past MaxStale: %q %v, want the loader's value", v, err)
	}

	srv.Thaw()
	eventually(t, 10*time.Second, "reads from Redis again", func() bool {
		v, err := c.Get(ctx, "hot")
		return err == nil && v == "v"
	})
}

// New succeeds while Redis is down; once Redis is up the cache works, including the events
// that invalidate L1 copies in other processes.
func TestNewWhileRedisIsDown(t *testing.T) {
	srv := testenv.StartRedis(t)
	srv.Kill()
	ctx := context.Background()
	name := uniqueName("down")
	start := time.Now()
	a, err := cache.New[string](ctx, defaultClient(t, srv.Addr), cache.Options{Name: name,
		Local: &cache.LocalOptions{Size: 10, TTL: time.Minute}})
	if err != nil {
		t.Fatalf("New with Redis down: %v", err)
	}
	defer a.Close()
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("New took %v with Redis down", d)
	}
	srv.Start()
	b := newCacheOn[string](t, defaultClient(t, srv.Addr), cache.Options{Name: name})
	eventually(t, 15*time.Second, "a reads b's value", func() bool {
		_ = b.Set(ctx, "k", "v1")
		v, err := a.Get(ctx, "k")
		return err == nil && v == "v1"
	})
	// a's subscription is up: b's write drops a's L1 copy (a minute TTL) at once.
	eventually(t, 15*time.Second, "a sees b's next write", func() bool {
		_ = b.Set(ctx, "k", "v2")
		v, _ := a.Get(ctx, "k")
		return v == "v2"
	})
}
