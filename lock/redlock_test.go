package lock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/lock"
)

// redlockNodes starts n private redis-servers and returns a client for each and their stops.
func redlockNodes(t *testing.T, n int) ([]redis.UniversalClient, []func()) {
	var clients []redis.UniversalClient
	var stops []func()
	for range n {
		addr, stop := testenv.PrivateRedis(t)
		c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1})
		t.Cleanup(func() { _ = c.Close() })
		clients = append(clients, c)
		stops = append(stops, stop)
	}
	return clients, stops
}

func TestRedlock(t *testing.T) {
	ctx := context.Background()
	nodes, stops := redlockNodes(t, 3)
	rl := lock.NewRedlock(nodes, lock.RedlockOptions{NodeTimeout: 200 * time.Millisecond})
	defer rl.Close()
	other := lock.NewRedlock(nodes, lock.RedlockOptions{NodeTimeout: 200 * time.Millisecond})
	defer other.Close()
	name := uniq("redlock")
	key := "lock:{" + name + "}"
	onNodes := func() (n int) {
		for _, c := range nodes {
			if c.Exists(ctx, key).Val() == 1 {
				n++
			}
		}
		return n
	}

	// All up: held on all three, exclusive, fence increases, released everywhere.
	l1, err := rl.Obtain(ctx, name, lock.LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := onNodes(); n != 3 {
		t.Fatalf("held on %d nodes", n)
	}
	if _, err := other.Obtain(ctx, name, lock.LockOptions{}); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("second Redlock: %v", err)
	}
	// A waiter on another Redlock is woken by the release.
	got := make(chan *lock.Lock, 1)
	go func() {
		l, err := other.Obtain(ctx, name, lock.LockOptions{Wait: 3 * time.Second})
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	time.Sleep(100 * time.Millisecond)
	released := time.Now()
	if err := l1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l2 := <-got
	if l2 == nil {
		return
	}
	t.Logf("Redlock handover after %v", time.Since(released))
	if l2.Fence() <= l1.Fence() {
		t.Fatalf("fence %d after %d", l2.Fence(), l1.Fence())
	}
	if err := l2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if n := onNodes(); n != 0 {
		t.Fatalf("left on %d nodes", n)
	}

	// One node down: a majority still grants it, the watchdog keeps it.
	stops[2]()
	l3, err := rl.Obtain(ctx, name, lock.LockOptions{})
	if err != nil {
		t.Fatalf("with one node of three down: %v", err)
	}
	if l3.Fence() <= l2.Fence() {
		t.Fatalf("fence %d after %d", l3.Fence(), l2.Fence())
	}
	if err := l3.Extend(ctx, time.Minute); err != nil {
		t.Fatalf("Extend with one node down: %v", err)
	}
	if err := l3.Release(ctx); err != nil {
		t.Fatalf("Release with one node down: %v", err)
	}

	// Two down: refused, and nothing left behind on the node that is up.
	stops[1]()
	start := time.Now()
	_, err = rl.Obtain(ctx, name, lock.LockOptions{Wait: 300 * time.Millisecond})
	if !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("with two nodes of three down: %v, want ErrNotObtained", err)
	}
	t.Logf("two down: %v after %v", err, time.Since(start))
	// Given back in the background, promptly.
	deadline := time.Now().Add(time.Second)
	for nodes[0].Exists(ctx, key).Val() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("a failed Redlock left its key on the live node")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Redlocks on separate clients competing for one name: never two holders.
func TestRedlockMutualExclusion(t *testing.T) {
	ctx := context.Background()
	nodes, _ := redlockNodes(t, 3)
	name := uniq("redlock-mx")
	var inside, violations, total atomic.Int64
	var last atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		rl := lock.NewRedlock(nodes, lock.RedlockOptions{NodeTimeout: 500 * time.Millisecond})
		defer rl.Close()
		wg.Go(func() {
			for range 25 {
				l, err := rl.Obtain(ctx, name, lock.LockOptions{Wait: 10 * time.Second})
				if err != nil {
					t.Error(err)
					return
				}
				if inside.Add(1) != 1 {
					violations.Add(1)
				}
				if f := l.Fence(); f <= last.Load() {
					violations.Add(1)
				} else {
					last.Store(f)
				}
				total.Add(1)
				inside.Add(-1)
				if err := l.Release(ctx); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if violations.Load() != 0 || total.Load() != 100 {
		t.Fatalf("%d acquisitions, %d violations", total.Load(), violations.Load())
	}
}
