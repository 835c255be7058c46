// Command compare runs the cache scenarios of `surge bench` side by side on go-zero's
// core/stores/cache, github.com/go-redis/cache/v9, rockscache and surge's cache, against one
// Redis (and, for the outage scenario, a redis-server of its own that it hangs with SIGSTOP):
//
//	cd bench/compare && go run . -redis 127.0.0.1:6379
//
// It prints a Markdown table (rows = libraries, columns = scenarios) and, as its last line, one
// JSON object with every figure. See README.md. It is a module of its own so that the root
// go.mod never depends on the peers.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/zeromicro/go-zero/core/logx"

	surge "github.com/surgekit/surge/cache"
)

type config struct {
	redis                 string
	procs, goroutines     int
	loadTime              time.Duration
	existing, missing     int
	fp                    float64
	concurrency           int
	trials                int
	keys                  int
	outage                time.Duration
	readers               int
	window                time.Duration
	windows               int
	libs                  string
	jsonOnly              bool
	timeout, phaseTimeout time.Duration
}

// Result is one library's row.
type Result struct {
	Library string `json:"library"`
	Version string `json:"version"`

	StampedeLoads  int64   `json:"stampede_db_loads"`
	StampedeP99MS  float64 `json:"stampede_waiter_p99_after_landing_ms"`
	StampedeMaxMS  float64 `json:"stampede_waiter_max_after_landing_ms"`
	StampedeErrors int64   `json:"stampede_errors"`

	PenLoads  int64   `json:"penetration_db_loads"`
	PenLoads2 int64   `json:"penetration_db_loads_repeat"`
	PenKeys   int     `json:"penetration_keys_created"`
	PenErrors int64   `json:"penetration_errors"`
	PenMS     float64 `json:"penetration_ms"`

	StaleTrials int   `json:"staleset_trials"`
	Stale       int   `json:"staleset_stale"`
	StaleErrors int64 `json:"staleset_errors"`

	HitMeanNS       int64   `json:"hit_mean_ns"`
	HitVsRaw        float64 `json:"hit_vs_raw"`
	HitFilterMeanNS int64   `json:"hit_with_filter_mean_ns,omitempty"`
	HitFilterVsRaw  float64 `json:"hit_with_filter_vs_raw,omitempty"`
	HitErrors       int64   `json:"hit_errors"`

	PanicSurvived    bool    `json:"panic_process_survived"`
	PanicErrors      int64   `json:"panic_callers_answered_error"`
	PanicPanics      int64   `json:"panic_callers_repanicked"`
	PanicOtherWaitMS float64 `json:"panic_other_process_wait_ms"`
	PanicOtherErr    string  `json:"panic_other_process_error,omitempty"`

	OutageReadsPerS float64 `json:"outage_reads_per_s"`
	OutageFailed    int64   `json:"outage_failed_reads"`
	OutageLoads     int64   `json:"outage_db_loads"`
	OutageNote      string  `json:"outage_note,omitempty"`

	LogicalLoadsPerWindow float64 `json:"logical_loads_per_window"`
	LogicalReadP99MS      float64 `json:"logical_read_p99_ms"`
	LogicalErrors         int64   `json:"logical_errors"`
}

