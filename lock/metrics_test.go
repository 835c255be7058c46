package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/lock"
)

// Every lost lock is counted once, in surge_lock_lost_total, whichever way it was lost: its
// lease ran out without renewal, the watchdog found it gone, or Release found it gone; a lock
// given back in time is not counted.
func TestLostLocksCounted(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		reg := prometheus.NewRegistry()
		c := newClient(t, rdb, lock.Options{WatchdogLease: 300 * time.Millisecond, Metrics: lock.NewMetrics(reg)})
		if again := lock.NewMetrics(reg); again == nil {
			t.Fatal("NewMetrics on a registry that has them: nil")
		}
		lost := func() float64 {
			fams, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range fams {
				if f.GetName() == "surge_lock_lost_total" {
					return f.GetMetric()[0].GetCounter().GetValue()
				}
			}
			t.Fatal("surge_lock_lost_total not registered")
			return 0
		}
		obtain := func(o lock.LockOptions) (*lock.Lock, string) {
			name := uniq("lost")
			t.Cleanup(func() { rdb.Del(context.Background(), c.Key(name), c.Key(name)+":fence") })
			l, err := c.Obtain(ctx, name, o)
			if err != nil {
				t.Fatal(err)
			}
			return l, name
		}
		waitLost := func(l *lock.Lock) {
			select {
			case <-l.Context().Done():
			case <-time.After(5 * time.Second):
				t.Fatal("the lock's Context did not end")
			}
			if !errors.Is(context.Cause(l.Context()), lock.ErrLockLost) {
				t.Fatalf("cause %v, want ErrLockLost", context.Cause(l.Context()))
			}
		}

		l, _ := obtain(lock.LockOptions{})
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if n := lost(); n != 0 {
			t.Fatalf("a released lock counted as lost: %v", n)
		}

		l, name := obtain(lock.LockOptions{Lease: 100 * time.Millisecond}) // never extended
		waitLost(l)
		if n := lost(); n != 1 {
			t.Fatalf("lease ran out: lost %v, want 1", n)
		}
		// The local lease ends first (it counts from before the request was sent); wait for
		// Redis to expire the key too.
		for deadline := time.Now().Add(5 * time.Second); rdb.Exists(ctx, c.Key(name)).Val() == 1; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the lock's key did not expire")
			}
		}
		if err := l.Release(ctx); !errors.Is(err, lock.ErrLockLost) {
			t.Fatalf("Release of a lost lock: %v", err)
		}
		if n := lost(); n != 1 {
			t.Fatalf("Release of a lock already counted as lost counted it again: %v", n)
		}

		l, name = obtain(lock.LockOptions{}) // under the watchdog
		rdb.Del(ctx, c.Key(name))
		waitLost(l)
		if n := lost(); n != 2 {
			t.Fatalf("watchdog found it gone: lost %v, want 2", n)
		}

		l, name = obtain(lock.LockOptions{Lease: time.Minute})
		rdb.Del(ctx, c.Key(name))
		if err := l.Release(ctx); !errors.Is(err, lock.ErrLockLost) {
			t.Fatalf("Release of a deleted lock: %v", err)
		}
		if n := lost(); n != 3 {
			t.Fatalf("Release found it gone: lost %v, want 3", n)
		}
	})
}
