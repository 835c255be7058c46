package cache_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/cache"
	"github.com/surgekit/surge/internal/testenv"
)

// pubsubClients counts the pub/sub connections a private redis-server holds.
func pubsubClients(t *testing.T, addr string) int {
	t.Helper()
	admin := redis.NewClient(&redis.Options{Addr: addr})
	defer admin.Close()
	list, err := admin.ClientList(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(list, "\n") {
		if strings.Contains(line, " sub=") && !strings.Contains(line, " sub=0 ") {
			n++
		}
	}
	return n
}

// Caches on one Redis client share one pub/sub connection: a service with a dozen cached
// entities holds one subscriber connection per client, not a dozen.
func TestCachesShareOnePubSubConnectionPerClient(t *testing.T) {
	srv := testenv.StartRedis(t)
	ctx := context.Background()
	rdb := defaultClient(t, srv.Addr)
	var caches []*cache.Cache[int]
	for i := range 3 {
		c, err := cache.New[int](ctx, rdb, cache.Options{Name: fmt.Sprint("shared", i)})
		if err != nil {
			t.Fatal(err)
		}
		caches = append(caches, c)
	}
	if n := pubsubClients(t, srv.Addr); n != 1 {
		t.Fatalf("%d pub/sub connections for 3 caches on one client, want 1", n)
	}
	// Each still gets its own events: a write through another client drops the L1 copy.
	l1 := newCacheOn[int](t, rdb, cache.Options{Name: "shared1", Local: &cache.LocalOptions{Size: 10, TTL: time.Minute}})
	writer := newCacheOn[int](t, defaultClient(t, srv.Addr), cache.Options{Name: "shared1"})
	_ = writer.Set(ctx, "k", 1)
	eventually(t, 5*time.Second, "the L1 cache reads 1", func() bool { v, _ := l1.Get(ctx, "k"); return v == 1 })
	_ = writer.Set(ctx, "k", 2)
	eventually(t, 5*time.Second, "the L1 copy dropped by the event", func() bool { v, _ := l1.Get(ctx, "k"); return v == 2 })
	for _, c := range caches {
		c.Close()
	}
	l1.Close()
	eventually(t, 5*time.Second, "the shared connection closed with the client's last cache", func() bool {
		return pubsubClients(t, srv.Addr) == 1 // the writer's own
	})
}

// A failing batch loader fails the ids it was asked for, not the ids already cached.
func TestLoadManyKeepsCachedIDsWhenLoaderFails(t *testing.T) { onBoth(t, testLoadManyKeepsCachedIDs) }

func testLoadManyKeepsCachedIDs(t *testing.T) {
	ctx := context.Background()
	c := newCache[int](t, cache.Options{Name: uniqueName("manyfail")})
	for _, id := range []string{"a", "b"} {
		if err := c.Set(ctx, id, len(id)); err != nil {
			t.Fatal(err)
		}
	}
	boom := errors.New("database down")
	got, err := c.LoadMany(ctx, []string{"a", "b", "c"}, func(context.Context, []string) (map[string]int, error) { return nil, boom })
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the loader's", err)
	}
	if len(got) != 2 || got["a"] != 1 || got["b"] != 1 {
		t.Fatalf("got %v with the loader failing, want the cached a and b", got)
	}
}

// A load that fails in one process fails the callers waiting on it in the others too, as it
// does for the callers sharing it in its own process, instead of each process retrying the
// failing database in turn.
func TestFailedLoadIsSharedAcrossProcesses(t *testing.T) { onBoth(t, testFailedLoadIsShared) }

func testFailedLoadIsShared(t *testing.T) {
	ctx := context.Background()
	name := uniqueName("failshared")
	var calls atomic.Int32
	boom := errors.New("database down")
	load := func(context.Context, string) (int, error) {
		calls.Add(1)
		time.Sleep(300 * time.Millisecond) // the others must be waiting before it fails
		return 0, boom
	}
	// Every process is set up before any asks: one that asked only after the failure (a slow
	// setup on a busy machine) would rightly load again.
	caches := make([]*cache.Cache[int], 4)
	for i := range caches {
		caches[i] = newCache[int](t, cache.Options{Name: name})
	}
	var wg sync.WaitGroup
	errs := make([]error, len(caches))
	start := make(chan struct{})
	for i, c := range caches {
		wg.Go(func() { <-start; _, errs[i] = c.GetOrLoad(ctx, "k", load) })
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err == nil {
			t.Fatalf("process %d: no error", i)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the failing loader ran %d times for 4 processes waiting on one load, want 1", n)
	}
	shared := 0
	for _, err := range errs {
		if errors.Is(err, cache.ErrPeerLoadFailed) {
			shared++
		}
	}
	if shared == 0 {
		t.Fatalf("no process was answered ErrPeerLoadFailed: %v", errs)
	}
}

// Goroutines that stop waiting for another process's load (their load deadline passes)
// unregister: ids with no event coming do not pile up in the waiters map.
func TestWaitersDoNotLeak(t *testing.T) {
	ctx := context.Background()
	rdb := testenv.Redis(t)
	c := newCacheOn[int](t, rdb, cache.Options{Name: uniqueName("waiters"), LoadTimeout: 20 * time.Millisecond})
	for i := range 20 {
		id := fmt.Sprint(i)
		// A lease held by a process that will never report back.
		if err := rdb.Set(ctx, c.Key(id)+":lease", "someone", 10*time.Second).Err(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rdb.Del(context.Background(), c.Key(id)+":lease") })
		if _, err := c.GetOrLoad(ctx, id, func(context.Context, string) (int, error) { return 1, nil }); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("waiting on a foreign lease: %v, want the load deadline", err)
		}
	}
	if n := cache.Waiters(c); n != 0 {
		t.Fatalf("%d ids still registered as waited for after every caller returned", n)
	}
}

// RunInvalidator reports its failures instead of swallowing them.
func TestInvalidatorReportsErrors(t *testing.T) {
	srv := testenv.StartRedis(t)
	m := cache.NewMetrics(nil)
	name := uniqueName("invalidator")
	c := newCacheOn[int](t, defaultClient(t, srv.Addr), cache.Options{Name: name, Metrics: m, RedisTimeout: 100 * time.Millisecond})
	srv.Kill()
	var reported atomic.Int32
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_ = c.RunInvalidator(ctx, cache.InvalidatorOptions{Every: 50 * time.Millisecond, OnError: func(err error) {
		if err != nil {
			reported.Add(1)
		}
	}})
	if reported.Load() == 0 || testutil.ToFloat64(m.InvalidatorErrors.WithLabelValues(name)) == 0 {
		t.Fatalf("RunInvalidator on a dead Redis: %d errors reported, metric %v", reported.Load(),
			testutil.ToFloat64(m.InvalidatorErrors.WithLabelValues(name)))
	}
}

// A TTL Redis cannot express (under 1 ms, PX's unit) is refused, not silently raised.
func TestSubMillisecondTTLRefused(t *testing.T) {
	rdb := testenv.Redis(t)
	for _, o := range []cache.Options{
		{Name: "x", TTL: 500 * time.Microsecond},
		{Name: "x", AbsentTTL: 10 * time.Microsecond},
		{Name: "x", LeaseTTL: time.Nanosecond},
	} {
		if c, err := cache.New[int](context.Background(), rdb, o); err == nil {
			c.Close()
			t.Errorf("%+v accepted", o)
		}
	}
}