func main() {
	var c config
	flag.StringVar(&c.redis, "redis", "127.0.0.1:6379", "Redis address (a single node)")
	flag.IntVar(&c.procs, "procs", 4, "stampede: independent clients (each one a process: own Redis client, own cache, own singleflight)")
	flag.IntVar(&c.goroutines, "goroutines", 250, "stampede: goroutines per client")
	flag.DurationVar(&c.loadTime, "load-time", 50*time.Millisecond, "stampede: simulated database read")
	flag.IntVar(&c.existing, "existing", 100_000, "penetration: existing ids (surge's Bloom filter holds them)")
	flag.IntVar(&c.missing, "missing", 100_000, "penetration: distinct never-existing ids read")
	flag.Float64Var(&c.fp, "fp", 0.01, "penetration: surge's Bloom filter false-positive rate")
	flag.IntVar(&c.concurrency, "concurrency", 32, "penetration: concurrent readers")
	flag.IntVar(&c.trials, "trials", 1000, "stale-set: randomized reader/writer races")
	flag.IntVar(&c.keys, "keys", 10_000, "hit: distinct warm keys, each read once per library")
	flag.DurationVar(&c.outage, "outage", 3*time.Second, "outage: how long the private Redis hangs")
	flag.IntVar(&c.readers, "readers", 8, "outage: concurrent readers")
	flag.DurationVar(&c.window, "window", time.Second, "logical: expiry window (≥ 1 s: the peers' TTLs are whole seconds)")
	flag.IntVar(&c.windows, "windows", 6, "logical: windows to run")
	flag.StringVar(&c.libs, "libs", "go-zero,go-redis/cache,rockscache,surge", "libraries to run")
	panicLib := flag.String("panic-child", "", "internal: run the panic scenario of this library and print its result")
	runFlag := flag.String("run", "", "internal: the run id (with -panic-child)")
	flag.BoolVar(&c.jsonOnly, "json-only", false, "print only the final JSON line")
	flag.DurationVar(&c.timeout, "timeout", 5*time.Minute, "bound on the whole run")
	flag.DurationVar(&c.phaseTimeout, "phase-timeout", 90*time.Second, "bound on one library's scenario")
	flag.Parse()
	logx.Disable() // go-zero logs to stdout; the last stdout line must be the JSON
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if *panicLib != "" {
		if err := runPanicChild(ctx, *panicLib, *runFlag, c.redis); err != nil {
			fmt.Fprintln(os.Stderr, "compare:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

func (c config) printf(format string, args ...any) {
	if !c.jsonOnly {
		fmt.Printf(format, args...)
	}
}

func run(ctx context.Context, c config) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: c.redis})
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("Redis at %s: %w", c.redis, err)
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	runID := hex.EncodeToString(b)
	// Every key of this run starts with cmp-<run>- (and the Bloom filter's with bloom:{cmp-<run>-).
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		for _, p := range []string{"cmp-" + runID + "-*", "bloom:{cmp-" + runID + "-*"} {
			if err := deleteKeys(dctx, rdb, p); err != nil {
				fmt.Fprintf(os.Stderr, "compare: cleaning up %s: %v\n", p, err)
			}
		}
	}()

	var libs []library
	for _, l := range allLibraries(runID) {
		if slices.Contains(strings.Split(c.libs, ","), l.name) {
			libs = append(libs, l)
		}
	}
	if len(libs) == 0 {
		return fmt.Errorf("-libs %q names no library", c.libs)
	}
	results := make([]*Result, len(libs))
	for i, l := range libs {
		results[i] = &Result{Library: l.name, Version: l.version}
	}
	c.printf("Redis %s, run %s\n", c.redis, runID)
	phase := func(name string, fn func(ctx context.Context, l library, r *Result) error) error {
		for i, l := range libs {
			pctx, cancel := context.WithTimeout(ctx, c.phaseTimeout)
			t := time.Now()
			err := fn(pctx, l, results[i])
			cancel()
			if err != nil {
				return fmt.Errorf("%s on %s: %w", name, l.name, err)
			}
			c.printf("  %-12s %-15s %v\n", name, l.name, time.Since(t).Round(time.Millisecond))
		}
		return nil
	}
	if err := phase("stampede", func(ctx context.Context, l library, r *Result) error { return stampede(ctx, c, l, r) }); err != nil {
		return err
	}
	filter, err := surge.NewRedisFilter(rdb, "cmp-"+runID+"-surge", uint(c.existing), c.fp)
	if err != nil {
		return err
	}
	if _, err := filter.Rebuild(ctx, func(yield func(string) bool) {
		for i := 1; i <= c.existing; i++ {
			if !yield(strconv.Itoa(i)) {
				return
			}
		}
	}); err != nil {
		return err
	}
	if err := phase("penetration", func(ctx context.Context, l library, r *Result) error {
		return penetration(ctx, c, rdb, filter, l, r)
	}); err != nil {
		return err
	}
	if err := phase("stale-set", func(ctx context.Context, l library, r *Result) error { return staleSet(ctx, c, l, r) }); err != nil {
		return err
	}
	hctx, hcancel := context.WithTimeout(ctx, c.phaseTimeout)
	rawNS, err := hit(hctx, c, rdb, runID, libs, results)
	hcancel()
	if err != nil {
		return fmt.Errorf("hit: %w", err)
	}

	if err := phase("panic", func(ctx context.Context, l library, r *Result) error { return panicScenario(ctx, c, runID, l, r) }); err != nil {
		return err
	}
	if err := runOutage(ctx, c, libs, results, phase); err != nil {
		return err
	}
	if err := phase("logical", func(ctx context.Context, l library, r *Result) error { return logical(ctx, c, l, r) }); err != nil {
		return err
	}
	c.printTable(results, rawNS)
	out, err := json.Marshal(struct {
		Scenario   string    `json:"scenario"`
		Redis      string    `json:"redis"`
		Procs      int       `json:"procs"`
		Goroutines int       `json:"goroutines"`
		LoadTimeMS int64     `json:"load_time_ms"`
		Existing   int       `json:"existing"`
		Missing    int       `json:"missing"`
		FP         float64   `json:"fp"`
		Trials     int       `json:"trials"`
		Keys       int       `json:"keys"`
		OutageMS   int64     `json:"outage_ms"`
		Readers    int       `json:"readers"`
		WindowMS   int64     `json:"window_ms"`
		Windows    int       `json:"windows"`
		RawHitNS   int64     `json:"raw_hit_mean_ns"`
		Results    []*Result `json:"results"`
	}{"compare", c.redis, c.procs, c.goroutines, c.loadTime.Milliseconds(), c.existing, c.missing, c.fp, c.trials, c.keys,
		c.outage.Milliseconds(), c.readers, c.window.Milliseconds(), c.windows, rawNS, results})
	if err != nil {
		return err
	}
	fmt.Println(string(out))
	return nil
}

