package cache_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/cache"
	"github.com/surgekit/surge/internal/testenv"
)

// ids returns n distinct ids "<prefix>:<i>". Deterministic: a filter's bits depend only on its
// ids and parameters, so the tests' answers do not vary from run to run.
func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s:%d", prefix, i)
	}
	return out
}

func randName(t testing.TB) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "test-" + strings.ReplaceAll(t.Name(), "/", "-") + "-" + hex.EncodeToString(b)
}

// newRedisFilter returns a filter with a unique name whose keys are deleted when the test ends.
func newRedisFilter(t testing.TB, rdb redis.UniversalClient, expected uint, fpRate float64) *cache.RedisFilter {
	t.Helper()
	f, err := cache.NewRedisFilter(rdb, randName(t), expected, fpRate)
	if err != nil {
		t.Fatal(err)
	}
	cleanupFilter(t, rdb, f.Key())
	return f
}

func cleanupFilter(t testing.TB, rdb redis.UniversalClient, key string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		keys := []string{key, key + ":meta", key + ":rebuild", key + ":rebuild:meta"}
		if err := rdb.Del(ctx, keys...).Err(); err != nil {
			t.Errorf("deleting %v: %v", keys, err)
		}
	})
}

func rebuild(t testing.TB, f interface {
	Rebuild(context.Context, iter.Seq[string]) (int, error)
}, src []string) {
	t.Helper()
	n, err := f.Rebuild(context.Background(), slices.Values(src))
	if err != nil {
		t.Fatalf("Rebuild: %v", err)
	}
	if n != len(src) {
		t.Fatalf("Rebuild read %d ids, want %d", n, len(src))
	}
}

// requireAll fails unless f answers "maybe present" for every id (no false negative).
func requireAll(t testing.TB, f cache.Filter, want []string) {
	t.Helper()
	got, err := f.TestMany(context.Background(), want)
	if err != nil {
		t.Fatalf("TestMany: %v", err)
	}
	if len(got) != len(want) {
		t.Fatalf("TestMany: %d answers for %d ids", len(got), len(want))
	}
	for i, ok := range got {
		if !ok {
			t.Fatalf("false negative for added id %q", want[i])
		}
	}
}

// positives counts the ids f answers "maybe present" for.
func positives(t testing.TB, f cache.Filter, ids []string) int {
	t.Helper()
	got, err := f.TestMany(context.Background(), ids)
	if err != nil {
		t.Fatalf("TestMany: %v", err)
	}
	n := 0
	for _, ok := range got {
		if ok {
			n++
		}
	}
	return n
}

