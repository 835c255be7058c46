package cache_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/cache"
	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/lua"
)

type shop struct {
	ID   int    `json:"id"`
	Name string `json:"name"`
}

type quietLog struct{}

func (quietLog) Printf(context.Context, string, ...any) {}

// The outage tests dial a stopped Redis on purpose; keep go-redis's dial log out of the output.
func init() { redis.SetLogger(quietLog{}) }

func uniqueName(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// backend makes a new, independent Redis client of the kind the running subtest uses.
var backend = func(t testing.TB) redis.UniversalClient { return testenv.Redis(t) }

// onBoth runs a test on a single Redis node and on the local 3-master Redis Cluster, with
// backend handing out independent clients of the kind under test.
func onBoth(t *testing.T, test func(t *testing.T)) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		prev := backend
		backend = func(t testing.TB) redis.UniversalClient { return testenv.Another(t, rdb) }
		defer func() { backend = prev }()
		test(t)
	})
}

// newCache builds a cache on its own Redis client, as a separate process would have.
func newCache[V any](t testing.TB, opts cache.Options) *cache.Cache[V] {
	t.Helper()
	return newCacheOn[V](t, backend(t), opts)
}

func newCacheOn[V any](t testing.TB, rdb redis.UniversalClient, opts cache.Options) *cache.Cache[V] {
	t.Helper()
	c, err := cache.New[V](context.Background(), rdb, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestOptionsValidated(t *testing.T) {
	rdb := testenv.Redis(t)
	for _, o := range []cache.Options{{}, {Name: "a{b}"}, {Name: "x", Jitter: 1.5}} {
		if _, err := cache.New[int](context.Background(), rdb, o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}

func TestAbsenceSentinelNeverCollidesWithValues(t *testing.T) {
	onBoth(t, testAbsenceSentinelNeverCollidesWithValues)
}

func testAbsenceSentinelNeverCollidesWithValues(t *testing.T) {
	ctx := context.Background()
	name := uniqueName("sentinel")
	strs := newCache[string](t, cache.Options{Name: name})
	ptrs := newCache[*shop](t, cache.Options{Name: name + "p"})
	raw := newCache[[]byte](t, cache.Options{Name: name + "b"})

	// Values that textbook placeholders would confuse with "absent".
	if err := strs.Set(ctx, "empty", ""); err != nil {
		t.Fatal(err)
	}
	if v, err := strs.Get(ctx, "empty"); err != nil || v != "" {
		t.Fatalf("empty string: %q, %v", v, err)
	}
	if err := ptrs.Set(ctx, "nil", nil); err != nil {
		t.Fatal(err)
	}
	if v, err := ptrs.Get(ctx, "nil"); err != nil || v != nil {
		t.Fatalf("nil pointer (JSON null) must be a value: %v, %v", v, err)
	}
	if err := raw.Set(ctx, "zero", []byte{0}); err != nil {
		t.Fatal(err)
	}
	if v, err := raw.Get(ctx, "zero"); err != nil || !slices.Equal(v, []byte{0}) {
		t.Fatalf("[]byte{0}: %v, %v", v, err)
	}

	// A loader's ErrNotFound is cached as absent and answered without the loader.
	var loads atomic.Int32
	missing := func(context.Context, string) (string, error) {
		loads.Add(1)
		return "", fmt.Errorf("no row: %w", cache.ErrNotFound)
	}
	for i := 0; i < 3; i++ {
		if _, err := strs.GetOrLoad(ctx, "ghost", missing); !errors.Is(err, cache.ErrNotFound) {
			t.Fatalf("ghost: %v", err)
		}
	}
	if loads.Load() != 1 {
		t.Fatalf("absent id loaded %d times, want 1", loads.Load())
	}
	if _, err := strs.Get(ctx, "ghost"); !errors.Is(err, cache.ErrNotFound) {
		t.Fatalf("Get of cached absence: %v", err)
	}
	if _, err := strs.Get(ctx, "never"); !errors.Is(err, cache.ErrMiss) {
		t.Fatalf("Get of uncached id: %v", err)
	}
	// Foreign bytes under our key are not mistaken for anything: they are replaced by a load.
	rdb := backend(t)
	rdb.Set(ctx, strs.Key("foreign"), "", 0)
	v, err := strs.GetOrLoad(ctx, "foreign", func(context.Context, string) (string, error) { return "fresh", nil })
	if err != nil || v != "fresh" {
		t.Fatalf("foreign bytes: %q, %v", v, err)
	}
}

func TestRedisErrorIsNeverAbsent(t *testing.T) {
	ctx := context.Background()
	addr, stop := testenv.PrivateRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	strict := newCacheOn[string](t, rdb, cache.Options{Name: uniqueName("outage"), OutageLoads: -1})
	m := cache.NewMetrics(nil)
	bounded := newCacheOn[string](t, rdb, cache.Options{Name: uniqueName("outage"), OutageLoads: 2, Metrics: m})
	stop()

	load := func(context.Context, string) (string, error) { return "db", nil }
	if _, err := strict.GetOrLoad(ctx, "k", load); err == nil || errors.Is(err, cache.ErrNotFound) || errors.Is(err, cache.ErrMiss) {
		t.Fatalf("redis down, fallback off: %v, want the redis error", err)
	}
	if _, err := strict.Get(ctx, "k"); err == nil || errors.Is(err, cache.ErrNotFound) || errors.Is(err, cache.ErrMiss) {
		t.Fatalf("Get with redis down: %v", err)
	}

	// The fallback answers from the loader, at most 2 at once; the rest fail fast.
	release := make(chan struct{})
	var inLoader, maxIn atomic.Int32
	slow := func(context.Context, string) (string, error) {
		n := inLoader.Add(1)
		for {
			m := maxIn.Load()
			if n <= m || maxIn.CompareAndSwap(m, n) {
				break
			}
		}
		<-release
		inLoader.Add(-1)
		return "db", nil
	}
	var wg sync.WaitGroup
	var ok, overloaded atomic.Int32
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			v, err := bounded.GetOrLoad(ctx, fmt.Sprint("k", i), slow)
			switch {
			case err == nil && v == "db":
				ok.Add(1)
			case errors.Is(err, cache.ErrOverloaded):
				overloaded.Add(1)
			default:
				t.Errorf("unexpected: %q %v", v, err)
			}
		}(i)
	}
	// Release the loaders only once two are inside and the other eight were turned away.
	deadline := time.Now().Add(15 * time.Second)
	for (inLoader.Load() < 2 || overloaded.Load() < 8) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	close(release)
	wg.Wait()
	if maxIn.Load() > 2 || ok.Load() != 2 || overloaded.Load() != 8 {
		t.Fatalf("fallback: max %d concurrent loads, %d ok, %d overloaded; want ≤2, 2, 8", maxIn.Load(), ok.Load(), overloaded.Load())
	}
}

func TestJitterSpreadsTTLs(t *testing.T) { onBoth(t, testJitterSpreadsTTLs) }

func testJitterSpreadsTTLs(t *testing.T) {
	ctx := context.Background()
	rdb := backend(t)
	c := newCacheOn[int](t, rdb, cache.Options{Name: uniqueName("jitter"), TTL: 10 * time.Second, Jitter: 0.2})
	var ttls []time.Duration
	for i := 0; i < 500; i++ {
		id := fmt.Sprint(i)
		if err := c.Set(ctx, id, i); err != nil {
			t.Fatal(err)
		}
		ttls = append(ttls, rdb.PTTL(ctx, c.Key(id)).Val())
	}
	slices.Sort(ttls)
	lo, hi := ttls[0], ttls[len(ttls)-1]
	if lo < 9900*time.Millisecond || hi > 12*time.Second {
		t.Fatalf("TTLs span %v–%v, want within [10s, 12s)", lo, hi)
	}
	if hi-lo < 1500*time.Millisecond {
		t.Fatalf("TTLs span only %v: jitter is not spreading expiries", hi-lo)
	}
	// The middle half is spread too, not two clusters at the ends.
	if q1, q3 := ttls[len(ttls)/4], ttls[3*len(ttls)/4]; q3-q1 < 600*time.Millisecond {
		t.Fatalf("interquartile range %v is too narrow for uniform jitter", q3-q1)
	}
}

func TestSubSecondTTLIsHonoured(t *testing.T) { onBoth(t, testSubSecondTTLIsHonoured) }

func testSubSecondTTLIsHonoured(t *testing.T) {
	ctx := context.Background()
	rdb := backend(t)
	c := newCacheOn[string](t, rdb, cache.Options{Name: uniqueName("subsec"), TTL: 300 * time.Millisecond, Jitter: -1})
	if err := c.Set(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	if ttl := rdb.PTTL(ctx, c.Key("k")).Val(); ttl <= 0 || ttl > 300*time.Millisecond {
		t.Fatalf("TTL = %v, want ≤ 300ms (go-redis/cache would make it an hour)", ttl)
	}
	time.Sleep(450 * time.Millisecond)
	if _, err := c.Get(ctx, "k"); !errors.Is(err, cache.ErrMiss) {
		t.Fatalf("after 450 ms: %v, want expired", err)
	}
}

// Several independent clients (as separate processes would be), each with many goroutines,
// miss one cold key at once: the database is read once and every waiter gets the value soon
// after it lands.
func TestStampedeLoadsOnceAcrossClients(t *testing.T) { onBoth(t, testStampedeLoadsOnceAcrossClients) }

func testStampedeLoadsOnceAcrossClients(t *testing.T) {
	ctx := context.Background()
	name := uniqueName("stampede")
	const clients, goroutines = 4, 250
	// Long enough that a waiter polling every 100 ms would ask for the lease 4 or more times
	// more, however long the 1000 first GETs take under -race.
	const loadTime = 600 * time.Millisecond
	var loads atomic.Int32
	var landed atomic.Int64
	load := func(context.Context, string) (shop, error) {
		loads.Add(1)
		time.Sleep(loadTime)
		landed.Store(time.Now().UnixNano())
		return shop{ID: 1, Name: "hot"}, nil
	}
	caches := make([]*cache.Cache[shop], clients)
	leases := &leaseCalls{}
	for i := range caches {
		rdb := backend(t)
		rdb.AddHook(leases)
		// A Redis call cut at its bound falls back to the loader by design (outage_test.go):
		// the 1 000 first reads queue for the pools, which under -race on a loaded machine
		// took the lease call past the default 1 s (3 loads in a full make test).
		caches[i] = newCacheOn[shop](t, rdb, cache.Options{Name: name, RedisTimeout: 10 * time.Second})
	}
	start := make(chan struct{})
	lat := make([]time.Duration, clients*goroutines)
	var wg sync.WaitGroup
	for i := 0; i < clients; i++ {
		for j := 0; j < goroutines; j++ {
			wg.Add(1)
			go func(i, j int) {
				defer wg.Done()
				<-start
				v, err := caches[i].GetOrLoad(ctx, "1", load)
				lat[i*goroutines+j] = time.Duration(time.Now().UnixNano() - landed.Load())
				if err != nil || v.Name != "hot" {
					t.Errorf("got %+v, %v", v, err)
				}
			}(i, j)
		}
	}
	close(start)
	wg.Wait()
	if loads.Load() != 1 {
		t.Fatalf("%d database loads for one hot key across %d clients, want 1", loads.Load(), clients)
	}
	slices.Sort(lat)
	p99 := lat[len(lat)*99/100]
	t.Logf("waiter latency after the value landed: p50 %v, p99 %v, max %v", lat[len(lat)/2], p99, lat[len(lat)-1])
	// 1000 goroutines under -race on 2 cores make this figure scheduler noise (≈2 ms without
	// -race; the bench measures the 5 ms target). What must hold here: nobody waited out the
	// 5 s lease. TestWaiterWakeLatency checks the wake-up itself.
	if p99 > time.Second {
		t.Fatalf("waiter p99 %v after the value landed: waiters sat out the lease", p99)
	}
	// Each client's waiting load asks for the lease twice: once (held elsewhere), and once
	// more when the fill event wakes it (the holder's client once). A waiter that polled
	// would ask again every poll while the 600 ms load runs.
	t.Logf("lease requests: %d", leases.n.Load())
	if n := leases.n.Load(); n > 2*clients || n < clients {
		t.Fatalf("%d lease requests from %d clients, want at most %d: waiters polled instead of waiting for the event", n, clients, 2*clients)
	}
}

// leaseCalls counts the lease script calls a client sends (EVALSHA or EVAL of cache_lease.lua).
type leaseCalls struct{ n atomic.Int64 }

func (h *leaseCalls) count(cmd redis.Cmder) {
	args := cmd.Args()
	if len(args) > 1 && (cmd.Name() == "evalsha" || cmd.Name() == "eval") {
		if args[1] == lua.CacheLease("", "", "", 0).Hash() || args[1] == cacheLeaseSource {
			h.n.Add(1)
		}
	}
}

var cacheLeaseSource = func() string {
	b, _ := os.ReadFile("../lua/cache_lease.lua")
	return string(b)
}()

func (h *leaseCalls) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *leaseCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.count(cmd); return next(ctx, cmd) }
}
func (h *leaseCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.count(cmd)
		}
		return next(ctx, cmds)
	}
}

