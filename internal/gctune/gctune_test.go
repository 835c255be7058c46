package gctune

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		floor, live, scan uint64
		base, want        int
	}{
		{64 * mib, 16 * mib, 16 * mib, 100, 300},   // 16 MiB × 4 = 64 MiB
		{64 * mib, 4 * mib, 4 * mib, 100, 1500},    // × 16
		{64 * mib, 4 * mib, 12 * mib, 100, 500},    // 4 + 12 × 5 = 64: stacks and globals count
		{64 * mib, 40 * mib, 40 * mib, 100, 100},   // the base already reaches the floor
		{64 * mib, 100 * mib, 100 * mib, 100, 100}, // above the floor
		{64 * mib, 16 * mib, 16 * mib, 400, 400},   // a higher base is kept
		{64 * mib, 1024, 1024, 100, 1600},          // bounded: 4 MiB × 16 is the floor already
		{64 * mib, 0, 0, 100, 1600},
		{8 * mib, 0, 0, 100, 200},
		{2 * mib, 0, 0, 100, 100}, // below the runtime's own least goal
	} {
		if got := Percent(c.floor, c.live, c.scan, c.base); got != c.want {
			t.Errorf("Percent(%d MiB, %d, %d, %d) = %d, want %d", c.floor/mib, c.live, c.scan, c.base, got, c.want)
		}
	}
}

func readUint(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

var (
	sink []byte
	held [][]byte // live heap kept by TestLargeLiveHeapGetsTheBase
)

// churn allocates n bytes of garbage in 32 KiB pieces, about what a request allocates.
func churn(n int) {
	for i := 0; i < n/(32<<10); i++ {
		sink = make([]byte, 32<<10)
	}
}

// gcCycles is the number of collections churning 256 MiB takes.
func gcCycles() uint64 {
	runtime.GC()
	before := readUint("/gc/cycles/total:gc-cycles")
	churn(256 << 20)
	return readUint("/gc/cycles/total:gc-cycles") - before
}

// waitGOGC waits for the tuner's finalizer, which runs after a collection, to set GOGC.
func waitGOGC(t *testing.T, ok func(p uint64) bool) uint64 {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		p := readUint("/gc/gogc:percent")
		if ok(p) {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("GOGC stayed %d", p)
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

func TestFloorMeansFewerCollections(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	plain := gcCycles()

	stop := Start(64<<20, 100)
	defer stop()
	waitGOGC(t, func(p uint64) bool { return p > 300 }) // a test binary's live heap is a few MiB
	if goal := readUint("/gc/heap/goal:bytes"); goal < 48<<20 || goal > 68<<20 {
		t.Fatalf("heap goal %d MiB, want about the 64 MiB floor", goal>>20)
	}
	tuned := gcCycles()
	t.Logf("collections for 256 MiB of garbage: %d at GOGC=100, %d with a 64 MiB floor", plain, tuned)
	// 256 MiB over a 64 MiB target is about 4 cycles (not none: the floor is a floor, not
	// more); the plain GC's target is a few MiB.
	if tuned < 2 || tuned > 8 || tuned*4 > plain {
		t.Fatalf("a 64 MiB floor should collect at most 8 times and a quarter as often as GOGC=100: %d against %d", tuned, plain)
	}

	if again := Start(1<<30, 100); again == nil {
		t.Fatal("nil stop")
	} else {
		again() // a second tuner does nothing, its stop too
	}
	// The first tuner keeps GOGC above the base; its exact value follows the live heap of
	// the last collection, which the churn above moves, so only the base itself means undone.
	if p := readUint("/gc/gogc:percent"); p == 100 {
		t.Fatalf("a second Start's stop undid the first tuner: GOGC %d, the base", p)
	}

	stop()
	if p := readUint("/gc/gogc:percent"); p != 100 {
		t.Fatalf("stop left GOGC at %d, want the base 100", p)
	}
	runtime.GC()
	runtime.GC()
	if p := readUint("/gc/gogc:percent"); p != 100 {
		t.Fatalf("a finalizer tuned after stop: GOGC %d", p)
	}
}

func TestLargeLiveHeapGetsTheBase(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	stop := Start(64<<20, 100)
	defer stop()
	waitGOGC(t, func(p uint64) bool { return p > 300 })

	// 96 MiB live: twice the base's target passes the floor, so the base stands.
	defer func() { held = nil }()
	held = make([][]byte, 96)
	for i := range held {
		held[i] = make([]byte, 1<<20)
	}
	waitGOGC(t, func(p uint64) bool { return p == 100 })
	runtime.GC() // the goal of a collection that found all 96 MiB
	if goal := readUint("/gc/heap/goal:bytes"); goal < 190<<20 || goal > 220<<20 {
		t.Fatalf("heap goal %d MiB, want the base's, twice the 96 MiB live", goal>>20)
	}

	held = nil
	waitGOGC(t, func(p uint64) bool { return p > 300 }) // and raised again when it is freed
}
