package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/cache"
)

// The stampede runs in real processes: the scenario re-executes the current binary as
// `<exe> bench stampede-worker …` with workerEnv set. In the surge binary the bench dispatch
// reaches the hidden worker scenario; a test binary calls ChildMain first in its TestMain.
const (
	workerScenario = "stampede-worker"
	workerEnv      = "SURGE_BENCH_WORKER"
	hotID          = "hot"
)

// ChildMain turns a process started by the stampede scenario into its worker and exits; in
// any other process it returns at once. A test binary that runs the stampede scenario calls it
// first thing in TestMain, since the scenario re-executes os.Executable().
func ChildMain() {
	if os.Getenv(workerEnv) == "" {
		return
	}
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "bench" {
		args = args[1:]
	}
	if err := Command(args); err != nil {
		fmt.Fprintln(os.Stderr, "stampede worker:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// stampedeKeys are the coordination keys of one run, all under one hash tag.
type stampedeKeys struct{ base string }

func newStampedeKeys(run string) stampedeKeys { return stampedeKeys{"bench:{stampede-" + run + "}"} }
func (k stampedeKeys) ready() string          { return k.base + ":ready" }
func (k stampedeKeys) start(i int) string     { return k.base + ":start:" + strconv.Itoa(i) }
func (k stampedeKeys) loads() string          { return k.base + ":loads" }
func (k stampedeKeys) loadStart() string      { return k.base + ":load-start" }
func (k stampedeKeys) landed() string         { return k.base + ":landed" }
func (k stampedeKeys) results() string        { return k.base + ":results" }
func cacheName(run string) string             { return "stampede-" + run }

const stampedePrefix = "bench"

// workerResult is what each worker process pushes to the results list.
type workerResult struct {
	Worker     int     `json:"worker"`
	FinishNS   []int64 `json:"finish_ns"`
	Errors     int     `json:"errors"`
	FirstError string  `json:"first_error,omitempty"`
}

// StampedeResult is the final JSON line of cache-stampede.
type StampedeResult struct {
	Scenario           string  `json:"scenario"`
	Redis              string  `json:"redis"`
	Run                string  `json:"run"`
	FalsePositive      bool    `json:"false_positive,omitempty"`
	AbsentWithFilter   bool    `json:"absent_with_filter,omitempty"`
	Procs              int     `json:"procs"`
	Goroutines         int     `json:"goroutines"`
	Callers            int     `json:"callers"`
	Errors             int     `json:"errors"`
	DBLoads            int64   `json:"db_loads"`
	LoadTimeMS         float64 `json:"load_time_ms"`
	LoadMS             float64 `json:"load_ms"`
	WaiterP50MS        float64 `json:"waiter_p50_ms"`
	WaiterP99MS        float64 `json:"waiter_p99_ms"`
	WaiterMaxMS        float64 `json:"waiter_max_ms"`
	WaiterP99MinusLoad float64 `json:"waiter_p99_minus_load_ms"`
	// Each process's median: the spread between processes (when each one's Go runtime is
	// woken by the event) rather than within one is what makes the tail on a small machine.
	ProcessP50MS        []float64 `json:"process_p50_ms"`
	EarlyFinishes       int       `json:"finished_before_landing"`
	StartSpreadMS       float64   `json:"start_to_landing_ms"`
	TotalP99FromStartMS float64   `json:"total_p99_from_start_ms"`
	ElapsedMS           float64   `json:"elapsed_ms"`
	TargetMet           bool      `json:"target_met"`
}

func runStampede(ctx context.Context, args []string, out *output) error {
	fs, com := newFlags("cache-stampede", out)
	procs := fs.Int("procs", 4, "worker processes")
	goroutines := fs.Int("goroutines", 250, "goroutines per process, all missing the same cold key")
	loadTime := fs.Duration("load-time", 50*time.Millisecond, "simulated database read time")
	timeout := fs.Duration("timeout", 60*time.Second, "bound on the whole run")
	falsePositive := fs.Bool("false-positive", false, "the hot id is a Bloom filter false positive: the filter lets it through, the database has no row")
	absentWithFilter := fs.Bool("absent-with-filter", false, "with -false-positive: set cache.Options.AbsentWithFilter (cache the absence)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	out.jsonOnly = com.jsonOnly
	if *procs < 1 || *goroutines < 1 || *procs**goroutines > 100_000 {
		return errors.New("bench: -procs and -goroutines must be ≥ 1, at most 100000 callers in all")
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	rdb, err := com.client(ctx, 0)
	if err != nil {
		return err
	}
	defer rdb.Close()
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("bench: finding the binary to re-execute: %w", err)
	}

	run := runID()
	keys := newStampedeKeys(run)
	hotKey := stampedePrefix + ":" + cacheName(run) + ":{" + hotID + "}" // cache.Cache.Key
	cleanup := func() {
		all := []string{keys.ready(), keys.loads(), keys.loadStart(), keys.landed(), keys.results(), hotKey, hotKey + ":lease"}
		for i := 0; i < *procs; i++ {
			all = append(all, keys.start(i))
		}
		_ = unlink(ctx, rdb, all...)
	}
	defer cleanup()

	began := time.Now()
	what := "one cold key"
	if *falsePositive {
		what = fmt.Sprintf("one id that is a Bloom false positive (AbsentWithFilter %v)", *absentWithFilter)
	}
	out.printf("cache-stampede: %d processes × %d goroutines, %s, loader %v, Redis %s\n", *procs, *goroutines, what, *loadTime, com.addrs)

	// Start the workers; each INCRs the ready counter once its goroutines wait on the start.
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	type proc struct {
		cmd    *exec.Cmd
		stderr bytes.Buffer
		done   chan error
	}
	ps := make([]*proc, *procs)
	for i := range ps {
		p := &proc{done: make(chan error, 1)}
		p.cmd = exec.CommandContext(wctx, exe, "bench", workerScenario,
			"-redis-addrs", com.addrs, "-run", run, "-index", strconv.Itoa(i),
			"-goroutines", strconv.Itoa(*goroutines), "-load-time", loadTime.String(), "-timeout", timeout.String(),
			"-false-positive="+strconv.FormatBool(*falsePositive), "-absent-with-filter="+strconv.FormatBool(*absentWithFilter))
		p.cmd.Env = append(os.Environ(), workerEnv+"=1")
		p.cmd.Stderr = &p.stderr
		p.cmd.WaitDelay = 5 * time.Second
		if err := p.cmd.Start(); err != nil {
			return fmt.Errorf("bench: starting worker %d (%s): %w", i, exe, err)
		}
		ps[i] = p
		go func() { p.done <- p.cmd.Wait() }()
	}
	failed := func(what string) error {
		wcancel()
		var b strings.Builder
		for i, p := range ps {
			select {
			case err := <-p.done:
				fmt.Fprintf(&b, "\n  worker %d: %v: %s", i, err, strings.TrimSpace(p.stderr.String()))
				p.done <- err
			case <-time.After(6 * time.Second):
			}
		}
		return fmt.Errorf("bench: %s%s", what, b.String())
	}
	// Wait for every worker to be ready (bounded by ctx and the workers' own exits).
	for {
		n, err := rdb.Get(ctx, keys.ready()).Int()
		if err != nil && !errors.Is(err, redis.Nil) {
			return failed(fmt.Sprintf("reading the ready counter: %v", err))
		}
		if n >= *procs {
			break
		}
		for _, p := range ps {
			select {
			case err := <-p.done:
				p.done <- err
				return failed("a worker exited before the start")
			default:
			}
		}
		select {
		case <-ctx.Done():
			return failed("workers not ready in time")
		case <-time.After(5 * time.Millisecond):
		}
	}
	// One shared start instant, a little ahead so that every worker has its BLPOP answer.
	startAt := time.Now().Add(30 * time.Millisecond)
	if _, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := 0; i < *procs; i++ {
			p.RPush(ctx, keys.start(i), startAt.UnixNano())
		}
		return nil
	}); err != nil {
		return failed(fmt.Sprintf("publishing the start: %v", err))
	}

	// Collect one result per worker. A worker that exits cleanly has pushed its result.
	var results []workerResult
	for len(results) < *procs {
		r, err := rdb.BLPop(ctx, time.Second, keys.results()).Result()
		if errors.Is(err, redis.Nil) {
			for _, p := range ps {
				select {
				case err := <-p.done:
					p.done <- err
					if err != nil {
						return failed("a worker failed")
					}
				default:
				}
			}
			continue
		}
		if err != nil {
			return failed(fmt.Sprintf("collecting results: %v", err))
		}
		var wr workerResult
		if err := json.Unmarshal([]byte(r[1]), &wr); err != nil {
			return failed(fmt.Sprintf("bad worker result: %v", err))
		}
		results = append(results, wr)
	}
	for i, p := range ps {
		if err := <-p.done; err != nil {
			return fmt.Errorf("bench: worker %d: %v: %s", i, err, strings.TrimSpace(p.stderr.String()))
		}
	}
	elapsed := time.Since(began)

	loads, _ := rdb.Get(ctx, keys.loads()).Int64()
	loadStart, err1 := rdb.Get(ctx, keys.loadStart()).Int64()
	landed, err2 := rdb.Get(ctx, keys.landed()).Int64()
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("bench: the loader left no timestamps (did any worker load?): %w", err)
	}
	var after, fromStart []time.Duration
	res := StampedeResult{Scenario: "cache-stampede", Redis: com.addrs, Run: run, FalsePositive: *falsePositive, AbsentWithFilter: *absentWithFilter, Procs: *procs, Goroutines: *goroutines,
		DBLoads: loads, LoadTimeMS: ms(*loadTime), LoadMS: ms(time.Duration(landed - loadStart))}
	res.ProcessP50MS = make([]float64, *procs)
	var firstErr string
	for _, r := range results {
		res.Errors += r.Errors
		if firstErr == "" {
			firstErr = r.FirstError
		}
		var mine []time.Duration
		for _, f := range r.FinishNS {
			mine = append(mine, time.Duration(f-landed))
		}
		if r.Worker >= 0 && r.Worker < len(res.ProcessP50MS) {
			res.ProcessP50MS[r.Worker] = ms(summarize(mine).P50)
		}
		for _, f := range r.FinishNS {
			d := time.Duration(f - landed)
			if d < 0 { // answered before the landing: only possible for a wrong answer
				res.EarlyFinishes++
				d = 0
			}
			after = append(after, d)
			fromStart = append(fromStart, time.Duration(f-startAt.UnixNano()))
		}
	}
	res.Callers = len(after)
	a, s := summarize(after), summarize(fromStart)
	res.WaiterP50MS, res.WaiterP99MS, res.WaiterMaxMS = ms(a.P50), ms(a.P99), ms(a.Max)
	res.WaiterP99MinusLoad = res.WaiterP99MS
	res.StartSpreadMS = ms(time.Duration(landed - startAt.UnixNano()))
	res.TotalP99FromStartMS = ms(s.P99)
	res.ElapsedMS = ms(elapsed)
	res.TargetMet = loads == 1 && a.P99 <= 5*time.Millisecond && res.Errors == 0

	out.printf("  callers %d, errors %d, database loads %d (target 1)\n", res.Callers, res.Errors, loads)
	out.printf("  load took %.1f ms (start → landing %.1f ms)\n", res.LoadMS, res.StartSpreadMS)
	out.printf("  waiters after the value landed: p50 %.2f ms, p99 %.2f ms, max %.2f ms (target p99 ≤ 5 ms)\n", res.WaiterP50MS, res.WaiterP99MS, res.WaiterMaxMS)
	if firstErr != "" {
		out.printf("  first error: %s\n", firstErr)
	}
	out.printf("  target met: %v\n", res.TargetMet)
	return out.json(res)
}

func deadlineOf(ctx context.Context) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return time.Now().Add(time.Minute)
}

