// Package gctune keeps Go's garbage collector from collecting a small heap many times a
// second. The collector starts a cycle when the heap reaches live × (1 + GOGC/100). A server
// whose live heap is a few megabytes, but which allocates tens of kilobytes per request,
// then collects every few hundred requests: at thousands of requests a second that is
// several cycles a second, each taking CPU from requests and adding to their tail.
//
// Start raises GOGC while the live heap is small, so that the heap may grow to at least a
// floor before a cycle, and gives the base GOGC back once the live heap is large enough for
// the base to reach the floor by itself: memory stays bounded by max(floor, what the base
// allows), never more. A memory limit (GOMEMLIMIT) still applies on top.
package gctune

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// The collector's goal is live heap + (live heap + stacks + globals) × GOGC/100.
var sampleNames = [3]string{"/gc/heap/live:bytes", "/gc/scan/stack:bytes", "/gc/scan/globals:bytes"}

// heapMinimum is the runtime's least goal at GOGC=100 (4 MiB), which it scales with GOGC: at
// GOGC=1600 no collection starts below 64 MiB, however small the live heap. So GOGC is kept at
// or below floor / heapMinimum × 100.
const heapMinimum = 4 << 20

var running atomic.Bool // one tuner per process: GOGC is process-wide

// Start tunes GOGC after every collection so that the next one starts when the heap reaches
// max(floor, what base gives) bytes. It returns a func that stops the tuning and puts
// base back. Only one tuner runs in a process: a second Start, while one runs, does nothing
// (its stop too). floor 0 does nothing.
func Start(floor uint64, base int) (stop func()) {
	if floor == 0 || base <= 0 || !running.CompareAndSwap(false, true) {
		return func() {}
	}
	t := &tuner{floor: floor, base: base, last: -1}
	for i, name := range sampleNames {
		t.samples[i].Name = name
	}
	t.adjust()
	t.arm()
	var once sync.Once
	return func() {
		once.Do(func() {
			t.stopped.Store(true)
			t.mu.Lock()
			debug.SetGCPercent(base)
			t.mu.Unlock()
			running.Store(false)
		})
	}
}

type tuner struct {
	floor   uint64
	base    int
	stopped atomic.Bool
	mu      sync.Mutex // orders adjust against stop
	last    int        // the GOGC set last
	samples [len(sampleNames)]metrics.Sample
}

// sentinel is garbage as soon as it is made: its finalizer runs after the next collection
// and makes the next sentinel. It holds a pointer, so it is never a tiny allocation (which
// may never be finalized).
type sentinel struct{ t *tuner }

func (t *tuner) arm() {
	runtime.SetFinalizer(&sentinel{t: t}, func(s *sentinel) {
		if s.t.stopped.Load() {
			return
		}
		s.t.adjust()
		s.t.arm()
	})
}

// adjust sets GOGC for the live heap the last collection left.
func (t *tuner) adjust() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped.Load() {
		return
	}
	var v [len(sampleNames)]uint64
	metrics.Read(t.samples[:])
	for i, s := range t.samples {
		if s.Value.Kind() != metrics.KindUint64 {
			return
		}
		v[i] = s.Value.Uint64()
	}
	p := Percent(t.floor, v[0], v[0]+v[1]+v[2], t.base)
	// Small moves are not worth a call: the target moves with the live heap anyway.
	if t.last > 0 && p*20 > t.last*19 && p*20 < t.last*21 {
		return
	}
	debug.SetGCPercent(p)
	t.last = p
}

// Percent is the GOGC that puts the next collection at a heap of max(floor, what base
// gives), for the collector's goal max(live + scannable × GOGC/100, heapMinimum × GOGC/100)
// (live heap, and scannable the live heap plus stacks and globals).
func Percent(floor, live, scannable uint64, base int) int {
	if scannable == 0 {
		scannable = 1
	}
	if floor <= live {
		return base
	}
	p := min((floor-live)*100/scannable, floor*100/heapMinimum)
	return max(int(p), base)
}