func allLibraries(runID string) []library {
	return []library{newGoZero(runID), newGoRedisCache(runID), newRocks(runID), newOurs(runID)}
}

func runPanicChild(ctx context.Context, name, runID, addr string) error {
	for _, l := range allLibraries(runID) {
		if l.name == name {
			return panicChild(ctx, l, addr)
		}
	}
	return fmt.Errorf("no library %q", name)
}

// runOutage runs the outage scenario on a redis-server of its own (skipped, and said so in
// each row, when redis-server is not on PATH).
func runOutage(ctx context.Context, c config, libs []library, results []*Result, phase func(string, func(context.Context, library, *Result) error) error) error {
	srv, err := startPrivateRedis(ctx)
	if err != nil {
		for _, r := range results {
			r.OutageNote = "not run: " + err.Error()
		}
		return nil
	}
	defer srv.stop()
	return phase("outage", func(ctx context.Context, l library, r *Result) error { return outage(ctx, c, srv, l, r) })
}

func (c config) printTable(results []*Result, rawNS int64) {
	c.printf("\n| library | stampede: DB loads | stampede: waiter p99 after landing | penetration: DB loads | penetration: Redis keys created | penetration: DB loads, same ids again | stale-set: stale trials | hit: mean ns per warm read (× raw) | hit with a Bloom filter, ContextTimeoutEnabled client (× raw) | panicking loader: process survives / callers answered / other process waits | hung Redis %v: reads/s answered (DB loads) | logical expiry: loads per window (read p99) |\n", c.outage)
	c.printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|\n")
	for _, r := range results {
		filter := "—"
		if r.HitFilterMeanNS > 0 {
			filter = fmt.Sprintf("%d (%.2f×)", r.HitFilterMeanNS, r.HitFilterVsRaw)
		}
		pan := "no: the process died"
		if r.PanicSurvived {
			pan = fmt.Sprintf("yes / %d errors, %d re-panics / %.0f ms", r.PanicErrors, r.PanicPanics, r.PanicOtherWaitMS)
		}
		out := fmt.Sprintf("%.0f (%d)", r.OutageReadsPerS, r.OutageLoads)
		if r.OutageNote != "" {
			out = r.OutageNote
		}
		c.printf("| %s | %d | %.2f ms | %d | %d | %d | %d / %d | %d (%.2f×) | %s | %s | %s | %.2f (%.1f ms) |\n", r.Version, r.StampedeLoads, r.StampedeP99MS,
			r.PenLoads, r.PenKeys, r.PenLoads2, r.Stale, r.StaleTrials, r.HitMeanNS, r.HitVsRaw, filter, pan, out,
			r.LogicalLoadsPerWindow, r.LogicalReadP99MS)
	}
	c.printf("| raw GET + json.Unmarshal (no library) | | | | | | | %d | | | | |\n", rawNS)
	c.printf("\nstampede: %d clients × %d goroutines, one cold key, loader %v; penetration: %d never-existing ids, %d concurrent readers\n"+
		"(surge: Bloom filter of %d ids at fp %g; its 2 filter keys are not counted); stale-set: %d trials; hit: %d distinct keys;\n"+
		"outage: %d readers of %d warm keys, Redis hung %v; logical: %d clients × 4 readers, %d windows of %v, loader 20 ms.\n",
		c.procs, c.goroutines, c.loadTime, c.missing, c.concurrency, c.existing, c.fp, c.trials, c.keys,
		c.readers, outageKeys, c.outage, c.procs, c.windows, c.window)
	for _, r := range results {
		if n := r.StampedeErrors + r.PenErrors + r.StaleErrors + r.HitErrors + r.LogicalErrors; n > 0 {
			c.printf("%s: %d unexpected errors (stampede %d, penetration %d, stale-set %d, hit %d, logical %d)\n", r.Library, n,
				r.StampedeErrors, r.PenErrors, r.StaleErrors, r.HitErrors, r.LogicalErrors)
		}
	}
}

