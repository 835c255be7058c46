package cache_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
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

func eventually(t *testing.T, within time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestLocalCacheInvalidatedAcrossClients(t *testing.T) {
	onBoth(t, testLocalCacheInvalidatedAcrossClients)
}

func testLocalCacheInvalidatedAcrossClients(t *testing.T) {
	ctx := context.Background()
	name := uniqueName("l1")
	m := cache.NewMetrics(nil)
	local := &cache.LocalOptions{Size: 100, TTL: time.Minute}
	a := newCache[string](t, cache.Options{Name: name, Local: local, Metrics: m})
	b := newCache[string](t, cache.Options{Name: name, Local: &cache.LocalOptions{Size: 100, TTL: time.Minute}})
	if err := a.Set(ctx, "k", "v1"); err != nil {
		t.Fatal(err)
	}
	// Both hold v1 in L1 once the Set's own event has passed (a read racing it is not kept).
	for _, c := range []*cache.Cache[string]{a, b} {
		if v, err := c.Get(ctx, "k"); err != nil || v != "v1" {
			t.Fatalf("v1: %q %v", v, err)
		}
	}
	eventually(t, 5*time.Second, "a serves v1 from L1", func() bool {
		v, _ := a.Get(ctx, "k")
		return v == "v1" && testutil.ToFloat64(m.LocalHits.WithLabelValues(name)) > 0
	})
	for i := 0; i < 3; i++ {
		_, _ = b.Get(ctx, "k")
	}
	// b writes: a's L1 copy (a minute TTL) must go at once, not after a minute.
	if err := b.Set(ctx, "k", "v2"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "a sees v2 after b's Set", func() bool { v, _ := a.Get(ctx, "k"); return v == "v2" })
	if err := b.Delete(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "a sees the delete", func() bool { _, err := a.Get(ctx, "k"); return errors.Is(err, cache.ErrMiss) })
}

func TestLocalCacheAbsorbsRedisOutage(t *testing.T) {
	ctx := context.Background()
	addr, stop := testenv.PrivateRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	m := cache.NewMetrics(nil)
	name := uniqueName("l1outage")
	c := newCacheOn[string](t, rdb, cache.Options{Name: name, Local: &cache.LocalOptions{Size: 10, TTL: time.Minute}, OutageLoads: -1, Metrics: m})
	var loads atomic.Int32
	load := func(context.Context, string) (string, error) { loads.Add(1); return "v", nil }
	if _, err := c.GetOrLoad(ctx, "k", load); err != nil {
		t.Fatal(err)
	}
	// Read until L1 holds a copy (the fill's own event may race the first re-read).
	eventually(t, 5*time.Second, "an L1 hit", func() bool {
		_, _ = c.GetOrLoad(ctx, "k", load)
		return testutil.ToFloat64(m.LocalHits.WithLabelValues(name)) > 0
	})
	stop()
	for i := 0; i < 100; i++ {
		if v, err := c.GetOrLoad(ctx, "k", load); err != nil || v != "v" {
			t.Fatalf("during the outage: %q %v", v, err)
		}
	}
	if loads.Load() != 1 {
		t.Fatalf("%d loads: the outage reached the database", loads.Load())
	}
}

// The crash helper: when run as a child process it records an intent, writes the "database"
// and dies before the cache delete, exactly as a crash between the two would.
func TestMain(m *testing.M) {
	if os.Getenv("CACHE_CRASH_NAME") != "" {
		crashBetweenWriteAndDelete()
		return
	}
	os.Exit(m.Run())
}

func crashBetweenWriteAndDelete() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr()})
	c, err := cache.New[string](ctx, rdb, cache.Options{Name: os.Getenv("CACHE_CRASH_NAME")})
	if err != nil {
		os.Exit(2)
	}
	_ = c.Invalidate(ctx, "k", func(context.Context) error {
		if err := os.WriteFile(os.Getenv("CACHE_CRASH_DB"), []byte("new"), 0o644); err != nil {
			os.Exit(2)
		}
		os.Exit(3) // the crash
		return nil
	})
	os.Exit(4)
}

func TestInvalidateSurvivesCrashBetweenWriteAndDelete(t *testing.T) {
	ctx := context.Background()
	name := uniqueName("crash")
	db := t.TempDir() + "/row"
	if err := os.WriteFile(db, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	load := func(context.Context, string) (string, error) { b, err := os.ReadFile(db); return string(b), err }
	c := newCache[string](t, cache.Options{Name: name})
	if v, _ := c.GetOrLoad(ctx, "k", load); v != "old" {
		t.Fatalf("warm: %q", v)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "CACHE_CRASH_NAME="+name, "CACHE_CRASH_DB="+db)
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("child did not crash mid-invalidate: %v", err)
	}
	if v, _ := c.Get(ctx, "k"); v != "old" {
		t.Fatalf("before recovery the cache holds %q; the test expects the crash to leave it stale", v)
	}
	// Any process's invalidator finds the abandoned intent and performs the delete.
	if n, err := c.DrainIntents(ctx, 0); err != nil || n != 1 {
		t.Fatalf("drained %d intents, %v; want 1", n, err)
	}
	if v, err := c.GetOrLoad(ctx, "k", load); err != nil || v != "new" {
		t.Fatalf("after recovery: %q %v, want the new row", v, err)
	}

	// The normal path deletes and leaves no intent behind.
	if err := c.Invalidate(ctx, "k", func(context.Context) error { return os.WriteFile(db, []byte("newer"), 0o644) }); err != nil {
		t.Fatal(err)
	}
	if v, _ := c.GetOrLoad(ctx, "k", load); v != "newer" {
		t.Fatalf("after Invalidate: %q", v)
	}
	if n, _ := c.DrainIntents(ctx, 0); n != 0 {
		t.Fatalf("%d intents left after a clean Invalidate", n)
	}
	// A failed write is reported, and its intent handled too.
	boom := errors.New("db down")
	if err := c.Invalidate(ctx, "k", func(context.Context) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("write error lost: %v", err)
	}
}

