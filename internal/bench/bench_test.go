package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/bench"
	"github.com/surgekit/surge/internal/testenv"
)

// The stampede scenario re-executes os.Executable() as its worker processes: in this test
// binary, ChildMain turns those children into workers before any test runs.
func TestMain(m *testing.M) {
	bench.ChildMain()
	redis.SetLogger(quietLog{}) // TestJSONOnlyAndErrors dials a closed port on purpose
	code := m.Run()
	testenv.RemoveSurgeBinary()
	os.Exit(code)
}

type quietLog struct{}

func (quietLog) Printf(context.Context, string, ...any) {}

// run runs a scenario in-process and returns its stdout lines and its final JSON line decoded.
func run(t *testing.T, args ...string) ([]string, map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	start := time.Now()
	if err := bench.Run(ctx, args, &stdout, &stderr); err != nil {
		t.Fatalf("bench %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	lines := strings.Split(strings.TrimRight(stdout.String(), "\n"), "\n")
	var res map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("last stdout line is not one JSON object (%v):\n%s", err, stdout.String())
	}
	if res["scenario"] != args[0] {
		t.Fatalf("JSON scenario %v, want %s", res["scenario"], args[0])
	}
	t.Logf("%s in %v:\n%s", args[0], time.Since(start).Round(time.Millisecond), stdout.String())
	return lines, res
}

func num(t *testing.T, res map[string]any, key string) float64 {
	t.Helper()
	v, ok := res[key].(float64)
	if !ok {
		t.Fatalf("JSON has no number %q: %v", key, res)
	}
	return v
}

// noKeysLeft checks that a scenario deleted every key matching pattern, on every master.
func noKeysLeft(t *testing.T, rdb redis.UniversalClient, pattern string) {
	t.Helper()
	ctx := context.Background()
	count := func(ctx context.Context, node *redis.Client) error {
		keys, _, err := node.Scan(ctx, 0, pattern, 100000).Result()
		if err == nil && len(keys) > 0 {
			t.Errorf("%d keys matching %s left behind on %s, e.g. %s", len(keys), pattern, node.Options().Addr, keys[0])
		}
		return err
	}
	var err error
	if c, ok := rdb.(*redis.ClusterClient); ok {
		err = c.ForEachMaster(ctx, count)
	} else {
		err = count(ctx, rdb.(*redis.Client))
	}
	if err != nil {
		t.Fatal(err)
	}
}

type target struct {
	name  string
	addrs string
	rdb   func(testing.TB) redis.UniversalClient
}

var targets = []target{
	{"single", testenv.RedisAddr(), testenv.Redis},
	{"cluster", strings.Join(testenv.ClusterAddrs(), ","), testenv.Cluster},
}

// Real processes (this test binary, re-executed) miss one cold key at once: one database load.
func TestStampedeAcrossProcesses(t *testing.T) {
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			rdb := tg.rdb(t)
			_, res := run(t, "cache-stampede", "-redis-addrs", tg.addrs, "-procs", "2", "-goroutines", "20", "-load-time", "50ms", "-timeout", "40s")
			if n := num(t, res, "db_loads"); n != 1 {
				t.Errorf("db_loads %v, want 1", n)
			}
			if n := num(t, res, "callers"); n != 40 {
				t.Errorf("callers %v, want 40", n)
			}
			if n := num(t, res, "errors") + num(t, res, "finished_before_landing"); n != 0 {
				t.Errorf("errors or answers before the value landed: %v", res)
			}
			if n := num(t, res, "load_ms"); n < 50 {
				t.Errorf("load_ms %v is below the loader's 50 ms", n)
			}
			// Under -race with other suites on 2 cores this is scheduler noise: only the bound that
			// proves waiters were woken rather than sitting out the 5 s lease is asserted.
			if p99 := num(t, res, "waiter_p99_minus_load_ms"); p99 <= 0 || p99 > 1000 {
				t.Errorf("waiter p99 after landing %v ms", p99)
			}
			run := res["run"].(string)
			noKeysLeft(t, rdb, "bench:{stampede-"+run+"}*")
			noKeysLeft(t, rdb, "bench:stampede-"+run+":*")
		})
	}
}