func newInstances(ctx context.Context, l library, n int, s setup) ([]instance, func(), error) {
	var insts []instance
	closeAll := func() {
		for _, in := range insts {
			in.close()
		}
	}
	for range n {
		in, err := l.newInstance(ctx, s)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		insts = append(insts, in)
	}
	return insts, closeAll, nil
}

// stampede: procs independent clients × goroutines miss one cold key at once.
func stampede(ctx context.Context, c config, l library, r *Result) error {
	insts, closeAll, err := newInstances(ctx, l, c.procs, setup{scenario: "stampede", addr: c.redis})
	if err != nil {
		return err
	}
	defer closeAll()
	var loads, firstLanding atomic.Int64
	firstLanding.Store(1<<63 - 1)
	load := func(ctx context.Context, id string) (Payload, error) {
		loads.Add(1)
		time.Sleep(c.loadTime)
		now := time.Now().UnixNano()
		for {
			old := firstLanding.Load()
			if now >= old || firstLanding.CompareAndSwap(old, now) {
				break
			}
		}
		return payloadFor(1), nil
	}
	start := make(chan struct{})
	finish := make([]int64, c.procs*c.goroutines)
	var errs atomic.Int64
	var wg sync.WaitGroup
	for i, in := range insts {
		for j := 0; j < c.goroutines; j++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				v, err := in.take(ctx, "stampede", "hot", load)
				finish[i*c.goroutines+j] = time.Now().UnixNano()
				if err != nil || v.ID != 1 {
					errs.Add(1)
				}
			}()
		}
	}
	time.Sleep(20 * time.Millisecond) // let every goroutine reach the start line
	close(start)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	landed := firstLanding.Load()
	lat := make([]time.Duration, len(finish))
	for i, f := range finish {
		lat[i] = max(0, time.Duration(f-landed))
	}
	slices.Sort(lat)
	r.StampedeLoads, r.StampedeErrors = loads.Load(), errs.Load()
	r.StampedeP99MS = msf(lat[min(len(lat)-1, len(lat)*99/100)])
	r.StampedeMaxMS = msf(lat[len(lat)-1])
	return nil
}