// Waiters in other clients are woken by the fill event, not by a poll: with one waiter per
// client the wake-up is measured without scheduler noise. A 100 ms poller fails this (it
// asks for the lease at every poll).
func TestWaiterWakeLatency(t *testing.T) { onBoth(t, testWaiterWakeLatency) }

func testWaiterWakeLatency(t *testing.T) {
	ctx := context.Background()
	name := uniqueName("wake")
	leader := newCache[int](t, cache.Options{Name: name})
	leases := &leaseCalls{}
	var waiters []*cache.Cache[int]
	for range 3 {
		rdb := backend(t)
		rdb.AddHook(leases)
		waiters = append(waiters, newCacheOn[int](t, rdb, cache.Options{Name: name}))
	}
	var lat []time.Duration
	const rounds = 8
	for round := 0; round < rounds; round++ {
		id := fmt.Sprint(round)
		var landed atomic.Int64
		inLoad := make(chan struct{})
		go func() {
			_, _ = leader.GetOrLoad(ctx, id, func(context.Context, string) (int, error) {
				close(inLoad)
				time.Sleep(250 * time.Millisecond) // a 100 ms poller would ask 2-3 more times
				landed.Store(time.Now().UnixNano())
				return round, nil
			})
		}()
		<-inLoad
		var wg sync.WaitGroup
		var mu sync.Mutex
		for _, w := range waiters {
			wg.Add(1)
			go func(w *cache.Cache[int]) {
				defer wg.Done()
				v, err := w.GetOrLoad(ctx, id, func(context.Context, string) (int, error) {
					t.Error("a waiter loaded while the lease was held")
					return -1, nil
				})
				d := time.Duration(time.Now().UnixNano() - landed.Load())
				if err != nil || v != round {
					t.Errorf("waiter got %d, %v", v, err)
				}
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}(w)
		}
		wg.Wait()
	}
	slices.Sort(lat)
	p50, p90, worst := lat[len(lat)/2], lat[len(lat)*9/10], lat[len(lat)-1]
	t.Logf("wake-up after the value landed, %d waits: p50 %v, p90 %v, max %v", len(lat), p50, p90, worst)
	// The only other way out of a wait is the timer at the holder's remaining lease (5 s).
	// Waits that end far below it were ended by the fill event. (The latency figure itself
	// is measured by `surge bench cache-stampede` on a quiet machine, not asserted here, so a
	// loaded CI machine cannot turn this red.)
	if worst > 2*time.Second {
		t.Fatalf("a waiter waited %v: it sat out the lease instead of being woken by the event", worst)
	}
	// Woken by the event, a waiter asks for the lease twice per round (held, then cached);
	// a poller would ask every poll while the 250 ms load runs.
	t.Logf("lease requests: %d", leases.n.Load())
	if n, most := leases.n.Load(), int64(2*rounds*len(waiters)); n > most || n < most/2 {
		t.Fatalf("%d lease requests from %d waits, want at most %d: the waiters polled", n, rounds*len(waiters), most)
	}
}

