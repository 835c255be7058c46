package cache_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/surgekit/surge/cache"
)

// In logical mode values never expire in Redis, but absences must: a penetration attack
// (reads of random missing ids) would otherwise grow Redis without bound.
func TestLogicalAbsenceHasRedisTTL(t *testing.T) { onBoth(t, testLogicalAbsenceHasRedisTTL) }

func testLogicalAbsenceHasRedisTTL(t *testing.T) {
	ctx := context.Background()
	rdb := backend(t)
	c := newCacheOn[int](t, rdb, cache.Options{Name: uniqueName("logabsent"), Mode: cache.ModeLogical,
		TTL: time.Hour, AbsentTTL: 2 * time.Second, Jitter: 0.1})
	missing := func(context.Context, string) (int, error) { return 0, cache.ErrNotFound }
	for i := range 20 {
		if _, err := c.GetOrLoad(ctx, fmt.Sprint("ghost", i), missing); !errors.Is(err, cache.ErrNotFound) {
			t.Fatal(err)
		}
		ttl := rdb.PTTL(ctx, c.Key(fmt.Sprint("ghost", i))).Val()
		if ttl <= 0 || ttl > 2200*time.Millisecond {
			t.Fatalf("absence marker PTTL %v, want within (0, AbsentTTL × 1.1]", ttl)
		}
	}
	present := func(context.Context, string) (int, error) { return 1, nil }
	if _, err := c.GetOrLoad(ctx, "real", present); err != nil {
		t.Fatal(err)
	}
	if ttl := rdb.PTTL(ctx, c.Key("real")).Val(); ttl != -1 {
		t.Fatalf("logical value PTTL %v, want none", ttl)
	}
}

// A hot key read without pause by several processes is rebuilt once per expiry window: a
// rebuild that takes the lease after another process's rebuild landed finds the value fresh
// and does not load again.
func TestLogicalHotKeyRebuildsOncePerWindow(t *testing.T) {
	onBoth(t, testLogicalHotKeyRebuildsOncePerWindow)
}

func testLogicalHotKeyRebuildsOncePerWindow(t *testing.T) {
	ctx := context.Background()
	name := uniqueName("logwindow")
	const ttl = 200 * time.Millisecond
	var loads atomic.Int32
	load := func(context.Context, string) (int, error) {
		n := loads.Add(1)
		time.Sleep(20 * time.Millisecond)
		return int(n), nil
	}
	caches := make([]*cache.Cache[int], 4)
	for i := range caches {
		caches[i] = newCache[int](t, cache.Options{Name: name, Mode: cache.ModeLogical, TTL: ttl, Jitter: -1})
	}
	if _, err := caches[0].GetOrLoad(ctx, "hot", load); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	stop := start.Add(7 * ttl)
	var wg sync.WaitGroup
	for _, c := range caches {
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(stop) {
					if _, err := c.GetOrLoad(ctx, "hot", load); err != nil {
						t.Error(err)
						return
					}
					time.Sleep(time.Millisecond)
				}
			}()
		}
	}
	wg.Wait()
	time.Sleep(100 * time.Millisecond) // let the last rebuild land
	windows := int(time.Since(start)/ttl) + 1
	t.Logf("%d loads (1 cold + rebuilds) in %d expiry windows of %v across %d processes", loads.Load(), windows, ttl, len(caches))
	if n := int(loads.Load()); n > 1+windows {
		t.Fatalf("%d loads for %d expiry windows: rebuilds were repeated within a window", n, windows)
	}
}

// The deterministic form of the above: process b's only rebuild worker is busy when b reads
// the stale hot key, so b's rebuild runs after a's has landed. It must find the value rebuilt
// (its expire-at is not the one b saw) and not load again.
func TestLogicalRebuildRechecksAfterLease(t *testing.T) {
	onBoth(t, testLogicalRebuildRechecksAfterLease)
}

func testLogicalRebuildRechecksAfterLease(t *testing.T) {
	ctx := context.Background()
	name := uniqueName("logrecheck")
	opts := cache.Options{Name: name, Mode: cache.ModeLogical, TTL: 300 * time.Millisecond, Jitter: -1, RebuildWorkers: 1}
	a, b := newCache[int](t, opts), newCache[int](t, opts)
	var hotLoads atomic.Int32
	hot := func(context.Context, string) (int, error) { return int(hotLoads.Add(1)), nil }
	busy := make(chan struct{})
	slow := func(context.Context, string) (int, error) { <-busy; return 0, nil }
	for _, id := range []string{"hot", "other"} {
		if _, err := a.GetOrLoad(ctx, id, hot); err != nil {
			t.Fatal(err)
		}
	}
	hotLoads.Store(0)
	time.Sleep(350 * time.Millisecond)                         // both stale
	if _, err := b.GetOrLoad(ctx, "other", slow); err != nil { // b's worker now waits on busy
		t.Fatal(err)
	}
	if _, err := b.GetOrLoad(ctx, "hot", hot); err != nil { // queued behind it
		t.Fatal(err)
	}
	if _, err := a.GetOrLoad(ctx, "hot", hot); err != nil { // a rebuilds hot at once
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "a's rebuild landed", func() bool { v, _ := a.Get(ctx, "hot"); return v == 1 })
	close(busy) // b's worker finishes "other", then runs its queued rebuild of hot
	time.Sleep(200 * time.Millisecond)
	if n := hotLoads.Load(); n != 1 {
		t.Fatalf("hot rebuilt %d times in one expiry window, want 1", n)
	}
}

// An L1 copy of a logical value lives no longer than the value's own expire-at: after it,
// reads go to Redis (stale served, rebuild queued) and see the rebuilt value soon after.
func TestLogicalL1CopyEndsAtExpiry(t *testing.T) { onBoth(t, testLogicalL1CopyEndsAtExpiry) }

func testLogicalL1CopyEndsAtExpiry(t *testing.T) {
	ctx := context.Background()
	c := newCache[string](t, cache.Options{Name: uniqueName("logl1"), Mode: cache.ModeLogical,
		TTL: 200 * time.Millisecond, Jitter: -1, Local: &cache.LocalOptions{Size: 10, TTL: time.Minute}})
	var current atomic.Value
	current.Store("v1")
	load := func(context.Context, string) (string, error) { return current.Load().(string), nil }
	if v, err := c.GetOrLoad(ctx, "k", load); err != nil || v != "v1" {
		t.Fatalf("cold: %q %v", v, err)
	}
	eventually(t, 5*time.Second, "v1 in L1", func() bool { v, _ := c.GetOrLoad(ctx, "k", load); return v == "v1" })
	current.Store("v2")
	changed := time.Now()
	eventually(t, 5*time.Second, "v2 after the logical expiry", func() bool { v, _ := c.GetOrLoad(ctx, "k", load); return v == "v2" })
	if d := time.Since(changed); d > time.Second {
		t.Fatalf("the new value showed after %v: the L1 copy outlived the 200 ms logical expiry", d)
	}
}
