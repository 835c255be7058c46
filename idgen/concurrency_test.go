package idgen_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/idgen"
)

// Several processes (each its own generator, Redis client and clock) × goroutines generate ids
// while their clocks walk across midnight, each clock skewed from the others. Checked:
//   - no id repeats, across all processes;
//   - each goroutine's ids strictly increase;
//   - per generator, calls made one after another from different goroutines (serialised by a
//     mutex, a single consumer's view) get increasing ids;
//   - every id carries a second of the day whose key its sequence number came from: day D+1's
//     counter is preset to 10^9, so an id of day D with a number from D+1's key (or the
//     reverse) would show.
//
// Sizes: 2M ids in segment mode and 200k in plain mode on each of single Redis and Cluster
// (IDGEN_LONG=1 multiplies them by 10).
func TestConcurrentUnique(t *testing.T) {
	scale := 1
	if long() {
		scale = 10
	}
	for _, c := range []struct {
		name    string
		segment bool
		total   int
	}{{"plain", false, 200_000 * scale}, {"segment", true, 2_000_000 * scale}} {
		t.Run(c.name, func(t *testing.T) {
			eachBackend(t, func(t *testing.T, open func(testing.TB) redis.UniversalClient) {
				stress(t, open, c.segment, c.total)
			})
		})
	}
}

func stress(t *testing.T, open func(testing.TB) redis.UniversalClient, segment bool, total int) {
	const (
		procs      = 4
		workers    = 8 // free-running goroutines per process
		serialised = 2 // goroutines per process taking turns under one mutex
		presetD1   = 1_000_000_000
	)
	ctx := context.Background()
	admin := open(t)
	p := newPrefix(t, admin)
	mid := nextMidnight()
	if err := setCounter(ctx, admin, dayKey(p, mid), presetD1); err != nil {
		t.Fatal(err)
	}
	perProc := total / procs
	perGoroutine := perProc / (workers + serialised)
	// Each clock advances by tick per reading, so a process's run spans about a second of
	// clock time centred on midnight, shifted by its skew.
	tick := time.Second / time.Duration(perProc)

	type result struct {
		ids    [][]int64 // per free-running goroutine
		serial []int64   // the serialised goroutines' ids, in call order
	}
	results := make([]result, procs)
	var wg sync.WaitGroup
	errs := make(chan error, procs*(workers+serialised))
	for pi := range procs {
		skew := time.Duration(pi-procs/2) * 100 * time.Millisecond
		clk := newClock(mid.Add(-500*time.Millisecond+skew), tick)
		newGen := idgen.New
		if segment {
			newGen = idgen.NewSegment
		}
		g, err := newGen(open(t), p, idgen.WithClock(clk.Now))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		r := &results[pi]
		r.ids = make([][]int64, workers)
		for w := range workers {
			wg.Go(func() {
				ids := make([]int64, 0, perGoroutine)
				for range perGoroutine {
					id, err := g.Next(ctx)
					if err != nil {
						errs <- err
						return
					}
					if n := len(ids); n > 0 && id <= ids[n-1] {
						errs <- fmt.Errorf("process %d goroutine %d: %d after %d", pi, w, id, ids[n-1])
						return
					}
					ids = append(ids, id)
				}
				r.ids[w] = ids
			})
		}
		var mu sync.Mutex
		r.serial = make([]int64, 0, serialised*perGoroutine)
		for range serialised {
			wg.Go(func() {
				for range perGoroutine {
					mu.Lock()
					id, err := g.Next(ctx)
					if err != nil {
						mu.Unlock()
						errs <- err
						return
					}
					r.serial = append(r.serial, id)
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	all := make([]int64, 0, total)
	for pi, r := range results {
		for i := 1; i < len(r.serial); i++ {
			if r.serial[i] <= r.serial[i-1] {
				t.Fatalf("process %d: the %dth call in sequence got %d after %d", pi, i, r.serial[i], r.serial[i-1])
			}
		}
		all = append(all, r.serial...)
		for _, ids := range r.ids {
			all = append(all, ids...)
		}
	}
	slices.Sort(all)
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			t.Fatalf("id %d handed out twice", all[i])
		}
	}
	perDay := map[bool]int{}
	for _, id := range all {
		at, seq := idgen.Decompose(id)
		afterMidnight := !at.Before(mid)
		if at.Before(mid.Add(-24*time.Hour)) || !at.Before(mid.Add(24*time.Hour)) ||
			afterMidnight != (seq > presetD1) {
			t.Fatalf("id %d = (%v, %d): its second and its day key disagree", id, at, seq)
		}
		perDay[afterMidnight]++
	}
	if perDay[false] == 0 || perDay[true] == 0 {
		t.Fatalf("the run did not cross midnight: %d ids before, %d after", perDay[false], perDay[true])
	}
	t.Logf("%d unique ids (%d before midnight, %d after) from %d processes × %d goroutines",
		len(all), perDay[false], perDay[true], procs, workers+serialised)
}