func TestLeaderCancellationDoesNotFailWaiters(t *testing.T) {
	onBoth(t, testLeaderCancellationDoesNotFailWaiters)
}

func testLeaderCancellationDoesNotFailWaiters(t *testing.T) {
	ctx := context.Background()
	c := newCache[string](t, cache.Options{Name: uniqueName("cancel")})
	var loads atomic.Int32
	load := func(ctx context.Context, _ string) (string, error) {
		loads.Add(1)
		select {
		case <-time.After(100 * time.Millisecond):
			return "v", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	leaderCtx, cancel := context.WithCancel(ctx)
	leaderErr := make(chan error, 1)
	go func() { _, err := c.GetOrLoad(leaderCtx, "k", load); leaderErr <- err }()
	time.Sleep(20 * time.Millisecond)
	waiter := make(chan string, 1)
	go func() { v, _ := c.GetOrLoad(ctx, "k", load); waiter <- v }()
	time.Sleep(10 * time.Millisecond)
	cancel()
	if err := <-leaderErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled caller: %v", err)
	}
	if v := <-waiter; v != "v" {
		t.Fatalf("waiter got %q after the first caller cancelled", v)
	}
	if loads.Load() != 1 {
		t.Fatalf("%d loads", loads.Load())
	}
	if v, err := c.Get(ctx, "k"); err != nil || v != "v" {
		t.Fatalf("value not cached after the leader's cancellation: %q %v", v, err)
	}
}

// A write between a reader's database read and its write-back revokes the reader's lease:
// the old value never lands in the cache. 1000 randomized interleavings, 0 stale.
func TestStaleSetRace(t *testing.T) { onBoth(t, testStaleSetRace) }

func testStaleSetRace(t *testing.T) {
	ctx := context.Background()
	m := cache.NewMetrics(nil)
	name := uniqueName("staleset")
	reader := newCache[int](t, cache.Options{Name: name, Metrics: m})
	writer := newCache[int](t, cache.Options{Name: name})
	var mu sync.Mutex
	db := map[string]int{}
	stale := 0
	for trial := 0; trial < 1000; trial++ {
		id := fmt.Sprint(trial)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, _ = reader.GetOrLoad(ctx, id, func(context.Context, string) (int, error) {
				mu.Lock()
				v := db[id]
				mu.Unlock()
				time.Sleep(time.Duration(trial%7) * 150 * time.Microsecond) // slow reader
				return v, nil
			})
		}()
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(trial%5) * 200 * time.Microsecond)
			mu.Lock()
			db[id]++
			mu.Unlock()
			if err := writer.Delete(ctx, id); err != nil {
				t.Error(err)
			}
		}()
		wg.Wait()
		if v, err := reader.Get(ctx, id); err == nil && v != db[id] {
			stale++
		}
	}
	t.Logf("stale-set write-backs refused: %v", testutil.ToFloat64(m.StaleSetsRejected.WithLabelValues(name)))
	if stale != 0 {
		t.Fatalf("%d of 1000 trials left a stale value in the cache", stale)
	}
	if testutil.ToFloat64(m.StaleSetsRejected.WithLabelValues(name)) == 0 {
		t.Fatal("no trial raced a write against a load: the test proves nothing")
	}
}

