package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/surgekit/surge/idgen"
)

// IDGenResult is the final JSON line of idgen. Rates are ids per second from this one process.
type IDGenResult struct {
	Scenario   string  `json:"scenario"`
	Redis      string  `json:"redis"`
	Run        string  `json:"run"`
	KeyPrefix  string  `json:"key_prefix"`
	DurationMS float64 `json:"duration_ms_per_measure"`

	PlainSerial        float64 `json:"plain_serial_ids_per_s"`
	PlainParallel      float64 `json:"plain_parallel_ids_per_s"`
	PlainGoroutines    int     `json:"plain_goroutines"`
	SegmentSerial      float64 `json:"segment_serial_ids_per_s"`
	SegmentParallel    float64 `json:"segment_parallel_ids_per_s"`
	SegmentGoroutines  int     `json:"segment_goroutines"`
	SegmentRedisCalls  int64   `json:"segment_redis_calls"` // block fetches (INCRBY) over both segment measures
	SegmentIDsPerCall  float64 `json:"segment_ids_per_redis_call"`
	RedisBenchmarkINCR float64 `json:"redis_benchmark_incr_rps,omitempty"`
	RedisBenchmarkP50  float64 `json:"redis_benchmark_incr_p50_ms,omitempty"`
	RedisBenchmarkNote string  `json:"redis_benchmark_note,omitempty"`
	// Ratios to redis-benchmark's INCR rate (50 clients), measured in the same run.
	PlainVsINCR         float64 `json:"plain_parallel_vs_incr,omitempty"`
	SegmentVsINCR       float64 `json:"segment_parallel_vs_incr,omitempty"`
	SegmentSerialVsINCR float64 `json:"segment_serial_vs_incr,omitempty"`

	IDs             int64   `json:"ids"`
	Errors          int64   `json:"errors"`
	OrderViolations int64   `json:"order_violations"` // a goroutine's id not above its previous one
	ElapsedMS       float64 `json:"elapsed_ms"`
	TargetSegment   bool    `json:"target_segment_10m_met"` // ≥ 10M ids/s from one process
}