// penetration: never-existing ids, each read once through the library's read-through call.
func penetration(ctx context.Context, c config, rdb *redis.Client, filter surge.Filter, l library, r *Result) error {
	insts, closeAll, err := newInstances(ctx, l, 1, setup{scenario: "penetration", addr: c.redis, filter: filter})
	if err != nil {
		return err
	}
	defer closeAll()
	in := insts[0]
	pattern := strings.TrimSuffix(l.pattern, "*") + "penetration:*"
	before, err := countKeys(ctx, rdb, pattern)
	if err != nil {
		return err
	}
	var loads, errs atomic.Int64
	load := func(context.Context, string) (Payload, error) {
		loads.Add(1)
		return Payload{}, errNotFound
	}
	pass := func() error {
		var next atomic.Int64
		var wg sync.WaitGroup
		for range c.concurrency {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					i := next.Add(1)
					if i > int64(c.missing) {
						return
					}
					id := strconv.FormatInt(int64(c.existing)+i, 10)
					if _, err := in.take(ctx, "penetration", id, load); !isNotFound(err) {
						errs.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		return ctx.Err()
	}
	t := time.Now()
	if err := pass(); err != nil {
		return err
	}
	r.PenMS = msf(time.Since(t))
	after, err := countKeys(ctx, rdb, pattern)
	if err != nil {
		return err
	}
	r.PenLoads, r.PenKeys = loads.Load(), after-before
	// The same ids once more: what caching (or not caching) the absences buys.
	if err := pass(); err != nil {
		return err
	}
	r.PenLoads2, r.PenErrors = loads.Load()-r.PenLoads, errs.Load()
	return nil
}

// staleSet: a slow reader (database read, then a random delay before the write-back) races a
// writer that updates the database and then deletes the key. A trial is stale when the cache
// ends up holding a value older than the database.
func staleSet(ctx context.Context, c config, l library, r *Result) error {
	insts, closeAll, err := newInstances(ctx, l, 2, setup{scenario: "staleset", addr: c.redis})
	if err != nil {
		return err
	}
	defer closeAll()
	reader, writer := insts[0], insts[1]
	var mu sync.Mutex
	db := map[string]int64{}
	rng := mrand.New(mrand.NewPCG(7, 7)) // the same schedule for every library
	var errs atomic.Int64
	for trial := 0; trial < c.trials && ctx.Err() == nil; trial++ {
		id := "t" + strconv.Itoa(trial)
		readDelay := time.Duration(rng.IntN(1000)) * time.Microsecond
		writeDelay := time.Duration(rng.IntN(1000)) * time.Microsecond
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, err := reader.take(ctx, "staleset", id, func(context.Context, string) (Payload, error) {
				mu.Lock()
				v := db[id]
				mu.Unlock()
				time.Sleep(readDelay)
				return Payload{ID: v}, nil
			})
			if err != nil {
				errs.Add(1)
			}
		}()
		go func() {
			defer wg.Done()
			time.Sleep(writeDelay)
			mu.Lock()
			db[id]++
			mu.Unlock()
			if err := writer.del(ctx, "staleset", id); err != nil {
				errs.Add(1)
			}
		}()
		wg.Wait()
		r.StaleTrials++
		v, found, err := reader.get(ctx, "staleset", id)
		if err != nil {
			errs.Add(1)
			continue
		}
		mu.Lock()
		current := db[id]
		mu.Unlock()
		if found && v.ID != current {
			r.Stale++
		}
	}
	r.StaleErrors = errs.Load()
	return ctx.Err()
}

// hit: every library reads the same number of distinct warm keys, interleaved in chunks so that
// they share the machine's noise; the baseline reads plain JSON with GET + json.Unmarshal.
func hit(ctx context.Context, c config, rdb *redis.Client, runID string, libs []library, results []*Result) (rawNS int64, err error) {
	ids := make([]string, c.keys)
	for i := range ids {
		ids[i] = strconv.Itoa(i)
	}
	// surge once more with a Redis Bloom filter holding the ids (the filter is asked only
	// about misses, so a hit should cost what it costs without one), on a client with
	// ContextTimeoutEnabled (its calls are plain calls; see setup.deadlineClient).
	filter, err := surge.NewRedisFilter(rdb, "cmp-"+runID+"-hit", uint(c.keys), 0.01)
	if err != nil {
		return 0, err
	}
	if _, err := filter.Rebuild(ctx, slices.Values(ids)); err != nil {
		return 0, err
	}
	var insts []instance
	filtered := -1 // index in insts of surge with the filter
	for _, l := range libs {
		in, err := l.newInstance(ctx, setup{scenario: "hit", addr: c.redis})
		if err != nil {
			return 0, err
		}
		defer in.close()
		insts = append(insts, in)
	}
	for _, l := range libs {
		if l.name == "surge" {
			in, err := l.newInstance(ctx, setup{scenario: "hitfilter", addr: c.redis, filter: filter, deadlineClient: true})
			if err != nil {
				return 0, err
			}
			defer in.close()
			filtered = len(insts)
			insts = append(insts, in)
		}
	}
	rawKey := func(i int) string { return "cmp-" + runID + "-raw:hit:" + strconv.Itoa(i) }
	// Write the warm values (16 writers).
	var wg sync.WaitGroup
	var werr atomic.Pointer[error]
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < c.keys && ctx.Err() == nil; i += 16 {
				v := payloadFor(int64(i))
				b, _ := json.Marshal(v)
				err := rdb.Set(ctx, rawKey(i), b, 10*time.Minute).Err()
				for k, in := range insts {
					scenario := "hit"
					if k == filtered {
						scenario = "hitfilter"
					}
					err = errors.Join(err, in.set(ctx, scenario, ids[i], v))
				}
				if err != nil {
					werr.CompareAndSwap(nil, &err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if p := werr.Load(); p != nil {
		return 0, *p
	}
	time.Sleep(100 * time.Millisecond) // let surge's own Set events pass

	type reader struct {
		read  func(i int) error
		total time.Duration
		errs  int64
	}
	readers := []*reader{{read: func(i int) error { _, err := rawGet(ctx, rdb, rawKey(i)); return err }}}
	for k, in := range insts {
		scenario := "hit"
		if k == filtered {
			scenario = "hitfilter"
		}
		readers = append(readers, &reader{read: func(i int) error {
			v, err := in.read(ctx, scenario, ids[i])
			if err == nil && v.ID != int64(i) {
				err = fmt.Errorf("key %d: %+v", i, v)
			}
			return err
		}})
	}
	order := make([]*reader, len(readers))
	copy(order, readers)
	rng := mrand.New(mrand.NewPCG(1, 2))
	// A short unmeasured warm-up of the connection pools, then every key once per reader.
	for i := 0; i < min(500, c.keys); i++ {
		for _, rd := range readers {
			_ = rd.read(i)
		}
	}
	const chunk = 100
	for from := 0; from < c.keys; from += chunk {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, rd := range order {
			for i := from; i < min(from+chunk, c.keys); i++ {
				t := time.Now()
				err := rd.read(i)
				rd.total += time.Since(t)
				if err != nil {
					rd.errs++
				}
			}
		}
	}
	if readers[0].errs > 0 {
		return 0, fmt.Errorf("%d raw reads failed", readers[0].errs)
	}
	rawNS = int64(readers[0].total) / int64(c.keys)
	vsRaw := func(ns int64) float64 { return float64(int64(1000*float64(ns)/float64(rawNS))) / 1000 }
	for i := range libs {
		results[i].HitMeanNS = int64(readers[i+1].total) / int64(c.keys)
		results[i].HitVsRaw = vsRaw(results[i].HitMeanNS)
		results[i].HitErrors = readers[i+1].errs
		if libs[i].name == "surge" && filtered >= 0 {
			results[i].HitFilterMeanNS = int64(readers[filtered+1].total) / int64(c.keys)
			results[i].HitFilterVsRaw = vsRaw(results[i].HitFilterMeanNS)
			results[i].HitErrors += readers[filtered+1].errs
		}
	}
	return rawNS, nil
}

func msf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func scan(ctx context.Context, rdb *redis.Client, pattern string, fn func(keys []string) error) error {
	var cursor uint64
	for n := 0; ; {
		keys, next, err := rdb.Scan(ctx, cursor, pattern, 1000).Result()
		if err != nil {
			return err
		}
		if len(keys) > 0 {
			if err := fn(keys); err != nil {
				return err
			}
		}
		if n += len(keys); n > 10_000_000 {
			return fmt.Errorf("more than 10M keys match %s", pattern)
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}

func countKeys(ctx context.Context, rdb *redis.Client, pattern string) (int, error) {
	n := 0
	err := scan(ctx, rdb, pattern, func(keys []string) error { n += len(keys); return nil })
	return n, err
}

func deleteKeys(ctx context.Context, rdb *redis.Client, pattern string) error {
	return scan(ctx, rdb, pattern, func(keys []string) error { return rdb.Unlink(ctx, keys...).Err() })
}