func TestLogicalExpiryServesStaleAndRebuildsOnce(t *testing.T) {
	onBoth(t, testLogicalExpiryServesStaleAndRebuildsOnce)
}

func testLogicalExpiryServesStaleAndRebuildsOnce(t *testing.T) {
	ctx := context.Background()
	m := cache.NewMetrics(nil)
	name := uniqueName("logical")
	c := newCache[int](t, cache.Options{Name: name, Mode: cache.ModeLogical, TTL: 200 * time.Millisecond, Jitter: -1, Metrics: m})
	rdb := backend(t)
	var loads atomic.Int32
	load := func(context.Context, string) (int, error) {
		n := loads.Add(1)
		time.Sleep(time.Second) // a slow rebuild, so waiting for it would show
		return int(n), nil
	}
	// A cold miss loads synchronously: the caller gets a value, not an empty answer.
	if v, err := c.GetOrLoad(ctx, "k", load); err != nil || v != 1 {
		t.Fatalf("cold: %d %v", v, err)
	}
	if ttl := rdb.PTTL(ctx, c.Key("k")).Val(); ttl != -1 {
		t.Fatalf("logical value has Redis TTL %v, want none", ttl)
	}
	time.Sleep(250 * time.Millisecond)
	// 50 concurrent stale reads: all answered at once with the old value, one rebuild.
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			v, err := c.GetOrLoad(ctx, "k", load)
			if err != nil || v != 1 {
				t.Errorf("stale read: %d %v", v, err)
			}
			if d := time.Since(start); d > 500*time.Millisecond {
				t.Errorf("stale read waited %v: it must not wait for the rebuild", d)
			}
		}()
	}
	wg.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if v, _ := c.Get(ctx, "k"); v == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("rebuilt value never landed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if loads.Load() != 2 {
		t.Fatalf("%d loads, want 1 cold + 1 rebuild", loads.Load())
	}
	if n := testutil.ToFloat64(m.StaleServed.WithLabelValues(name)); n != 50 {
		t.Fatalf("stale served = %v, want 50", n)
	}
}

