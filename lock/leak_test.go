package lock_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/lock"
)

// TestMain fails the package if any goroutine is left once every test has cleaned up:
// watchdogs, pub/sub readers and Redlock node calls all end with their lock or client.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestNoGoroutineLeak checks the same around one workload: watchdogs stop on Release, waits
// leave no goroutine, Close stops the shared pub/sub connection.
func TestNoGoroutineLeak(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	ctx := context.Background()
	rdb := testenv.Redis(t)
	// A lease long enough that a renewal (timeout lease/6 = 100 ms) survives a loaded machine.
	c := lock.New(rdb, lock.Options{WatchdogLease: 600 * time.Millisecond})
	name := uniq("leak")
	held, err := c.Obtain(ctx, name, lock.LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var others []*lock.Lock
	for range 20 {
		l, err := c.Obtain(ctx, uniq("leak"), lock.LockOptions{})
		if err != nil {
			t.Fatal(err)
		}
		others = append(others, l)
	}
	r := c.NewReentrant(uniq("leak"), lock.LockOptions{})
	outer, err := r.TryLock(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := r.TryLock(outer.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Obtain(ctx, name, lock.LockOptions{Wait: 100 * time.Millisecond}); err == nil {
		t.Fatal("obtained a held lock")
	}
	time.Sleep(450 * time.Millisecond) // watchdogs renew (every 200 ms)
	for _, l := range append(others, held, inner, outer) {
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, ignore)
}
