package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/surgekit/surge/lock"
)

// LockPhase is one phase of the lock scenario.
type LockPhase struct {
	Clients      int     `json:"clients"`
	Goroutines   int     `json:"goroutines_per_client"`
	Acquisitions int     `json:"acquisitions"`
	PerSec       float64 `json:"acquire_release_per_sec"`
	// CycleP50/P99: one Obtain + Release, as the caller sees it.
	CycleP50MS float64 `json:"cycle_p50_ms"`
	CycleP99MS float64 `json:"cycle_p99_ms"`
	// Wake-up latency (contended only): from the holder's Release call to the next holder
	// having the lock.
	WakeP50MS  float64 `json:"wake_p50_ms,omitempty"`
	WakeP99MS  float64 `json:"wake_p99_ms,omitempty"`
	Handovers  int     `json:"handovers,omitempty"`
	Violations int64   `json:"violations"`
	ElapsedMS  float64 `json:"elapsed_ms"`
}

// LockResult is the final JSON line of lock.
type LockResult struct {
	Scenario    string    `json:"scenario"`
	Redis       string    `json:"redis"`
	KeyPrefix   string    `json:"key_prefix"`
	Uncontended LockPhase `json:"uncontended"`
	Contended   LockPhase `json:"contended"`
	KeysLeft    int       `json:"keys_left"`
	ElapsedMS   float64   `json:"elapsed_ms"`
}