func TestRebuildPoolFullDropsAndCounts(t *testing.T) { onBoth(t, testRebuildPoolFullDropsAndCounts) }

func testRebuildPoolFullDropsAndCounts(t *testing.T) {
	ctx := context.Background()
	m := cache.NewMetrics(nil)
	name := uniqueName("poolfull")
	c := newCache[int](t, cache.Options{Name: name, Mode: cache.ModeLogical, TTL: 50 * time.Millisecond,
		Jitter: -1, Metrics: m, RebuildWorkers: 1, RebuildQueue: 1})
	gate := make(chan struct{})
	var rebuilds atomic.Int32
	cold := func(context.Context, string) (int, error) { return 0, nil }
	blocked := func(context.Context, string) (int, error) { rebuilds.Add(1); <-gate; return 1, nil }
	for _, id := range []string{"a", "b", "c"} {
		if _, err := c.GetOrLoad(ctx, id, cold); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(80 * time.Millisecond)
	// a: taken by the only worker (blocks); b: queued; c: dropped. All three answer stale.
	stale := func(id string) {
		if v, err := c.GetOrLoad(ctx, id, blocked); err != nil || v != 0 {
			t.Fatalf("%s: %d %v", id, v, err)
		}
	}
	stale("a")
	deadline := time.Now().Add(5 * time.Second)
	for rebuilds.Load() < 1 && time.Now().Before(deadline) { // the worker is inside a's rebuild
		time.Sleep(2 * time.Millisecond)
	}
	stale("b")
	stale("c")
	if d := testutil.ToFloat64(m.RebuildsDropped.WithLabelValues(name)); d != 1 {
		t.Fatalf("dropped = %v, want 1", d)
	}
	if q := testutil.ToFloat64(m.RebuildQueue.WithLabelValues(name)); q != 1 {
		t.Fatalf("queue depth = %v, want 1", q)
	}
	close(gate)
	deadline = time.Now().Add(5 * time.Second)
	for rebuilds.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if rebuilds.Load() != 2 {
		t.Fatalf("%d rebuilds ran, want 2 (a and b)", rebuilds.Load())
	}
}

func TestDeleteRevokesLeaseOfRunningLoad(t *testing.T) {
	onBoth(t, testDeleteRevokesLeaseOfRunningLoad)
}

func testDeleteRevokesLeaseOfRunningLoad(t *testing.T) {
	ctx := context.Background()
	m := cache.NewMetrics(nil)
	name := uniqueName("revoke")
	c := newCache[string](t, cache.Options{Name: name, Metrics: m})
	other := newCache[string](t, cache.Options{Name: name})
	inLoad := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = c.GetOrLoad(ctx, "k", func(context.Context, string) (string, error) {
			close(inLoad)
			time.Sleep(50 * time.Millisecond)
			return "old", nil
		})
	}()
	<-inLoad
	if err := other.Delete(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	<-done
	if _, err := c.Get(ctx, "k"); !errors.Is(err, cache.ErrMiss) {
		t.Fatalf("after a delete during the load: %v, want a miss (old value refused)", err)
	}
	if n := testutil.ToFloat64(m.StaleSetsRejected.WithLabelValues(name)); n != 1 {
		t.Fatalf("stale sets rejected = %v", n)
	}
}
