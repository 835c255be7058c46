package seckill_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/seckill"
)

// BenchmarkGrabReplicaAcks is the cost of replica acknowledgements: admission with the option
// off and on, on one private master with a replica that follows (the same pair for both),
// with 64 goroutines per CPU as BenchmarkGrab ("parallel") and one grab at a time ("serial":
// a grab's latency at low load). No consumer runs. Compare the pairs of one run, e.g.
// go test -run '^$' -bench GrabReplicaAcks -count 5 ./seckill/ (the counts interleave them).
func BenchmarkGrabReplicaAcks(b *testing.B) {
	master := testenv.StartRedis(b)
	replicaOf(b, master)
	e, _ := newEnvOn(b, master.Addr)
	var next atomic.Int64 // distinct users across the sub-benchmarks
	for _, load := range []string{"parallel", "serial"} {
		for _, acks := range []int{0, 1} {
			b.Run(fmt.Sprintf("%s/acks=%d", load, acks), func(b *testing.B) {
				s := e.service(seckill.Options{ReplicaAcks: acks})
				v := e.onSale(s, 100_000_000)
				grab := func() {
					if _, err := s.Grab(context.Background(), int(next.Add(1)), v); err != nil {
						b.Error(err)
					}
				}
				b.ResetTimer()
				if load == "serial" {
					for range b.N {
						grab()
					}
					return
				}
				b.SetParallelism(64)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						grab()
					}
				})
			})
		}
	}
}
