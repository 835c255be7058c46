package cache_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/surgekit/surge/cache"
)

// A loader that panics fails every caller sharing its load with an error instead of killing
// the process (x/sync's DoChan re-panics in a goroutine of its own, where nobody can recover),
// and hands the lease back at once: another process loads without waiting out the lease.
func TestLoaderPanicBecomesErrorAndReleasesLease(t *testing.T) {
	onBoth(t, testLoaderPanicBecomesErrorAndReleasesLease)
}

func testLoaderPanicBecomesErrorAndReleasesLease(t *testing.T) {
	ctx := context.Background()
	name := uniqueName("panic")
	m := cache.NewMetrics(nil)
	c := newCache[int](t, cache.Options{Name: name, Metrics: m})
	other := newCache[int](t, cache.Options{Name: name})
	rdb := backend(t)
	boom := func(context.Context, string) (int, error) {
		time.Sleep(30 * time.Millisecond) // long enough for the callers to share the load
		panic("loader bug")
	}
	const callers = 20
	var wg sync.WaitGroup
	errs := make([]error, callers)
	for i := range callers {
		wg.Add(1)
		go func() { defer wg.Done(); _, errs[i] = c.GetOrLoad(ctx, "k", boom) }()
	}
	wg.Wait()
	for i, err := range errs {
		var pe *cache.PanicError
		if !errors.As(err, &pe) || fmt.Sprint(pe.Value) != "loader bug" {
			t.Fatalf("caller %d: %v, want a *cache.PanicError carrying the panic value", i, err)
		}
	}
	if n := rdb.Exists(ctx, c.Key("k")+":lease").Val(); n != 0 {
		t.Fatal("the lease outlived the panicking load")
	}
	if n := testutil.ToFloat64(m.LoadErrors.WithLabelValues(name)); n < 1 {
		t.Fatalf("load errors = %v, want the panic counted", n)
	}
	start := time.Now()
	if v, err := other.GetOrLoad(ctx, "k", func(context.Context, string) (int, error) { return 7, nil }); err != nil || v != 7 {
		t.Fatalf("other process after the panic: %d %v", v, err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("the other process waited %v: it sat out the lease of the panicked load", d)
	}

	// The batch loader is guarded the same way.
	_, err := c.LoadMany(ctx, []string{"a", "b"}, func(context.Context, []string) (map[string]int, error) { panic("batch bug") })
	var pe *cache.PanicError
	if !errors.As(err, &pe) {
		t.Fatalf("LoadMany with a panicking loader: %v, want a *cache.PanicError", err)
	}
	if n := rdb.Exists(ctx, c.Key("a")+":lease", c.Key("b")+":lease").Val(); n != 0 {
		t.Fatalf("%d leases outlived the panicking batch load", n)
	}
}

// In logical mode the rebuild runs in a background worker: a panic there is recovered,
// counted, releases the lease, and the worker keeps serving later rebuilds.
func TestLogicalRebuildPanicIsRecovered(t *testing.T) { onBoth(t, testLogicalRebuildPanicIsRecovered) }

func testLogicalRebuildPanicIsRecovered(t *testing.T) {
	ctx := context.Background()
	name := uniqueName("panicrebuild")
	m := cache.NewMetrics(nil)
	c := newCache[int](t, cache.Options{Name: name, Mode: cache.ModeLogical, TTL: 50 * time.Millisecond, Jitter: -1,
		Metrics: m, RebuildWorkers: 1})
	rdb := backend(t)
	if _, err := c.GetOrLoad(ctx, "k", func(context.Context, string) (int, error) { return 1, nil }); err != nil {
		t.Fatal(err)
	}
	time.Sleep(80 * time.Millisecond)
	if v, err := c.GetOrLoad(ctx, "k", func(context.Context, string) (int, error) { panic("rebuild bug") }); err != nil || v != 1 {
		t.Fatalf("stale read: %d %v", v, err)
	}
	eventually(t, 5*time.Second, "the panicked rebuild counted as a load error", func() bool {
		return testutil.ToFloat64(m.LoadErrors.WithLabelValues(name)) == 1
	})
	eventually(t, 5*time.Second, "the lease released", func() bool { return rdb.Exists(ctx, c.Key("k")+":lease").Val() == 0 })
	// The single worker survived: the next stale read's rebuild lands.
	_, _ = c.GetOrLoad(ctx, "k", func(context.Context, string) (int, error) { return 2, nil })
	eventually(t, 5*time.Second, "a later rebuild lands", func() bool { v, _ := c.Get(ctx, "k"); return v == 2 })
}