// A hot id that is a Bloom false positive: with AbsentWithFilter the absence is cached and one
// process loads it; without, each process loads it in turn (what the cache does by design: the
// lease is released, not filled, and the next waiting process takes it).
func TestStampedeFalsePositive(t *testing.T) {
	for _, cached := range []bool{true, false} {
		t.Run(fmt.Sprintf("absent-with-filter=%v", cached), func(t *testing.T) {
			_, res := run(t, "cache-stampede", "-redis-addrs", testenv.RedisAddr(), "-procs", "2", "-goroutines", "10",
				// A long load keeps the wave open until both processes' callers have arrived even
				// on a loaded machine; a caller arriving after the wave would rightly load again.
				"-load-time", "300ms", "-false-positive", fmt.Sprintf("-absent-with-filter=%v", cached))
			// Either way one load answers the whole wave: cached as an absence, or (by
			// default) handed to the waiting processes by the "not found" release event.
			if n := num(t, res, "db_loads"); n != 1 {
				t.Errorf("db_loads %v, want 1", n)
			}
			if num(t, res, "errors") != 0 {
				t.Errorf("errors: %v", res)
			}
		})
	}
}

// Never-existing ids through the Bloom-filtered cache: about fp of them reach the database. By
// default the absences they find are not cached (no keys, the same loads on a second read);
// with -absent-with-filter each becomes one absence marker and a second read loads nothing.
func TestPenetration(t *testing.T) {
	cases := []struct {
		name   string
		tg     target
		args   []string
		cached bool
	}{
		{"single/batch100", targets[0], []string{"-batch", "100", "-concurrency", "4"}, false},
		{"single/batch1", targets[0], []string{"-batch", "1", "-concurrency", "16", "-missing", "3000"}, false},
		{"single/batch100/absent-with-filter", targets[0], []string{"-batch", "100", "-concurrency", "4", "-absent-with-filter"}, true},
		{"cluster/batch100", targets[1], []string{"-batch", "100", "-concurrency", "4"}, false},
		{"cluster/batch1/absent-with-filter", targets[1], []string{"-batch", "1", "-concurrency", "16", "-missing", "3000", "-absent-with-filter"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rdb := tc.tg.rdb(t)
			args := append([]string{"cache-penetration", "-redis-addrs", tc.tg.addrs, "-existing", "1000", "-missing", "10000", "-check-existing", "200"}, tc.args...)
			_, res := run(t, args...)
			if r := num(t, res, "db_load_ratio"); r > 0.03 {
				t.Errorf("db_load_ratio %v, want ≤ 0.03", r)
			}
			if num(t, res, "errors") != 0 || num(t, res, "existing_not_found") != 0 || num(t, res, "lease_keys_left") != 0 {
				t.Errorf("errors, false negatives or leases left: %v", res)
			}
			loads, again := num(t, res, "db_loads"), num(t, res, "db_loads_repeat")
			created, absent := num(t, res, "redis_keys_created"), num(t, res, "absence_markers")
			if tc.cached {
				if created != absent || absent != loads || again != 0 {
					t.Errorf("keys created %v, absence markers %v, db loads %v then %v: want one marker per false positive, no repeat loads", created, absent, loads, again)
				}
			} else if created != 0 || again != loads {
				t.Errorf("keys created %v, db loads %v then %v: want no keys, the same loads again", created, loads, again)
			}
			noKeysLeft(t, rdb, res["key_prefix"].(string)+":*")
			noKeysLeft(t, rdb, "bloom:{"+res["key_prefix"].(string)+"}*")
		})
	}
}

func TestHit(t *testing.T) {
	rdb := testenv.Redis(t)
	_, res := run(t, "cache-hit", "-redis-addrs", testenv.RedisAddr(), "-keys", "200", "-ops", "1000", "-redis-benchmark=false")
	for _, k := range []string{"ours_vs_raw", "ours_vs_raw_p50", "getorload_vs_raw", "raw_vs_l1", "raw_vs_l1_p50",
		"filter_vs_raw", "filter_deadline_client_vs_raw"} {
		if v := num(t, res, k); v <= 0 {
			t.Errorf("%s = %v, want > 0", k, v)
		}
	}
	for _, k := range []string{"raw_get_unmarshal", "ours_get", "ours_getorload", "ours_l1", "ours_getorload_filter", "ours_getorload_filter_deadline_client"} {
		l, ok := res[k].(map[string]any)
		if !ok || l["n"].(float64) != 1000 || l["mean_ns"].(float64) <= 0 {
			t.Errorf("%s: %v", k, res[k])
		}
	}
	if num(t, res, "l1_redis_commands") != 0 || num(t, res, "unexpected_loads") != 0 {
		t.Errorf("L1 reads reached Redis, or warm reads loaded: %v", res)
	}
	noKeysLeft(t, rdb, res["key_prefix"].(string)+":*")
	noKeysLeft(t, rdb, "bloom:{"+res["key_prefix"].(string)+"}*")
}