func TestFilterValidation(t *testing.T) {
	rdb := testenv.Redis(t)
	for _, c := range []struct {
		name     string
		expected uint
		fp       float64
	}{
		{"zero expected", 0, 0.01},
		{"zero rate", 1000, 0},
		{"rate one", 1000, 1},
		{"negative rate", 1000, -0.1},
		{"NaN rate", 1000, math.NaN()},
	} {
		if _, err := cache.NewLocalFilter(c.expected, c.fp); err == nil {
			t.Errorf("NewLocalFilter %s: no error", c.name)
		}
		if _, err := cache.NewRedisFilter(rdb, "x", c.expected, c.fp); err == nil {
			t.Errorf("NewRedisFilter %s: no error", c.name)
		}
	}
	if _, err := cache.NewRedisFilter(rdb, "", 1000, 0.01); err == nil {
		t.Error("NewRedisFilter with an empty name: no error")
	}
	if _, err := cache.NewRedisFilter(nil, "x", 1000, 0.01); err == nil {
		t.Error("NewRedisFilter with a nil client: no error")
	}
	if _, err := cache.NewRedisFilter(rdb, "x", 1<<40, 0.01); err == nil {
		t.Error("NewRedisFilter beyond a Redis bitmap's 2^32 bits: no error")
	}
	f, err := cache.NewRedisFilter(rdb, "users", 1000, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	if f.Key() != "bloom:{users}" {
		t.Errorf("Key() = %q, want bloom:{users}", f.Key())
	}
}

func TestLocalFilterNoFalseNegatives(t *testing.T) {
	f, err := cache.NewLocalFilter(10_000, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	added := ids("local", 10_000)
	if err := f.Add(context.Background(), added...); err != nil {
		t.Fatal(err)
	}
	requireAll(t, f, added)
	if ok, _ := f.Test(context.Background(), added[1234]); !ok {
		t.Fatal("Test: false negative")
	}
}

func TestRedisFilterNoFalseNegatives(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()

	// Built by Rebuild.
	f := newRedisFilter(t, rdb, 10_000, 0.01)
	built := ids("built", 10_000)
	rebuild(t, f, built)
	requireAll(t, f, built)

	// Built empty, then filled by Add: 10k ids are 10 script calls in one pipeline.
	g := newRedisFilter(t, rdb, 10_000, 0.01)
	rebuild(t, g, nil)
	if n := positives(t, g, built); n != 0 {
		t.Fatalf("empty filter: %d ids maybe present, want 0", n)
	}
	if err := g.Add(ctx, built...); err != nil {
		t.Fatal(err)
	}
	requireAll(t, g, built)
	for _, id := range built[:50] {
		if ok, err := g.Test(ctx, id); err != nil || !ok {
			t.Fatalf("Test(%q) = %v, %v; want true, nil", id, ok, err)
		}
	}
}

// sharedFilter checks that two clients of one filter, on two separate connections, see each
// other's writes, and that a rebuild through one is what the other reads.
func sharedFilter(t *testing.T, a, b redis.UniversalClient) {
	ctx := context.Background()
	fa := newRedisFilter(t, a, 10_000, 0.01)
	fb, err := cache.NewRedisFilter(b, strings.TrimSuffix(strings.TrimPrefix(fa.Key(), "bloom:{"), "}"), 10_000, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	if fb.Key() != fa.Key() {
		t.Fatalf("keys differ: %q, %q", fa.Key(), fb.Key())
	}
	rebuild(t, fa, ids("old", 1000))
	added := ids("shared", 5000)
	if err := fa.Add(ctx, added...); err != nil {
		t.Fatal(err)
	}
	requireAll(t, fb, added)
	requireAll(t, fb, ids("old", 1000))
	if ok, err := fb.Test(ctx, added[42]); err != nil || !ok {
		t.Fatalf("Test = %v, %v; want true, nil", ok, err)
	}
	if n := positives(t, fb, ids("never", 5000)); n > 100 {
		t.Fatalf("%d of 5000 never-added ids maybe present", n)
	}

	// A rebuild through b replaces what a reads.
	rebuild(t, fb, ids("new", 1000))
	requireAll(t, fa, ids("new", 1000))
	if n := positives(t, fa, added[:500]); n > 25 {
		t.Fatalf("after rebuild %d of 500 dropped ids still maybe present", n)
	}
}

func TestRedisFilterShared(t *testing.T) {
	sharedFilter(t, testenv.Redis(t), testenv.Redis(t))
}

func TestRedisFilterSharedCluster(t *testing.T) {
	rdb := testenv.Cluster(t)
	sharedFilter(t, rdb, testenv.Another(t, rdb))
}

func TestFalsePositiveRate(t *testing.T) {
	const rate = 0.01
	added, never := ids("member", 10_000), ids("stranger", 100_000)
	local, err := cache.NewLocalFilter(10_000, rate)
	if err != nil {
		t.Fatal(err)
	}
	rebuild(t, local, added)
	remote := newRedisFilter(t, testenv.Redis(t), 10_000, rate)
	rebuild(t, remote, added)
	for name, f := range map[string]cache.Filter{"local": local, "redis": remote} {
		requireAll(t, f, added)
		got := float64(positives(t, f, never)) / float64(len(never))
		t.Logf("%s: false-positive rate %.4f over %d never-added ids (configured %.2f, %d ids added)", name, got, len(never), rate, len(added))
		if got > 1.5*rate {
			t.Errorf("%s: false-positive rate %.4f > 1.5 × %.2f", name, got, rate)
		}
	}
}

func TestLocalAndRedisAgree(t *testing.T) {
	ctx := context.Background()
	local, err := cache.NewLocalFilter(5000, 0.05)
	if err != nil {
		t.Fatal(err)
	}
	remote := newRedisFilter(t, testenv.Redis(t), 5000, 0.05)
	rebuild(t, remote, nil)
	// Over capacity on purpose, so that many false positives exist to compare.
	added := ids("agree", 8000)
	if err := local.Add(ctx, added...); err != nil {
		t.Fatal(err)
	}
	if err := remote.Add(ctx, added...); err != nil {
		t.Fatal(err)
	}
	probe := append(ids("agree", 10_000), ids("other", 20_000)...)
	lg, err := local.TestMany(ctx, probe)
	if err != nil {
		t.Fatal(err)
	}
	rg, err := remote.TestMany(ctx, probe)
	if err != nil {
		t.Fatal(err)
	}
	fp := 0
	for i := range probe {
		if lg[i] != rg[i] {
			t.Fatalf("%q: local %v, redis %v", probe[i], lg[i], rg[i])
		}
		if lg[i] && i >= len(added) {
			fp++
		}
	}
	if fp == 0 {
		t.Fatal("no false positive at all: the comparison proves little")
	}
	t.Logf("%d ids, identical answers, %d shared false positives", len(probe), fp)
}

func TestRebuildReplaces(t *testing.T) {
	oldOnly, both, newOnly := ids("old", 300), ids("both", 300), ids("new", 300)
	// At rate 1e-6 a dropped id staying maybe-present is a one-in-a-million event, and the ids
	// are fixed, so "every dropped id is absent" is a deterministic check.
	local, err := cache.NewLocalFilter(1000, 1e-6)
	if err != nil {
		t.Fatal(err)
	}
	remote := newRedisFilter(t, testenv.Redis(t), 1000, 1e-6)
	for name, f := range map[string]interface {
		cache.Filter
		Rebuild(context.Context, iter.Seq[string]) (int, error)
	}{"local": local, "redis": remote} {
		t.Run(name, func(t *testing.T) {
			rebuild(t, f, append(slices.Clone(oldOnly), both...))
			requireAll(t, f, oldOnly)
			rebuild(t, f, append(slices.Clone(both), newOnly...))
			requireAll(t, f, both)
			requireAll(t, f, newOnly)
			if n := positives(t, f, oldOnly); n != 0 {
				t.Fatalf("%d of %d ids missing from the rebuild source still maybe present", n, len(oldOnly))
			}
		})
	}
}

// rebuildable is what both filters offer.
type rebuildable interface {
	cache.Filter
	Rebuild(context.Context, iter.Seq[string]) (int, error)
}

// TestRebuildConcurrentReaders: readers testing ids in both the old and the new set while a
// rebuild runs never get a false negative (they read the old bitmap until the swap, then the new
// one), and an id added by another client in the middle of the rebuild survives the swap.
func TestRebuildConcurrentReaders(t *testing.T) {
	rdb := testenv.Redis(t)
	remote := newRedisFilter(t, rdb, 60_000, 0.01)
	other, err := cache.NewRedisFilter(testenv.Redis(t), strings.TrimSuffix(strings.TrimPrefix(remote.Key(), "bloom:{"), "}"), 60_000, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	local, err := cache.NewLocalFilter(60_000, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	for name, fs := range map[string][2]rebuildable{"redis": {remote, other}, "local": {local, local}} {
		t.Run(name, func(t *testing.T) {
			f, adder := fs[0], fs[1]
			ctx := context.Background()
			both := ids("both", 2000)
			rebuild(t, f, append(ids("old", 10_000), both...))

			var (
				done     atomic.Bool
				reads    atomic.Int64
				wg       sync.WaitGroup
				failures = make(chan string, 4)
			)
			for r := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for !done.Load() {
						probe := both[r*500 : (r+1)*500]
						got, err := f.TestMany(ctx, probe)
						if err != nil {
							failures <- err.Error()
							return
						}
						for i, ok := range got {
							if !ok {
								failures <- "false negative during rebuild for " + probe[i]
								return
							}
						}
						reads.Add(1)
					}
				}()
			}

			const late = "added-during-rebuild"
			var readsDuring int64
			src := func(yield func(string) bool) {
				for i, id := range append(ids("new", 50_000), both...) {
					if i == 25_000 {
						// Another client adds an id the source has already passed.
						if err := adder.Add(ctx, late); err != nil {
							failures <- "Add during rebuild: " + err.Error()
						}
						// Let the readers run against the half-built state.
						deadline := time.Now().Add(5 * time.Second)
						for start := reads.Load(); reads.Load() < start+20 && time.Now().Before(deadline); {
							time.Sleep(time.Millisecond)
						}
					}
					if !yield(id) {
						return
					}
				}
				readsDuring = reads.Load()
			}
			if _, err := f.Rebuild(ctx, src); err != nil {
				t.Fatal(err)
			}
			done.Store(true)
			wg.Wait()
			close(failures)
			for msg := range failures {
				t.Error(msg)
			}
			if readsDuring < 20 {
				t.Fatalf("only %d reads overlapped the rebuild", readsDuring)
			}
			t.Logf("%d concurrent reads during the rebuild, %d in all", readsDuring, reads.Load())
			requireAll(t, f, both)
			requireAll(t, f, ids("new", 50_000))
			requireAll(t, f, []string{late})
		})
	}
}

// TestRebuildAbort: a source that fails cancels ctx; Rebuild returns the cause and the live
// filter keeps its old contents.
func TestRebuildAbort(t *testing.T) {
	rdb := testenv.Redis(t)
	local, err := cache.NewLocalFilter(10_000, 1e-6)
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]rebuildable{"redis": newRedisFilter(t, rdb, 10_000, 1e-6), "local": local} {
		t.Run(name, func(t *testing.T) {
			old := ids("old", 3000)
			rebuild(t, f, old)
			sourceErr := errors.New("database went away")
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			_, err := f.Rebuild(ctx, func(yield func(string) bool) {
				for _, id := range ids("new", 5000) {
					if !yield(id) {
						return
					}
				}
				cancel(sourceErr) // rows.Err() != nil
			})
			if !errors.Is(err, sourceErr) {
				t.Fatalf("Rebuild = %v, want the source's error", err)
			}
			requireAll(t, f, old)
			if n := positives(t, f, ids("new", 5000)); n != 0 {
				t.Fatalf("aborted rebuild leaked %d ids into the live filter", n)
			}
			// The lease is released: the next rebuild starts at once.
			rebuild(t, f, ids("new", 10))
		})
	}
}

// TestRebuildSourcePanics: a panicking source leaves the old contents live and the lease free.
func TestRebuildSourcePanics(t *testing.T) {
	local, err := cache.NewLocalFilter(10_000, 1e-6)
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]rebuildable{"redis": newRedisFilter(t, testenv.Redis(t), 10_000, 1e-6), "local": local} {
		t.Run(name, func(t *testing.T) {
			rebuild(t, f, ids("old", 100))
			func() {
				defer func() { _ = recover() }()
				_, _ = f.Rebuild(context.Background(), func(yield func(string) bool) {
					for _, id := range ids("new", 2500) {
						yield(id)
					}
					panic("source bug")
				})
			}()
			requireAll(t, f, ids("old", 100))
			if n := positives(t, f, ids("new", 2500)); n != 0 {
				t.Fatalf("a panicked rebuild leaked %d ids into the live filter", n)
			}
			rebuild(t, f, ids("new", 10))
		})
	}
}

func TestRebuildRunning(t *testing.T) {
	local, err := cache.NewLocalFilter(1000, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]rebuildable{"redis": newRedisFilter(t, testenv.Redis(t), 1000, 0.01), "local": local} {
		t.Run(name, func(t *testing.T) {
			var inner error
			_, err := f.Rebuild(context.Background(), func(yield func(string) bool) {
				_, inner = f.Rebuild(context.Background(), slices.Values([]string{"x"}))
				yield("a")
			})
			if err != nil {
				t.Fatal(err)
			}
			if !errors.Is(inner, cache.ErrRebuildRunning) {
				t.Fatalf("second concurrent Rebuild = %v, want ErrRebuildRunning", inner)
			}
			requireAll(t, f, []string{"a"})
		})
	}
}

func TestRedisFilterNotBuilt(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	f := newRedisFilter(t, rdb, 1000, 0.01)
	ok, err := f.Test(ctx, "a")
	if !errors.Is(err, cache.ErrNotBuilt) || !ok {
		t.Fatalf("Test on a filter never built = %v, %v; want true (maybe present), ErrNotBuilt", ok, err)
	}
	got, err := f.TestMany(ctx, []string{"a", "b"})
	if !errors.Is(err, cache.ErrNotBuilt) || !got[0] || !got[1] {
		t.Fatalf("TestMany = %v, %v; want all true, ErrNotBuilt", got, err)
	}
	if err := f.Add(ctx, "a"); !errors.Is(err, cache.ErrNotBuilt) {
		t.Fatalf("Add on a filter never built = %v, want ErrNotBuilt", err)
	}
	if n, _ := rdb.Exists(ctx, f.Key(), f.Key()+":meta").Result(); n != 0 {
		t.Fatal("Add created the filter")
	}

	// A filter Redis lost (flush, eviction) answers maybe-present again, never absent.
	rebuild(t, f, ids("x", 10))
	if err := rdb.Del(ctx, f.Key()).Err(); err != nil {
		t.Fatal(err)
	}
	if ok, err := f.Test(ctx, "never-added"); !errors.Is(err, cache.ErrNotBuilt) || !ok {
		t.Fatalf("Test after the bitmap was lost = %v, %v; want true, ErrNotBuilt", ok, err)
	}
	if err := f.Add(ctx, "a"); !errors.Is(err, cache.ErrNotBuilt) {
		t.Fatalf("Add after the bitmap was lost = %v, want ErrNotBuilt", err)
	}
}

func TestRedisFilterParamsMismatch(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	a := newRedisFilter(t, rdb, 10_000, 0.01)
	name := strings.TrimSuffix(strings.TrimPrefix(a.Key(), "bloom:{"), "}")
	rebuild(t, a, ids("a", 100))

	b, err := cache.NewRedisFilter(rdb, name, 10_000, 0.001) // someone changed fpRate
	if err != nil {
		t.Fatal(err)
	}
	ok, err := b.Test(ctx, "a:1")
	if !errors.Is(err, cache.ErrParamsMismatch) || !ok {
		t.Fatalf("Test with other parameters = %v, %v; want true (maybe present), ErrParamsMismatch", ok, err)
	}
	if !strings.Contains(err.Error(), "Rebuild") {
		t.Fatalf("error does not tell what to do: %v", err)
	}
	t.Logf("mismatch error: %v", err)
	if err := b.Add(ctx, "b"); !errors.Is(err, cache.ErrParamsMismatch) {
		t.Fatalf("Add with other parameters = %v, want ErrParamsMismatch", err)
	}
	requireAll(t, a, ids("a", 100)) // the refused Add wrote nothing harmful

	// Rebuild is the way to change them. While it runs, a new-parameter client's Add reaches the
	// filter being built and an old-parameter client's Add is refused; after it the old client
	// is the one refused.
	var addNew, addOld error
	if _, err := b.Rebuild(ctx, func(yield func(string) bool) {
		for _, id := range ids("a", 100) {
			if !yield(id) {
				return
			}
		}
		addNew, addOld = b.Add(ctx, "late"), a.Add(ctx, "late-old")
	}); err != nil {
		t.Fatal(err)
	}
	if addNew != nil {
		t.Fatalf("Add with the rebuild's parameters during the rebuild = %v", addNew)
	}
	if !errors.Is(addOld, cache.ErrParamsMismatch) {
		t.Fatalf("Add with the old parameters during the rebuild = %v, want ErrParamsMismatch", addOld)
	}
	requireAll(t, b, append(ids("a", 100), "late"))
	if _, err := a.Test(ctx, "a:1"); !errors.Is(err, cache.ErrParamsMismatch) {
		t.Fatalf("old client after the rebuild = %v, want ErrParamsMismatch", err)
	}
}

// BenchmarkRedisFilterTestMany: one TestMany of 1000 ids (half present) per op, one round trip.
func BenchmarkRedisFilterTestMany(b *testing.B) {
	f := newRedisFilter(b, testenv.Redis(b), 100_000, 0.01)
	rebuild(b, f, ids("present", 100_000))
	probe := append(ids("present", 500), ids("absent", 500)...)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := f.TestMany(ctx, probe); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/id")
}

// roundTrips counts what a client sends to Redis: one per command outside a pipeline, one per
// pipeline; a new connection's handshake (HELLO, CLIENT SETINFO) is not the operation's.
type roundTrips struct{ n atomic.Int64 }

func handshake(cmd redis.Cmder) bool { return cmd.Name() == "hello" || cmd.Name() == "client" }

func (h *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !handshake(cmd) {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (h *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && !handshake(cmds[0]) {
			h.n.Add(1)
		}
		return next(ctx, cmds)
	}
}

// TestRedisFilterOneRoundTrip: TestMany and Add cost one round trip for 1 or 5000 ids, also
// right after Redis dropped its script cache (the pipeline falls back to EVAL, one more trip).
func TestRedisFilterOneRoundTrip(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	f := newRedisFilter(t, rdb, 10_000, 0.01)
	rebuild(t, f, nil)
	// Warm up: load the scripts (a cold script cache costs one more trip, counted below).
	if err := f.Add(ctx, "warm"); err != nil {
		t.Fatal(err)
	}
	requireAll(t, f, []string{"warm"})
	hook := &roundTrips{}
	rdb.AddHook(hook)
	many := ids("rt", 5000)
	for _, batch := range [][]string{many[:1], many} {
		for name, call := range map[string]func() error{
			"Add":      func() error { return f.Add(ctx, batch...) },
			"TestMany": func() error { _, err := f.TestMany(ctx, batch); return err },
		} {
			start := hook.n.Load()
			if err := call(); err != nil {
				t.Fatal(err)
			}
			if n := hook.n.Load() - start; n != 1 {
				t.Errorf("%s of %d ids: %d round trips, want 1", name, len(batch), n)
			}
		}
	}

	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	start := hook.n.Load()
	requireAll(t, f, many)
	if n := hook.n.Load() - start; n != 2 {
		t.Errorf("TestMany after SCRIPT FLUSH: %d round trips, want 2 (EVALSHA, then EVAL)", n)
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	more := ids("rt-more", 5000)
	if err := f.Add(ctx, more...); err != nil {
		t.Fatal(err)
	}
	requireAll(t, f, more)
}
