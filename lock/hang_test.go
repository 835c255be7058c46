package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/lock"
)

// callBudget is how long a call with a 200 ms deadline may take on a frozen Redis: the
// deadline plus scheduling slack on a loaded 2-core machine.
const (
	callDeadline = 200 * time.Millisecond
	callBudget   = callDeadline + 250*time.Millisecond
)

// timed runs call under a callDeadline context and reports how long it took.
func timed(call func(ctx context.Context) error) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callDeadline)
	defer cancel()
	start := time.Now()
	err := call(ctx)
	return time.Since(start), err
}

// TestFrozenRedisHonoursDeadlines (issue 11, item 4): with Redis hung (SIGSTOP) and a client
// with go-redis' default options, every entry point returns at its context's deadline, and
// what an abandoned call did once Redis answers again is undone.
func TestFrozenRedisHonoursDeadlines(t *testing.T) {
	srv, rdb, c := privateLocks(t, lock.Options{})
	ctx := context.Background()
	held, err := c.Obtain(ctx, uniq("held"), lock.LockOptions{Lease: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	reentrantName := uniq("re")
	reentrant := c.NewReentrant(reentrantName, lock.LockOptions{Lease: 10 * time.Second})
	abandoned := []string{uniq("abandoned"), uniq("abandoned-multi"), uniq("abandoned-wait")}
	srv.Freeze()
	defer srv.Thaw()

	calls := []struct {
		what string
		call func(ctx context.Context) error
	}{
		{"Obtain", func(ctx context.Context) error {
			_, err := c.Obtain(ctx, abandoned[0], lock.LockOptions{})
			return err
		}},
		{"ObtainMulti", func(ctx context.Context) error {
			_, err := c.ObtainMulti(ctx, abandoned[1:2], lock.LockOptions{})
			return err
		}},
		{"Reentrant.TryLock", func(ctx context.Context) error {
			_, err := reentrant.TryLock(ctx, 0)
			return err
		}},
		{"Reentrant.HoldCount", func(ctx context.Context) error {
			_, err := reentrant.HoldCount(lock.WithOwner(ctx, "x"))
			return err
		}},
		{"Extend", func(ctx context.Context) error { return held.Extend(ctx, 10*time.Second) }},
		{"Release", func(ctx context.Context) error { return held.Release(ctx) }},
	}
	for _, tc := range calls {
		took, err := timed(tc.call)
		t.Logf("%s on a frozen Redis: %v after %v", tc.what, err, took.Round(time.Millisecond))
		if err == nil {
			t.Errorf("%s succeeded on a frozen Redis", tc.what)
		}
		if took > callBudget {
			t.Errorf("%s with a %v deadline returned after %v", tc.what, callDeadline, took)
		}
	}
	// A wait bounds the calls of an Obtain whose context has no deadline.
	start := time.Now()
	_, err = c.Obtain(ctx, abandoned[2], lock.LockOptions{Wait: callDeadline})
	if took := time.Since(start); !errors.Is(err, lock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) || took > callBudget {
		t.Errorf("Obtain with Wait %v on a frozen Redis: %v after %v", callDeadline, err, took)
	}

	// Redis answers again: the abandoned acquisitions run now and must be given back at once,
	// not left to their 30 s lease.
	srv.Thaw()
	names := append([]string{reentrantName}, abandoned...)
	deadline := time.Now().Add(2 * time.Second)
	for {
		var left []string
		for _, n := range names {
			if rdb.Exists(ctx, c.Key(n)).Val() != 0 {
				left = append(left, n)
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("abandoned acquisitions still held 2 s after Redis came back: %v", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := c.Obtain(ctx, abandoned[0], lock.LockOptions{}); err != nil {
		t.Fatalf("Obtain after the abandoned one was undone: %v", err)
	}
}

// TestFrozenRedisWatchdog: the watchdog gives each renewal a timeout well under the lease, so a
// hung Redis cancels the lock's Context within about a renewal period and a half, not at the
// end of the lease.
func TestFrozenRedisWatchdog(t *testing.T) {
	const lease = 1500 * time.Millisecond
	const period = lease / 3
	srv, _, c := privateLocks(t, lock.Options{WatchdogLease: lease})
	l, err := c.Obtain(context.Background(), uniq("watchdog"), lock.LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(period + period/5) // just after the first renewal
	srv.Freeze()
	defer srv.Thaw()
	frozen := time.Now()
	select {
	case <-l.Done():
	case <-time.After(3 * lease):
		t.Fatal("Context not cancelled with Redis frozen")
	}
	noticed := time.Since(frozen)
	t.Logf("frozen Redis noticed after %v (renewal period %v); cause: %v", noticed.Round(time.Millisecond), period, context.Cause(l.Context()))
	if noticed > period+period/2+200*time.Millisecond {
		t.Fatalf("noticed after %v, want within a renewal period and its timeout (%v)", noticed, period+period/2)
	}
	if !errors.Is(context.Cause(l.Context()), lock.ErrLockLost) {
		t.Fatalf("cause %v", context.Cause(l.Context()))
	}
	took, err := timed(l.Release)
	if took > callBudget {
		t.Fatalf("Release of the lost lock on a frozen Redis took %v (%v)", took, err)
	}
}

// redlockServers starts n private redis-servers with default-option clients.
func redlockServers(t *testing.T, n int) ([]*testenv.RedisServer, []redis.UniversalClient) {
	t.Helper()
	var srvs []*testenv.RedisServer
	var clients []redis.UniversalClient
	for range n {
		srv := testenv.StartRedis(t)
		c := redis.NewClient(&redis.Options{Addr: srv.Addr})
		t.Cleanup(func() { _ = c.Close() })
		srvs, clients = append(srvs, srv), append(clients, c)
	}
	return srvs, clients
}

// TestRedlockFrozenNode: one frozen node of three costs each call its node timeout, so a
// majority still grants, extends and releases the lock well within a 3 s lease.
func TestRedlockFrozenNode(t *testing.T) {
	ctx := context.Background()
	srvs, nodes := redlockServers(t, 3)
	rl := lock.NewRedlock(nodes, lock.RedlockOptions{})
	defer rl.Close()
	for _, n := range nodes {
		_ = n.Ping(ctx).Err() // connect before the freeze
	}
	srvs[2].Freeze()
	defer srvs[2].Thaw()
	const lease = 3 * time.Second
	start := time.Now()
	l, err := rl.Obtain(ctx, uniq("redlock-frozen"), lock.LockOptions{Lease: lease})
	took := time.Since(start)
	t.Logf("Redlock with one frozen node: %v after %v", err, took.Round(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if took > lease/4 {
		t.Errorf("obtained after %v, want about the node timeout (%v)", took, lease/20)
	}
	start = time.Now()
	if err := l.Extend(ctx, lease); err != nil {
		t.Errorf("Extend with one frozen node: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Errorf("Release with one frozen node: %v", err)
	}
	if took := time.Since(start); took > lease/4 {
		t.Errorf("Extend and Release took %v", took)
	}
}
