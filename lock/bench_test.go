package lock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/lock"
)

func eachRedisB(b *testing.B, fn func(b *testing.B, rdb redis.UniversalClient)) {
	b.Run("single", func(b *testing.B) { fn(b, testenv.Redis(b)) })
	b.Run("cluster", func(b *testing.B) { fn(b, testenv.Cluster(b)) })
}

// BenchmarkUncontended: acquire + release of distinct locks from 16 goroutines per core (two
// round trips each; explicit lease, so no watchdog).
func BenchmarkUncontended(b *testing.B) {
	eachRedisB(b, func(b *testing.B, rdb redis.UniversalClient) {
		c := lock.New(rdb, lock.Options{})
		defer c.Close()
		ctx := context.Background()
		b.ReportAllocs()
		b.SetParallelism(16)
		b.RunParallel(func(pb *testing.PB) {
			name := uniq("bench")
			for pb.Next() {
				l, err := c.Obtain(ctx, name, lock.LockOptions{Lease: 10 * time.Second})
				if err != nil {
					b.Error(err)
					return
				}
				if err := l.Release(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkContendedHandover: two clients (like processes) with 4 goroutines each take turns
// on one lock; every acquisition after the first is a handover woken by pub/sub.
func BenchmarkContendedHandover(b *testing.B) {
	eachRedisB(b, func(b *testing.B, rdb redis.UniversalClient) {
		ctx := context.Background()
		name := uniq("handover")
		clients := []*lock.Client{newClient(b, rdb, lock.Options{}), newClient(b, rdb, lock.Options{})}
		var wg sync.WaitGroup
		work := make(chan struct{}, b.N)
		for range b.N {
			work <- struct{}{}
		}
		close(work)
		b.ResetTimer()
		for _, c := range clients {
			m := c.NewMutex(name, lock.LockOptions{Lease: 10 * time.Second})
			for range 4 {
				wg.Go(func() {
					for range work {
						l, err := m.Lock(ctx)
						if err != nil {
							b.Error(err)
							return
						}
						_ = l.Release(ctx)
					}
				})
			}
		}
		wg.Wait()
	})
}
