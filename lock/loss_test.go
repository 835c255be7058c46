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

// privateLocks is a lock Client on a private redis-server that the test may flush, restart,
// roll back or freeze, through a client with go-redis' default options (it does not honour
// context deadlines by itself).
func privateLocks(t *testing.T, opts lock.Options) (*testenv.RedisServer, redis.UniversalClient, *lock.Client) {
	t.Helper()
	srv := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	c := lock.New(rdb, opts)
	t.Cleanup(func() { _ = c.Close() })
	return srv, rdb, c
}

// obtainFunc is Client.Obtain or Redlock.Obtain.
type obtainFunc func(ctx context.Context, name string, o lock.LockOptions) (*lock.Lock, error)

// takeFence obtains and releases name, returning the fence it was given.
func takeFence(t *testing.T, obtain obtainFunc, name string) int64 {
	t.Helper()
	ctx := context.Background()
	l, err := obtain(ctx, name, lock.LockOptions{Lease: 5 * time.Second, Wait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	return l.Fence()
}

// TestFenceMonotonicAcrossRedisLoss: fences keep increasing when Redis loses the counter
// (FLUSHALL, a restart without persistence) or comes back with an older one (a failover to a
// lagging replica, an AOF that lost its tail: Restore of an older snapshot).
func TestFenceMonotonicAcrossRedisLoss(t *testing.T) {
	ctx := context.Background()
	losses := map[string]func(srv *testenv.RedisServer, rdb redis.UniversalClient){
		"flushall": func(_ *testenv.RedisServer, rdb redis.UniversalClient) {
			if err := rdb.FlushAll(ctx).Err(); err != nil {
				t.Fatal(err)
			}
		},
		"restart": func(srv *testenv.RedisServer, _ redis.UniversalClient) { srv.Kill(); srv.Start() },
		"older-snapshot": func(srv *testenv.RedisServer, _ redis.UniversalClient) {
			srv.Restore("older")
		},
	}
	for kind, lose := range losses {
		t.Run(kind, func(t *testing.T) {
			srv, rdb, c := privateLocks(t, lock.Options{})
			name := uniq("loss")
			var issued []int64
			for range 3 {
				issued = append(issued, takeFence(t, c.Obtain, name))
			}
			srv.Snapshot("older")
			for range 3 {
				issued = append(issued, takeFence(t, c.Obtain, name))
			}
			lose(srv, rdb)
			after := takeFence(t, c.Obtain, name)
			for _, f := range issued {
				if after <= f {
					t.Fatalf("fence %d after the loss, not above the earlier %d (all earlier: %v)", after, f, issued)
				}
			}
			if after >= 1<<53 {
				t.Fatalf("fence %d is not below 2^53", after)
			}
		})
	}
}

// TestFenceGuardsAcrossRestart is issue 11's scenario 3 against MariaDB: holder A is given a
// fence; Redis restarts empty; B obtains and writes (several times); A, whose lease has not
// run out yet, then writes: the guarded write must refuse A, not overwrite B.
func TestFenceGuardsAcrossRestart(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	srv, _, c := privateLocks(t, lock.Options{})
	name := uniq("ab")
	for range 4 {
		takeFence(t, c.Obtain, name)
	}
	a, err := c.Obtain(ctx, name, lock.LockOptions{Lease: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	srv.Start()
	b, err := c.Obtain(ctx, name, lock.LockOptions{Lease: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if b.Fence() <= a.Fence() {
		t.Errorf("B's fence %d after the restart is not above A's %d", b.Fence(), a.Fence())
	}
	for n := int64(10); n <= 12; n++ { // one holder writes several times
		if _, err := lock.GuardedExec(ctx, db, guardedIncrement, b.Fence(), n, lock.FenceArg, lock.FenceArg); err != nil {
			t.Fatalf("B's write %d: %v", n, err)
		}
	}
	if a.Context().Err() != nil {
		t.Logf("A's Context already ended: %v", context.Cause(a.Context()))
	}
	if !a.Valid() {
		t.Fatal("A's lease ran out: the fence is not what refuses its write")
	}
	if _, err := a.GuardedExec(ctx, db, guardedIncrement, 99, lock.FenceArg, lock.FenceArg); !errors.Is(err, lock.ErrStaleFence) {
		t.Errorf("A's late write after B's: %v, want ErrStaleFence", err)
	}
	var n int64
	if err := db.QueryRow("SELECT n FROM counter WHERE id = 1").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 12 {
		t.Fatalf("counter %d, want B's last write 12", n)
	}
	_ = b.Release(ctx)
	_ = a.Release(ctx)
}

// fenceCounterMargin is how long the fence counter outlives the lease of the last acquisition
// (lock/doc.go, "Fencing").
const fenceCounterMargin = time.Minute

// scanKeys lists the keys matching pattern on every master.
func scanKeys(t *testing.T, rdb redis.UniversalClient, pattern string) []string {
	t.Helper()
	ctx := context.Background()
	var keys []string
	scan := func(ctx context.Context, node *redis.Client) error {
		it := node.Scan(ctx, 0, pattern, 1000).Iterator()
		for it.Next(ctx) {
			keys = append(keys, it.Val())
		}
		return it.Err()
	}
	var err error
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, scan)
	} else {
		err = scan(ctx, rdb.(*redis.Client))
	}
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestNoKeyOutlivesItsUse (issue 11, 7b): once a lock is released, every key of its name
// expires, none later than the lease plus the fence counter's margin. The sync strategy
// takes one such lock per buyer.
func TestNoKeyOutlivesItsUse(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		const lease = 10 * time.Second
		c := newClient(t, rdb, lock.Options{})
		simple, reentrant := uniq("ttl-user"), uniq("ttl-reentrant")
		l, err := c.Obtain(ctx, simple, lock.LockOptions{Lease: lease})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		r, err := c.NewReentrant(reentrant, lock.LockOptions{Lease: lease}).TryLock(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Release(ctx); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{simple, reentrant} {
			keys := scanKeys(t, rdb, c.Key(name)+"*")
			if len(keys) == 0 {
				t.Fatalf("no key of %s found: the fence counter should still be there", name)
			}
			for _, k := range keys {
				ttl := rdb.PTTL(ctx, k).Val()
				if ttl <= 0 || ttl > lease+fenceCounterMargin {
					t.Errorf("%s: PTTL %v, want a TTL of at most %v", k, ttl, lease+fenceCounterMargin)
				}
				rdb.Del(ctx, k)
			}
		}
	})
}

// TestRedlockFenceAcrossRestarts: Redlock's fence (the greatest node token, written back to
// the granting majority) keeps increasing when every node restarts empty.
func TestRedlockFenceAcrossRestarts(t *testing.T) {
	srvs, nodes := redlockServers(t, 3)
	rl := lock.NewRedlock(nodes, lock.RedlockOptions{NodeTimeout: 200 * time.Millisecond})
	defer rl.Close()
	name := uniq("redlock-loss")
	var last int64
	for range 3 {
		last = max(last, takeFence(t, rl.Obtain, name))
	}
	for _, srv := range srvs {
		srv.Kill()
		srv.Start()
	}
	if f := takeFence(t, rl.Obtain, name); f <= last {
		t.Fatalf("Redlock fence %d after every node restarted, not above %d", f, last)
	}
}
