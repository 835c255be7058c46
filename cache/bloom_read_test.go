package cache_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/cache"
	"github.com/surgekit/surge/internal/testenv"
)

func TestBloomFilterOnReadPath(t *testing.T) { onBoth(t, testBloomFilterOnReadPath) }

func testBloomFilterOnReadPath(t *testing.T) {
	ctx := context.Background()
	rdb := backend(t)
	name := uniqueName("bloomread")
	f, err := cache.NewRedisFilter(rdb, name, 10_000, 0.001)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Del(context.Background(), f.Key(), f.Key()+":meta") })
	if _, err := f.Rebuild(ctx, slices.Values([]string{"1", "2", "3"})); err != nil {
		t.Fatal(err)
	}
	m := cache.NewMetrics(nil)
	c := newCacheOn[string](t, rdb, cache.Options{Name: name, Filter: f, Metrics: m})
	var loads atomic.Int32
	load := func(_ context.Context, id string) (string, error) {
		loads.Add(1)
		if len(id) > 2 { // only the small ids exist
			return "", cache.ErrNotFound
		}
		return "shop " + id, nil
	}
	// 1000 ids that never existed: answered absent without the loader and without a key.
	for i := 1000; i < 2000; i++ {
		if _, err := c.GetOrLoad(ctx, fmt.Sprint(i), load); !errors.Is(err, cache.ErrNotFound) {
			t.Fatalf("missing id %d: %v", i, err)
		}
	}
	rejects := testutil.ToFloat64(m.BloomRejects.WithLabelValues(name))
	if rejects < 990 || int(loads.Load()) > 1000-int(rejects) {
		t.Fatalf("%v Bloom rejects and %d loads for 1000 missing ids", rejects, loads.Load())
	}
	if n := countKeys(t, rdb, c.Key("")[:len(c.Key(""))-2]+"*"); n != 0 {
		t.Fatalf("%d keys created for 1000 missing ids (false positives must not cache absences by default)", n)
	}
	if v, err := c.GetOrLoad(ctx, "2", load); err != nil || v != "shop 2" {
		t.Fatalf("existing id: %q %v", v, err)
	}
	// Set adds to the filter, so a new id is readable at once.
	if err := c.Set(ctx, "42", "new shop"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := f.Test(ctx, "42"); !ok {
		t.Fatal("Set did not add the id to the filter")
	}
}

// countKeys counts keys matching pattern on every master.
func countKeys(t *testing.T, rdb redis.UniversalClient, pattern string) int {
	t.Helper()
	ctx := context.Background()
	var n atomic.Int64
	scan := func(ctx context.Context, c *redis.Client) error {
		it := c.Scan(ctx, 0, pattern, 1000).Iterator()
		for it.Next(ctx) {
			n.Add(1)
		}
		return it.Err()
	}
	var err error
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, scan)
	case *redis.Client:
		err = scan(ctx, c)
	default:
		t.Fatalf("unexpected client %T", rdb)
	}
	if err != nil {
		t.Fatal(err)
	}
	return int(n.Load())
}

// A hit costs what it costs without a filter: L1 → GET, and the filter is asked only about
// misses. A Redis hit is one round trip, an L1 hit none, a miss of a never-existing id two
// (GET, then the filter's answer), GetMany/LoadMany of warm ids one.
func TestFilterOnlyOnMiss(t *testing.T) {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr()})
	t.Cleanup(func() { rdb.Close() })
	name := uniqueName("bloomorder")
	f, err := cache.NewRedisFilter(rdb, name, 1000, 0.001)
	if err != nil {
		t.Fatal(err)
	}
	cleanupFilter(t, rdb, f.Key())
	if _, err := f.Rebuild(ctx, slices.Values([]string{"1", "2"})); err != nil {
		t.Fatal(err)
	}
	m := cache.NewMetrics(nil)
	c := newCacheOn[string](t, rdb, cache.Options{Name: name, Filter: f, Metrics: m})
	l1 := newCacheOn[string](t, rdb, cache.Options{Name: name, Filter: f, Local: &cache.LocalOptions{Size: 10, TTL: time.Minute}, Metrics: m})
	load := func(_ context.Context, id string) (string, error) { return "shop " + id, nil }
	for _, id := range []string{"1", "2"} {
		if _, err := c.GetOrLoad(ctx, id, load); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 5*time.Second, "an L1 hit", func() bool {
		_, _ = l1.Get(ctx, "1")
		return testutil.ToFloat64(m.LocalHits.WithLabelValues(name)) > 0
	})
	hook := &roundTrips{}
	rdb.AddHook(hook)
	trips := func(what string, want int64, call func() error) {
		t.Helper()
		start := hook.n.Load()
		if err := call(); err != nil && !errors.Is(err, cache.ErrNotFound) {
			t.Fatalf("%s: %v", what, err)
		}
		if n := hook.n.Load() - start; n != want {
			t.Errorf("%s: %d round trips, want %d", what, n, want)
		}
	}
	trips("GetOrLoad hit", 1, func() error { _, err := c.GetOrLoad(ctx, "1", load); return err })
	trips("Get hit", 1, func() error { _, err := c.Get(ctx, "1"); return err })
	trips("L1 hit", 0, func() error { _, err := l1.GetOrLoad(ctx, "1", load); return err })
	trips("GetMany hits", 1, func() error { _, err := c.GetMany(ctx, []string{"1", "2"}); return err })
	trips("LoadMany hits", 1, func() error {
		_, err := c.LoadMany(ctx, []string{"1", "2"}, func(context.Context, []string) (map[string]string, error) {
			return nil, errors.New("no load expected")
		})
		return err
	})
	trips("GetOrLoad of a never-existing id", 2, func() error {
		_, err := c.GetOrLoad(ctx, "404", load)
		if !errors.Is(err, cache.ErrNotFound) {
			return fmt.Errorf("want ErrNotFound, got %v", err)
		}
		return nil
	})
}
