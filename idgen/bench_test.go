package idgen_test

import (
	"context"
	"testing"

	"github.com/surgekit/surge/idgen"
	"github.com/surgekit/surge/internal/testenv"
)

// The benchmarks run on the real local Redis and report ids/s (per process). Compare plain
// mode with `redis-benchmark -t incr -q`: it is one script call per id.

func benchGenerator(b *testing.B, segment bool) *idgen.Generator {
	rdb := testenv.Redis(b)
	newGen := idgen.New
	if segment {
		newGen = idgen.NewSegment
	}
	g, err := newGen(rdb, newPrefix(b, rdb))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { g.Close() })
	// Warm up: the script is loaded and, in segment mode, the first block is in.
	if _, err := g.Next(context.Background()); err != nil {
		b.Fatal(err)
	}
	return g
}

func reportRate(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ids/s")
}

// BenchmarkNext: plain mode, one goroutine, one round trip per id.
func BenchmarkNext(b *testing.B) {
	g := benchGenerator(b, false)
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		if _, err := g.Next(ctx); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b)
}

// BenchmarkNextParallel: plain mode, 50 goroutines (as redis-benchmark's 50 clients) over the
// client's connection pool.
func BenchmarkNextParallel(b *testing.B) {
	g := benchGenerator(b, false)
	ctx := context.Background()
	b.SetParallelism(25) // × GOMAXPROCS (2 here) = 50
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := g.Next(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportRate(b)
}

// BenchmarkSegmentNext: segment mode, one goroutine.
func BenchmarkSegmentNext(b *testing.B) {
	g := benchGenerator(b, true)
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		if _, err := g.Next(ctx); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b)
}

// BenchmarkSegmentNextParallel: segment mode, GOMAXPROCS goroutines on one generator.
func BenchmarkSegmentNextParallel(b *testing.B) {
	g := benchGenerator(b, true)
	ctx := context.Background()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := g.Next(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportRate(b)
}