func TestLoadManyBatchesMissesAndCachesAbsence(t *testing.T) {
	onBoth(t, testLoadManyBatchesMissesAndCachesAbsence)
}

func testLoadManyBatchesMissesAndCachesAbsence(t *testing.T) {
	ctx := context.Background()
	c := newCache[int](t, cache.Options{Name: uniqueName("many")})
	var ids []string
	for i := 0; i < 100; i++ {
		ids = append(ids, fmt.Sprint(i))
		if i%2 == 0 {
			if err := c.Set(ctx, fmt.Sprint(i), i); err != nil {
				t.Fatal(err)
			}
		}
	}
	var calls [][]string
	var mu sync.Mutex
	load := func(_ context.Context, ids []string) (map[string]int, error) {
		mu.Lock()
		calls = append(calls, slices.Clone(ids))
		mu.Unlock()
		out := map[string]int{}
		for _, id := range ids {
			var n int
			fmt.Sscan(id, &n)
			if n%3 != 0 { // multiples of 3 (odd ones) do not exist
				out[id] = n
			}
		}
		return out, nil
	}
	got, err := c.LoadMany(ctx, append(ids, "1", "3"), load) // duplicates are fine
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 1 || len(calls[0]) != 50 {
		t.Fatalf("loader calls %v, want one call with the 50 misses", len(calls))
	}
	for i := 0; i < 100; i++ {
		v, ok := got[fmt.Sprint(i)]
		want := i%2 == 0 || i%3 != 0
		if ok != want || (ok && v != i) {
			t.Fatalf("id %d: %d %v", i, v, ok)
		}
	}
	again, err := c.LoadMany(ctx, ids, load)
	if err != nil || len(calls) != 1 || len(again) != len(got) {
		t.Fatalf("second LoadMany: %d values, %d loader calls, %v", len(again), len(calls), err)
	}
	many, err := c.GetMany(ctx, ids)
	if err != nil || len(many) != len(got) {
		t.Fatalf("GetMany: %d values, %v", len(many), err)
	}
}

func TestLoadManyAcrossClientsLoadsEachIDOnce(t *testing.T) {
	onBoth(t, testLoadManyAcrossClientsLoadsEachIDOnce)
}

func testLoadManyAcrossClientsLoadsEachIDOnce(t *testing.T) {
	ctx := context.Background()
	name := uniqueName("manyx")
	var loaded sync.Map
	var dup atomic.Int32
	load := func(_ context.Context, ids []string) (map[string]int, error) {
		time.Sleep(20 * time.Millisecond)
		out := map[string]int{}
		for _, id := range ids {
			if _, again := loaded.LoadOrStore(id, true); again {
				dup.Add(1)
			}
			out[id] = len(id)
		}
		return out, nil
	}
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		c := newCache[int](t, cache.Options{Name: name})
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			var ids []string
			for i := 0; i < 60; i++ {
				ids = append(ids, fmt.Sprint((i+w*20)%100)) // overlapping ranges
			}
			got, err := c.LoadMany(ctx, ids, load)
			if err != nil || len(got) != 60 {
				t.Errorf("client %d: %d values, %v", w, len(got), err)
			}
		}(w)
	}
	wg.Wait()
	if dup.Load() != 0 {
		t.Fatalf("%d ids were loaded twice", dup.Load())
	}
}

// afterGet runs fn once, right after the client's next GET of key returns, before the
// caller sees the reply.
type afterGet struct {
	key  string
	once sync.Once
	fn   func()
}

func (h *afterGet) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *afterGet) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if args := cmd.Args(); cmd.Name() == "get" && len(args) == 2 && args[1] == h.key {
			h.once.Do(h.fn)
		}
		return err
	}
}
func (h *afterGet) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A read that got the old value from Redis just before another process's write, and stores
// it in L1 just after that write's event dropped the old copy, must not keep it: L1 would
// serve it for its whole TTL. (The L1 epoch guard; removing it fails this test.)
func TestL1KeepsNoCopyReadBeforeAWrite(t *testing.T) { onBoth(t, testL1KeepsNoCopyReadBeforeAWrite) }

func testL1KeepsNoCopyReadBeforeAWrite(t *testing.T) {
	ctx := context.Background()
	name := uniqueName("l1race")
	rdb := backend(t)
	reader := newCacheOn[string](t, rdb, cache.Options{Name: name, Local: &cache.LocalOptions{Size: 10, TTL: time.Minute}})
	writer := newCache[string](t, cache.Options{Name: name})
	if err := writer.Set(ctx, "k", "v1"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the Set's own event has passed
	rdb.AddHook(&afterGet{key: reader.Key("k"), fn: func() {
		// The reader holds v1 from Redis; now the write lands and its event reaches the reader.
		before := cache.L1Epoch(reader, "k")
		if err := writer.Set(ctx, "k", "v2"); err != nil {
			t.Error(err)
		}
		for deadline := time.Now().Add(5 * time.Second); cache.L1Epoch(reader, "k") == before; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) { // not the test's goroutine: no Fatal here
				t.Error("the reader never got the write's event")
				return
			}
		}
	}})
	if v, err := reader.Get(ctx, "k"); err != nil || v != "v1" {
		t.Fatalf("the racing read: %q %v (it read before the write)", v, err)
	}
	if v, err := reader.Get(ctx, "k"); err != nil || v != "v2" {
		t.Fatalf("after the write: %q %v, want v2 (the racing read kept its old copy in L1)", v, err)
	}
}