func TestJSONOnlyAndErrors(t *testing.T) {
	lines, _ := run(t, "cache-stampede", "-redis-addrs", testenv.RedisAddr(), "-procs", "1", "-goroutines", "2", "-json-only")
	if len(lines) != 1 {
		t.Errorf("-json-only printed %d lines", len(lines))
	}
	var out, errb bytes.Buffer
	if err := bench.Run(context.Background(), []string{"no-such"}, &out, &errb); err == nil {
		t.Error("unknown scenario accepted")
	}
	if err := bench.Run(context.Background(), []string{"cache-hit", "-keys", "0"}, &out, &errb); err == nil {
		t.Error("-keys 0 accepted")
	}
	if err := bench.Run(context.Background(), []string{"cache-hit", "-redis-addrs", "127.0.0.1:1"}, &out, &errb); err == nil {
		t.Error("unreachable Redis accepted")
	}
}

// idgen: both modes measured from one process, with redis-benchmark's INCR rate next to them on
// the single node; every id of a goroutine above its previous one, and no key left behind.
func TestIDGen(t *testing.T) {
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			rdb := tg.rdb(t)
			args := []string{"idgen", "-redis-addrs", tg.addrs, "-duration", "100ms", "-plain-goroutines", "8"}
			withINCR := tg.name == "single"
			if withINCR {
				args = append(args, "-incr-n", "2000")
			} else {
				args = append(args, "-redis-benchmark=false")
			}
			_, res := run(t, args...)
			for _, k := range []string{"plain_serial_ids_per_s", "plain_parallel_ids_per_s", "segment_serial_ids_per_s", "segment_parallel_ids_per_s", "ids", "segment_redis_calls"} {
				if v := num(t, res, k); v <= 0 {
					t.Errorf("%s = %v, want > 0", k, v)
				}
			}
			if num(t, res, "errors") != 0 || num(t, res, "order_violations") != 0 {
				t.Errorf("errors or ids out of order: %v", res)
			}
			if withINCR && res["redis_benchmark_note"] == nil {
				if num(t, res, "redis_benchmark_incr_rps") <= 0 || num(t, res, "plain_parallel_vs_incr") <= 0 || num(t, res, "segment_parallel_vs_incr") <= 0 {
					t.Errorf("redis-benchmark INCR figures missing: %v", res)
				}
			}
			noKeysLeft(t, rdb, res["key_prefix"].(string)+"*")
		})
	}
}

// The lock scenario on Redis and on the Cluster: both phases run, no violation, handovers are
// woken (not sitting out the 10 s lease), and nothing is left behind (fence counters included).
func TestLock(t *testing.T) {
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			rdb := tg.rdb(t)
			_, res := run(t, "lock", "-redis-addrs", tg.addrs, "-ops", "500", "-goroutines", "8", "-acquisitions", "300", "-clients", "3", "-waiters", "2")
			u, k := res["uncontended"].(map[string]any), res["contended"].(map[string]any)
			if num(t, u, "acquisitions") != 500 || num(t, k, "acquisitions") != 300 {
				t.Fatalf("acquisitions: %v", res)
			}
			if num(t, u, "acquire_release_per_sec") <= 0 || num(t, k, "acquire_release_per_sec") <= 0 {
				t.Errorf("rates: %v", res)
			}
			if v := num(t, k, "violations"); v != 0 {
				t.Errorf("%v mutual-exclusion violations", v)
			}
			if n := num(t, k, "handovers"); n < 100 {
				t.Errorf("only %v handovers measured", n)
			}
			if p50 := num(t, k, "wake_p50_ms"); p50 <= 0 || p50 > 500 {
				t.Errorf("wake-up p50 %v ms", p50)
			}
			if n := num(t, res, "keys_left"); n != 0 {
				t.Errorf("%v lock keys left", n)
			}
			noKeysLeft(t, rdb, res["key_prefix"].(string)+":*")
		})
	}
}
