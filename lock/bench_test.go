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

// BenchmarkReplicaCheck: obtain + release of uncontended locks on a private master with one
// replica, without and with the replica check (ReplicaAcks 1: WAIT after the obtain script),
// interleaved in one run so that both see the same machine: off-ns/op, on-ns/op and on/off
// (each op is one obtain + release). serial: one goroutine, the latency; parallel: 16
// goroutines per core.
func BenchmarkReplicaCheck(b *testing.B) {
	master := testenv.StartRedis(b)
	testenv.StartReplica(b, master)
	rdb := redis.NewClient(&redis.Options{Addr: master.Addr, PoolSize: 64})
	defer rdb.Close()
	off, on := lock.New(rdb, lock.Options{}), lock.New(rdb, lock.Options{ReplicaAcks: 1})
	defer off.Close()
	defer on.Close()
	ctx := context.Background()
	// op runs one obtain + release on c and returns its time.
	op := func(b *testing.B, c *lock.Client, name string) time.Duration {
		start := time.Now()
		l, err := c.Obtain(ctx, name, lock.LockOptions{Lease: 10 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	// tally is the time of n ops on each client.
	type tally struct {
		off, on time.Duration
		n       int64
	}
	// add runs one op on each client, the first of them alternating, and adds their times.
	add := func(b *testing.B, t *tally, name string) {
		if t.n%2 == 0 {
			t.off += op(b, off, name)
			t.on += op(b, on, name)
		} else {
			t.on += op(b, on, name)
			t.off += op(b, off, name)
		}
		t.n++
	}
	report := func(b *testing.B, t tally) {
		b.ReportMetric(float64(t.off)/float64(t.n), "off-ns/op")
		b.ReportMetric(float64(t.on)/float64(t.n), "on-ns/op")
		b.ReportMetric(float64(t.on)/float64(t.off), "on/off")
	}
	b.Run("serial", func(b *testing.B) {
		name := uniq("bench-replica")
		var t tally
		for b.Loop() {
			add(b, &t, name)
		}
		report(b, t)
	})
	b.Run("parallel", func(b *testing.B) {
		var mu sync.Mutex
		var all tally
		b.SetParallelism(16)
		b.RunParallel(func(pb *testing.PB) {
			name := uniq("bench-replica")
			var t tally
			for pb.Next() {
				add(b, &t, name)
			}
			mu.Lock()
			all = tally{all.off + t.off, all.on + t.on, all.n + t.n}
			mu.Unlock()
		})
		report(b, all)
	})
}
