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
	testenv.TrackKeys(t, rdb)
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

// A RedisFilter that cannot answer (never built, or deleted) fails open: misses go to the
// loader. Not silently: each failed check is counted, and while the filter is unusable the
// absences the loader finds are cached, so the same missing ids do not reach the database
// again on every pass.
func TestUnusableFilterIsCountedAndAbsencesCached(t *testing.T) {
	onBoth(t, testUnusableFilterIsCountedAndAbsencesCached)
}

func testUnusableFilterIsCountedAndAbsencesCached(t *testing.T) {
	for _, how := range []string{"never built", "deleted"} {
		t.Run(how, func(t *testing.T) {
			ctx := context.Background()
			rdb := backend(t)
			f := newRedisFilter(t, rdb, 1000, 0.01)
			if how == "deleted" {
				rebuild(t, f, ids("real", 10))
				if err := rdb.Del(ctx, f.Key()).Err(); err != nil {
					t.Fatal(err)
				}
			}
			m := cache.NewMetrics(nil)
			name := uniqueName("badfilter")
			c := newCacheOn[string](t, rdb, cache.Options{Name: name, Filter: f, Metrics: m})
			var loads atomic.Int32
			missing := func(context.Context, string) (string, error) { loads.Add(1); return "", cache.ErrNotFound }
			missingMany := func(_ context.Context, ids []string) (map[string]string, error) {
				loads.Add(int32(len(ids)))
				return nil, nil
			}
			ghosts := ids("ghost", 50)
			for pass := 1; pass <= 2; pass++ {
				before := loads.Load()
				for _, id := range ghosts[:25] {
					if _, err := c.GetOrLoad(ctx, id, missing); !errors.Is(err, cache.ErrNotFound) {
						t.Fatalf("pass %d, %s: %v", pass, id, err)
					}
				}
				if _, err := c.LoadMany(ctx, ghosts[25:], missingMany); err != nil {
					t.Fatalf("pass %d, LoadMany: %v", pass, err)
				}
				got, want := loads.Load()-before, int32(50)
				if pass == 2 {
					want = 0
				}
				if got != want {
					t.Fatalf("pass %d: %d of 50 missing ids reached the loader, want %d", pass, got, want)
				}
			}
			if n := testutil.ToFloat64(m.FilterErrors.WithLabelValues(name)); n < 26 {
				t.Fatalf("filter errors = %v, want every failed check counted (25 single + 1 batch at least)", n)
			}
		})
	}
}

// A filter filled far past its expected size lets many missing ids through. The cache counts
// those false positives, so the observed rate (false positives / (false positives + rejects))
// shows it, and RedisFilter.Estimate reports the fill from the bitmap itself.
func TestOverfilledFilterIsVisible(t *testing.T) {
	ctx := context.Background()
	rdb := testenv.Redis(t)
	f := newRedisFilter(t, rdb, 1000, 0.01)
	rebuild(t, f, ids("real", 3000)) // 3× the expected ids
	m := cache.NewMetrics(nil)
	name := uniqueName("overfull")
	c := newCacheOn[string](t, rdb, cache.Options{Name: name, Filter: f, Metrics: m})
	missing := func(context.Context, string) (string, error) { return "", cache.ErrNotFound }
	for _, id := range ids("ghost", 1000) {
		if _, err := c.GetOrLoad(ctx, id, missing); !errors.Is(err, cache.ErrNotFound) {
			t.Fatal(err)
		}
	}
	fp := testutil.ToFloat64(m.BloomFalsePositives.WithLabelValues(name))
	rejects := testutil.ToFloat64(m.BloomRejects.WithLabelValues(name))
	observed := fp / (fp + rejects)
	est, err := f.Estimate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("observed false-positive rate %.3f (%v of %v); estimate from the bitmap: %d ids, rate %.3f",
		observed, fp, fp+rejects, est.IDs, est.FalsePositiveRate)
	if fp+rejects != 1000 || observed < 0.2 {
		t.Fatalf("false positives %v, rejects %v: the over-filled filter's rate is not visible", fp, rejects)
	}
	if est.IDs < 2500 || est.IDs > 3500 || est.FalsePositiveRate < 0.2 {
		t.Fatalf("Estimate = %+v, want about 3000 ids and a rate far above the configured 0.01", est)
	}
	lf, err := cache.NewLocalFilter(1000, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	rebuild(t, lf, ids("real", 3000))
	if lest, _ := lf.Estimate(ctx); lest != est {
		t.Fatalf("LocalFilter.Estimate = %+v, RedisFilter.Estimate = %+v: the same ids set the same bits", lest, est)
	}
}
