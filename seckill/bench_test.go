package seckill_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/seckill"
)

// BenchmarkGrab measures admission through the service (all distinct users, stock never runs
// out) with 64 goroutines per CPU; no consumer runs. Compare with the same script under
// redis-benchmark -c 50 (see docs/benchmarks.md, "Admission").
func BenchmarkGrab(b *testing.B) {
	for _, c := range []struct {
		name      string
		pipelines int
	}{{"pipelines=1", 1}, {"pipelines=2", 2}, {"pipelines=4", 4}, {"one-call-per-grab", -1}} {
		b.Run(c.name, func(b *testing.B) {
			e := newEnv(b, testenv.Redis(b))
			s := e.service(seckill.Options{Pipelines: c.pipelines})
			v := e.onSale(s, 100_000_000)
			var next atomic.Int64
			b.SetParallelism(64)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := s.Grab(context.Background(), int(next.Add(1)), v); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkGrabOneAtATime is the latency of a grab at low load (one caller): batching must
// cost next to nothing against one call per grab.
func BenchmarkGrabOneAtATime(b *testing.B) {
	for _, c := range []struct {
		name      string
		pipelines int
	}{{"batched", 2}, {"one-call-per-grab", -1}} {
		b.Run(c.name, func(b *testing.B) {
			e := newEnv(b, testenv.Redis(b))
			s := e.service(seckill.Options{Pipelines: c.pipelines})
			v := e.onSale(s, 100_000_000)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := s.Grab(context.Background(), i+1, v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGrabWhileConsuming: admission as above while the consumer writes the orders into
// MySQL on the same machine, as during a real sale.
func BenchmarkGrabWhileConsuming(b *testing.B) {
	e := newEnv(b, testenv.Redis(b))
	users := e.users(b.N)
	s := e.service(seckill.Options{})
	e.consume(s)
	v := e.onSale(s, b.N)
	var next atomic.Int64
	b.SetParallelism(100)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Grab(context.Background(), users[next.Add(1)-1], v); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	e.drained(v, time.Minute)
}