// runStampedeWorker is one process of the stampede: it readies its goroutines, reports ready,
// waits for the shared start instant, lets them all GetOrLoad the hot key and pushes their
// finish times.
func runStampedeWorker(ctx context.Context, args []string, out *output) error {
	fs, com := newFlags(workerScenario, out)
	run := fs.String("run", "", "run id")
	index := fs.Int("index", 0, "worker index")
	goroutines := fs.Int("goroutines", 250, "goroutines")
	loadTime := fs.Duration("load-time", 50*time.Millisecond, "simulated database read time")
	timeout := fs.Duration("timeout", 60*time.Second, "bound on the worker")
	falsePositive := fs.Bool("false-positive", false, "the hot id passes the filter but has no row")
	absentWithFilter := fs.Bool("absent-with-filter", false, "cache.Options.AbsentWithFilter")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *run == "" {
		return errors.New("stampede-worker: -run is required (this is started by cache-stampede)")
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	rdb, err := com.client(ctx, 0)
	if err != nil {
		return err
	}
	defer rdb.Close()
	keys := newStampedeKeys(*run)
	opts := cache.Options{Prefix: stampedePrefix, Name: cacheName(*run), TTL: time.Minute}
	if *falsePositive {
		// A filter that lets the hot id through stands for a false positive of a real one.
		f, err := cache.NewLocalFilter(1000, 0.01)
		if err != nil {
			return err
		}
		if err := f.Add(ctx, hotID); err != nil {
			return err
		}
		opts.Filter, opts.AbsentWithFilter = f, *absentWithFilter
	}
	c, err := cache.New[Payload](ctx, rdb, opts)
	if err != nil {
		return err
	}
	defer c.Close()

	// The loader records its start and landing times in Redis from a goroutine, so that the
	// bench's own round trip does not delay the value's write-back it is timing. NX: if
	// several loads run (they should not), the first one's times are kept.
	var recording sync.WaitGroup
	var recordErr atomic.Pointer[error]
	load := func(ctx context.Context, id string) (Payload, error) {
		if err := rdb.Incr(ctx, keys.loads()).Err(); err != nil {
			return Payload{}, err
		}
		t0 := time.Now()
		time.Sleep(*loadTime)
		landed := time.Now()
		recording.Add(1)
		go func() {
			defer recording.Done()
			_, err := rdb.Pipelined(context.WithoutCancel(ctx), func(p redis.Pipeliner) error {
				p.SetNX(ctx, keys.loadStart(), t0.UnixNano(), time.Minute)
				p.SetNX(ctx, keys.landed(), landed.UnixNano(), time.Minute)
				return nil
			})
			if err != nil {
				recordErr.CompareAndSwap(nil, &err)
			}
		}()
		if *falsePositive {
			return Payload{}, cache.ErrNotFound
		}
		return payloadFor(1), nil
	}

	start := make(chan struct{})
	finish := make([]int64, *goroutines)
	var mu sync.Mutex
	res := workerResult{Worker: *index}
	var wg sync.WaitGroup
	for j := 0; j < *goroutines; j++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-start:
			case <-ctx.Done():
				return
			}
			v, err := c.GetOrLoad(ctx, hotID, load)
			finish[j] = time.Now().UnixNano()
			switch {
			case *falsePositive && errors.Is(err, cache.ErrNotFound):
				err = nil
			case *falsePositive && err == nil:
				err = fmt.Errorf("a value %+v for an id with no row", v)
			case err == nil && v.ID != 1:
				err = fmt.Errorf("wrong value %+v", v)
			}
			if err != nil {
				mu.Lock()
				if res.Errors++; res.FirstError == "" {
					res.FirstError = err.Error()
				}
				mu.Unlock()
			}
		}()
	}
	if err := rdb.Incr(ctx, keys.ready()).Err(); err != nil {
		cancel()
		wg.Wait()
		return err
	}
	r, err := rdb.BLPop(ctx, time.Until(deadlineOf(ctx)), keys.start(*index)).Result()
	if err != nil {
		cancel()
		wg.Wait()
		return fmt.Errorf("waiting for the start: %w", err)
	}
	at, err := strconv.ParseInt(r[1], 10, 64)
	if err != nil {
		cancel()
		wg.Wait()
		return err
	}
	time.Sleep(time.Until(time.Unix(0, at)))
	close(start)
	wg.Wait()
	recording.Wait()
	if p := recordErr.Load(); p != nil {
		return fmt.Errorf("recording the load times: %w", *p)
	}
	res.FinishNS = finish
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	return rdb.RPush(context.WithoutCancel(ctx), keys.results(), b).Err()
}