func runIDGen(ctx context.Context, args []string, out *output) error {
	fs, com := newFlags("idgen", out)
	duration := fs.Duration("duration", 2*time.Second, "how long each of the four measures runs")
	plainG := fs.Int("plain-goroutines", 50, "goroutines of the parallel plain measure (redis-benchmark uses 50 clients)")
	segG := fs.Int("segment-goroutines", runtime.GOMAXPROCS(0), "goroutines of the parallel segment measure")
	rbench := fs.Bool("redis-benchmark", true, "also run `redis-benchmark -t incr -q` if it is on PATH")
	incrN := fs.Int("incr-n", 200_000, "requests of the redis-benchmark INCR run")
	timeout := fs.Duration("timeout", 2*time.Minute, "bound on the whole run")
	if err := fs.Parse(args); err != nil {
		return err
	}
	out.jsonOnly = com.jsonOnly
	if *duration <= 0 || *duration > 10*time.Minute || *plainG < 1 || *segG < 1 || *plainG > 10_000 || *segG > 10_000 || *incrN < 1 {
		return errors.New("bench: -duration in (0, 10m], -plain-goroutines and -segment-goroutines in [1, 10000], -incr-n ≥ 1")
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	rdb, err := com.client(ctx, *plainG+4)
	if err != nil {
		return err
	}
	defer rdb.Close()
	counter := &cmdCounter{} // counts the segment generators' round trips
	segRdb, err := com.client(ctx, 0)
	if err != nil {
		return err
	}
	defer segRdb.Close()
	segRdb.AddHook(counter)

	run := runID()
	prefix := "bench-idgen-" + run
	defer func() { _, _ = deleteKeys(ctx, rdb, "id:"+prefix+"-*") }()
	res := IDGenResult{Scenario: "idgen", Redis: com.addrs, Run: run, KeyPrefix: "id:" + prefix + "-", DurationMS: ms(*duration),
		PlainGoroutines: *plainG, SegmentGoroutines: *segG}
	out.printf("idgen: %v per measure, Redis %s, one process (GOMAXPROCS %d)\n", *duration, com.addrs, runtime.GOMAXPROCS(0))
	began := time.Now()

	// measure runs n goroutines calling g.Next for the duration (and a bound on the count) and
	// returns the rate; each goroutine checks that its ids increase.
	var segIDs int64
	measure := func(g *idgen.Generator, n int) (float64, int64, error) {
		var total, errs, order atomic.Int64
		var firstErr atomic.Pointer[error]
		deadline := time.Now().Add(*duration)
		const maxPerGoroutine = 1 << 30
		var wg sync.WaitGroup
		start := time.Now()
		for range n {
			wg.Go(func() {
				var prev int64
				count := int64(0)
				for count < maxPerGoroutine {
					if count&1023 == 0 && (time.Now().After(deadline) || ctx.Err() != nil) {
						break
					}
					id, err := g.Next(ctx)
					if err != nil {
						errs.Add(1)
						firstErr.CompareAndSwap(nil, &err)
						break
					}
					if id <= prev {
						order.Add(1)
					}
					prev = id
					count++
				}
				total.Add(count)
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		res.IDs += total.Load()
		res.Errors += errs.Load()
		res.OrderViolations += order.Load()
		if p := firstErr.Load(); p != nil {
			return 0, 0, fmt.Errorf("bench: idgen Next: %w", *p)
		}
		return float64(total.Load()) / elapsed.Seconds(), total.Load(), nil
	}
	type step struct {
		name    string
		segment bool
		n       int
		into    *float64
	}
	steps := []step{
		{"plain, 1 goroutine", false, 1, &res.PlainSerial},
		{fmt.Sprintf("plain, %d goroutines", *plainG), false, *plainG, &res.PlainParallel},
		{"segment, 1 goroutine", true, 1, &res.SegmentSerial},
		{fmt.Sprintf("segment, %d goroutines", *segG), true, *segG, &res.SegmentParallel},
	}
	for i, s := range steps {
		var g *idgen.Generator
		var err error
		if s.segment {
			g, err = idgen.NewSegment(segRdb, fmt.Sprintf("%s-%d", prefix, i))
		} else {
			g, err = idgen.New(rdb, fmt.Sprintf("%s-%d", prefix, i))
		}
		if err != nil {
			return err
		}
		// Warm up off the clock: the script is loaded, the segment's first block is in.
		if _, err := g.Next(ctx); err != nil {
			_ = g.Close()
			return fmt.Errorf("bench: idgen warm-up: %w", err)
		}
		rate, count, err := measure(g, s.n)
		_ = g.Close()
		if err != nil {
			return err
		}
		if s.segment {
			segIDs += count + 1
		}
		*s.into = rate
		out.printf("  %-24s %14.0f ids/s\n", s.name, rate)
		if i == 1 && *rbench { // redis-benchmark right after the plain measures, on the same Redis
			res.RedisBenchmarkINCR, res.RedisBenchmarkP50, res.RedisBenchmarkNote = redisBenchmarkTest(ctx, com.addrList(), "incr", *incrN)
			if res.RedisBenchmarkINCR > 0 {
				out.printf("  %-24s %14.0f INCR/s (redis-benchmark -t incr -n %d -q, 50 clients, p50 %.3f ms)\n", "redis-benchmark", res.RedisBenchmarkINCR, *incrN, res.RedisBenchmarkP50)
			} else {
				out.printf("  redis-benchmark: %s\n", res.RedisBenchmarkNote)
			}
		}
	}
	res.SegmentRedisCalls = counter.n.Load()
	if res.SegmentRedisCalls > 0 {
		res.SegmentIDsPerCall = float64(segIDs / res.SegmentRedisCalls)
	}
	round := func(x float64) float64 { return float64(int64(x*1000)) / 1000 }
	if r := res.RedisBenchmarkINCR; r > 0 {
		res.PlainVsINCR = round(res.PlainParallel / r)
		res.SegmentVsINCR = round(res.SegmentParallel / r)
		res.SegmentSerialVsINCR = round(res.SegmentSerial / r)
		out.printf("  per process vs redis-benchmark INCR: plain %.3f×, segment %.0f× (1 goroutine %.0f×)\n", res.PlainVsINCR, res.SegmentVsINCR, res.SegmentSerialVsINCR)
	}
	out.printf("  segment mode: %d Redis round trips (block fetches and warm-ups) for about %.0f ids each\n", res.SegmentRedisCalls, res.SegmentIDsPerCall)
	res.TargetSegment = max(res.SegmentSerial, res.SegmentParallel) >= 10e6
	res.ElapsedMS = ms(time.Since(began))
	return out.json(res)
}