// runLock measures the lock package: uncontended acquire/release (distinct names, no waiting)
// and a contended handover (several clients, like processes, on one name, woken by pub/sub).
func runLock(ctx context.Context, args []string, out *output) error {
	fs, com := newFlags("lock", out)
	ops := fs.Int("ops", 20_000, "uncontended acquisitions (each Obtain + Release of its own name)")
	goroutines := fs.Int("goroutines", 32, "uncontended: goroutines")
	acq := fs.Int("acquisitions", 2_000, "contended acquisitions of one lock")
	clients := fs.Int("clients", 4, "contended: clients, each with its own Redis connections (like processes)")
	waiters := fs.Int("waiters", 2, "contended: goroutines per client")
	hold := fs.Duration("hold", 0, "contended: how long each holder keeps the lock")
	timeout := fs.Duration("timeout", 2*time.Minute, "bound on the whole run")
	if err := fs.Parse(args); err != nil {
		return err
	}
	out.jsonOnly = com.jsonOnly
	if *ops < 1 || *ops > 100_000_000 || *acq < 2 || *acq > 100_000_000 || *goroutines < 1 || *goroutines > 10_000 ||
		*clients < 1 || *clients > 64 || *waiters < 1 || *waiters > 1_000 || *hold < 0 || *hold > time.Second {
		return errors.New("bench: -ops in [1, 1e8], -acquisitions in [2, 1e8], -goroutines in [1, 1e4], -clients in [1, 64], -waiters in [1, 1000], -hold in [0, 1s]")
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	rdb, err := com.client(ctx, *goroutines+8)
	if err != nil {
		return err
	}
	defer rdb.Close()
	prefix := "bench-lock-" + runID()
	defer func() { _, _ = deleteKeys(ctx, rdb, prefix+":*") }()
	began := time.Now()
	res := LockResult{Scenario: "lock", Redis: com.addrs, KeyPrefix: prefix}
	out.printf("lock: Redis %s, keys %s:*\n", com.addrs, prefix)

	// Uncontended: every goroutine locks names of its own; explicit lease, so no watchdog.
	c := lock.New(rdb, lock.Options{Prefix: prefix})
	defer c.Close()
	u, err := lockPhase(ctx, *ops, []*lock.Client{c}, *goroutines, func(g int) string { return "u" + strconv.Itoa(g) }, false, 0)
	if err != nil {
		return err
	}
	res.Uncontended = u
	out.printf("  uncontended  %d goroutines: %8.0f acquire+release/s   cycle p50 %.3f ms  p99 %.3f ms\n",
		u.Goroutines, u.PerSec, u.CycleP50MS, u.CycleP99MS)

	// Contended: clients with their own connections take turns on one name.
	var cs []*lock.Client
	for range *clients {
		own, err := com.client(ctx, *waiters+4)
		if err != nil {
			return err
		}
		defer own.Close()
		lc := lock.New(own, lock.Options{Prefix: prefix})
		defer lc.Close()
		cs = append(cs, lc)
	}
	k, err := lockPhase(ctx, *acq, cs, *waiters, func(int) string { return "contended" }, true, *hold)
	if err != nil {
		return err
	}
	res.Contended = k
	out.printf("  contended    %d clients x %d: %8.0f handovers/s   wake-up p50 %.3f ms  p99 %.3f ms (%d handovers)\n",
		k.Clients, k.Goroutines, k.PerSec, k.WakeP50MS, k.WakeP99MS, k.Handovers)
	out.printf("  mutual-exclusion violations: %d\n", u.Violations+k.Violations)

	// Nothing but the never-expiring fence counters may be left once every lock is released.
	left, err := countKeys(ctx, rdb, prefix+":*")
	if err != nil {
		return err
	}
	fences, err := countKeys(ctx, rdb, prefix+":*:fence")
	if err != nil {
		return err
	}
	res.KeysLeft = left - fences
	res.ElapsedMS = ms(time.Since(began))
	if res.KeysLeft != 0 {
		out.printf("  %d lock keys left after release\n", res.KeysLeft)
	}
	return out.json(res)
}

// lockPhase runs n Obtain+Release cycles over clients × goroutines. With one name shared by
// all (shared), it measures handovers: wake-up latency from a Release call to the next
// holder, and counts two holders at once as violations.
func lockPhase(ctx context.Context, n int, clients []*lock.Client, goroutines int, name func(g int) string, shared bool, hold time.Duration) (LockPhase, error) {
	ph := LockPhase{Clients: len(clients), Goroutines: goroutines, Acquisitions: n}
	var next atomic.Int64
	var inside atomic.Int64
	var violations atomic.Int64
	var releasedAt atomic.Int64 // unix nanos of the last Release call, 0: none yet
	var mu sync.Mutex
	var cycles, wakes []time.Duration
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	for ci, c := range clients {
		for g := range goroutines {
			gid := ci*goroutines + g
			wg.Go(func() {
				var myCycles, myWakes []time.Duration
				defer func() {
					mu.Lock()
					cycles = append(cycles, myCycles...)
					wakes = append(wakes, myWakes...)
					mu.Unlock()
				}()
				for i := int(next.Add(1)); i <= n && ctx.Err() == nil; i = int(next.Add(1)) {
					t0 := time.Now()
					l, err := c.Obtain(ctx, name(gid), lock.LockOptions{Lease: 10 * time.Second, Wait: -1})
					if err != nil {
						mu.Lock()
						firstErr = firstOf(firstErr, fmt.Errorf("bench: obtain: %w", err))
						mu.Unlock()
						return
					}
					got := time.Now()
					if r := releasedAt.Swap(0); r != 0 {
						myWakes = append(myWakes, got.Sub(time.Unix(0, r)))
					}
					if shared && inside.Add(1) != 1 {
						violations.Add(1)
					}
					if hold > 0 {
						time.Sleep(hold)
					}
					if shared {
						inside.Add(-1)
						releasedAt.Store(time.Now().UnixNano())
					}
					if err := l.Release(ctx); err != nil {
						mu.Lock()
						firstErr = firstOf(firstErr, fmt.Errorf("bench: release: %w", err))
						mu.Unlock()
						return
					}
					myCycles = append(myCycles, time.Since(t0))
				}
			})
		}
	}
	wg.Wait()
	el := time.Since(start)
	if firstErr != nil {
		return ph, firstErr
	}
	if err := ctx.Err(); err != nil {
		return ph, fmt.Errorf("bench: lock did not finish in time: %w", err)
	}
	ph.PerSec = float64(int64(float64(n)/el.Seconds()*10)) / 10
	cd := summarize(cycles)
	ph.CycleP50MS, ph.CycleP99MS = ms(cd.P50), ms(cd.P99)
	if len(wakes) > 0 {
		wd := summarize(wakes)
		ph.WakeP50MS, ph.WakeP99MS, ph.Handovers = ms(wd.P50), ms(wd.P99), wd.N
	}
	ph.Violations = violations.Load()
	ph.ElapsedMS = ms(el)
	return ph, nil
}

func firstOf(first, err error) error {
	if first != nil {
		return first
	}
	return err
}
