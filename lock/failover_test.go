package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/lock"
)

// Locks through a failover: a private master and its replica; the lagging failover of the
// issue (the replica frozen, its link dropped, the master killed after the lock was taken,
// the replica thawed and promoted); the replica check (Options.ReplicaAcks) that closes it.

// lockKind is one way of taking a lock, the same for every client of a test.
type lockKind struct {
	name   string
	obtain func(ctx context.Context, c *lock.Client, name string, o lock.LockOptions) (*lock.Lock, error)
	// names are the lock names the kind takes for name.
	names func(name string) []string
}

var lockKinds = []lockKind{
	{"Obtain", func(ctx context.Context, c *lock.Client, name string, o lock.LockOptions) (*lock.Lock, error) {
		return c.Obtain(ctx, name, o)
	}, func(name string) []string { return []string{name} }},
	{"ObtainMulti", func(ctx context.Context, c *lock.Client, name string, o lock.LockOptions) (*lock.Lock, error) {
		return c.ObtainMulti(ctx, []string{name + ".a", name + ".b", name + ".c"}, o)
	}, func(name string) []string { return []string{name + ".a", name + ".b", name + ".c"} }},
	{"Reentrant", func(ctx context.Context, c *lock.Client, name string, o lock.LockOptions) (*lock.Lock, error) {
		return c.NewReentrant(name, o).TryLock(ctx, o.Wait)
	}, func(name string) []string { return []string{name} }},
}

// lockClient is a lock Client on addr through a client with go-redis' default options.
func lockClient(t *testing.T, addr string, opts lock.Options) (*redis.Client, *lock.Client) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	c := lock.New(rdb, opts)
	t.Cleanup(func() { _ = c.Close() })
	return rdb, c
}

// eachKind runs fn for each lock kind, as a subtest, on a fresh private master with one
// replica in sync.
func eachKind(t *testing.T, fn func(t *testing.T, kind lockKind, master, replica *testenv.RedisServer)) {
	for _, kind := range lockKinds {
		t.Run(kind.name, func(t *testing.T) {
			master := testenv.StartRedis(t)
			fn(t, kind, master, testenv.StartReplica(t, master))
		})
	}
}

// checked are the options of a client with the replica check.
func checked(m *lock.Metrics) lock.Options {
	return lock.Options{ReplicaAcks: 1, ReplicaTimeout: 200 * time.Millisecond, Metrics: m}
}

// present is how many of the names' lock keys exist on rdb.
func present(t *testing.T, rdb *redis.Client, c *lock.Client, names []string) int {
	t.Helper()
	n := 0
	for _, name := range names {
		if rdb.Exists(context.Background(), c.Key(name)).Val() == 1 {
			n++
		}
	}
	return n
}

// failover kills master (a crash) and promotes replica, the lagging failover's last steps.
func failover(master, replica *testenv.RedisServer) {
	master.Kill()
	replica.Promote()
}

// TestLaggingFailoverWithoutReplicaCheck shows the hazard (issue 34): the replica lags, client
// A takes the lock on the master, the master dies and the replica is promoted; client B then
// takes the same lock on the new master while A's handle still says Valid. Two holders. The
// fencing tokens still order them: B's is greater, so a fenced write refuses A.
func TestLaggingFailoverWithoutReplicaCheck(t *testing.T) {
	eachKind(t, func(t *testing.T, kind lockKind, master, replica *testenv.RedisServer) {
		ctx := context.Background()
		_, a := lockClient(t, master.Addr, lock.Options{})
		name := uniq("lagging")

		testenv.Lag(t, master, replica)
		la, err := kind.obtain(ctx, a, name, lock.LockOptions{Lease: 10 * time.Second})
		if err != nil {
			t.Fatalf("A on the master: %v", err)
		}
		failover(master, replica)
		_, b := lockClient(t, replica.Addr, lock.Options{})
		lb, err := kind.obtain(ctx, b, name, lock.LockOptions{Lease: 10 * time.Second})
		if err != nil {
			t.Fatalf("B on the promoted replica: %v; the hazard did not show", err)
		}
		defer lb.Release(ctx)
		if !la.Valid() {
			t.Fatal("A's handle is no longer Valid: the hazard did not show")
		}
		t.Logf("%s: B holds %v (fence %d) while A's handle is Valid (fence %d)", kind.name, lb.Names(), lb.Fence(), la.Fence())
		if lb.Fence() <= la.Fence() {
			t.Errorf("B's fence %d is not greater than A's %d: fencing would not refuse A", lb.Fence(), la.Fence())
		}
	})
}

// TestLaggingFailoverWithReplicaCheck is the same failover with the replica check: no replica
// acknowledges A's acquisition, so A does not get the lock (ErrNotReplicated, counted), its
// write is undone on the master, and B alone holds the lock after the failover.
func TestLaggingFailoverWithReplicaCheck(t *testing.T) {
	eachKind(t, func(t *testing.T, kind lockKind, master, replica *testenv.RedisServer) {
		ctx := context.Background()
		m := lock.NewMetrics(nil)
		rdbA, a := lockClient(t, master.Addr, checked(m))
		name := uniq("lagging-checked")
		names := kind.names(name)

		testenv.Lag(t, master, replica)
		la, err := kind.obtain(ctx, a, name, lock.LockOptions{Lease: 10 * time.Second})
		if !errors.Is(err, lock.ErrNotReplicated) || la != nil {
			t.Fatalf("A with no replica in sync: %v, %v; want ErrNotReplicated", la, err)
		}
		t.Logf("A: %v", err)
		if n := testutil.ToFloat64(m.NotReplicated); n != 1 {
			t.Errorf("NotReplicated = %v, want 1", n)
		}
		// The undo runs in the background: A's keys leave the master shortly.
		for deadline := time.Now().Add(2 * time.Second); present(t, rdbA, a, names) > 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("A's unacknowledged acquisition is still on the master: %d of %v", present(t, rdbA, a, names), names)
			}
		}
		failover(master, replica)
		_, b := lockClient(t, replica.Addr, lock.Options{})
		lb, err := kind.obtain(ctx, b, name, lock.LockOptions{Lease: 10 * time.Second})
		if err != nil {
			t.Fatalf("B on the promoted replica: %v", err)
		}
		if err := lb.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestFailoverToSyncedReplicaWithReplicaCheck: with the replica in sync, the checked
// acquisition succeeds and the replica has the lock the moment Obtain returns; after the
// master dies and the replica is promoted, B cannot take the lock while A holds it.
func TestFailoverToSyncedReplicaWithReplicaCheck(t *testing.T) {
	eachKind(t, func(t *testing.T, kind lockKind, master, replica *testenv.RedisServer) {
		ctx := context.Background()
		_, a := lockClient(t, master.Addr, checked(nil))
		rdbR := redis.NewClient(&redis.Options{Addr: replica.Addr})
		defer rdbR.Close()
		name := uniq("synced")

		la, err := kind.obtain(ctx, a, name, lock.LockOptions{Lease: 10 * time.Second})
		if err != nil {
			t.Fatalf("A with the replica in sync: %v", err)
		}
		if n := present(t, rdbR, a, kind.names(name)); n != len(kind.names(name)) {
			t.Fatalf("the replica has %d of A's %d keys when Obtain returns", n, len(kind.names(name)))
		}
		if err := la.Extend(ctx, 10*time.Second); err != nil {
			t.Fatalf("Extend with the replica in sync: %v", err)
		}
		failover(master, replica)
		_, b := lockClient(t, replica.Addr, lock.Options{})
		if lb, err := kind.obtain(ctx, b, name, lock.LockOptions{Wait: 100 * time.Millisecond}); !errors.Is(err, lock.ErrNotObtained) {
			t.Fatalf("B on the promoted replica while A holds: %v, %v; want ErrNotObtained", lb, err)
		}
		if !la.Valid() {
			t.Fatal("A's handle is not Valid")
		}
	})
}

// TestReplicaCheckRenewal: a renewal that no replica acknowledges loses the lock, whether
// Extend or the watchdog made it: the replicas know an older lease than the handle would.
func TestReplicaCheckRenewal(t *testing.T) {
	eachKind(t, func(t *testing.T, kind lockKind, master, replica *testenv.RedisServer) {
		ctx := context.Background()
		m := lock.NewMetrics(nil)
		opts := checked(m)
		// Renewed every second, each renewal given 500 ms: room for a 200 ms WAIT, which
		// Redis may answer up to 100 ms late (it checks WAIT timeouts on its cron).
		opts.WatchdogLease = 3 * time.Second
		_, a := lockClient(t, master.Addr, opts)
		manual, err := kind.obtain(ctx, a, uniq("renew-manual"), lock.LockOptions{Lease: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		watched, err := kind.obtain(ctx, a, uniq("renew-watchdog"), lock.LockOptions{})
		if err != nil {
			t.Fatal(err)
		}
		testenv.Lag(t, master, replica)

		err = manual.Extend(ctx, 10*time.Second)
		if !errors.Is(err, lock.ErrNotReplicated) || !errors.Is(err, lock.ErrLockLost) {
			t.Fatalf("Extend with no replica in sync: %v; want ErrLockLost and ErrNotReplicated", err)
		}
		if manual.Valid() {
			t.Error("Valid after an unacknowledged renewal")
		}
		waitDone(t, manual, time.Second) // a reentrant handle's Context follows its lease's
		if cause := context.Cause(manual.Context()); !errors.Is(cause, lock.ErrNotReplicated) {
			t.Errorf("Context cause %v, want ErrNotReplicated", cause)
		}
		waitDone(t, watched, 3*time.Second)
		if cause := context.Cause(watched.Context()); !errors.Is(cause, lock.ErrNotReplicated) || !errors.Is(cause, lock.ErrLockLost) {
			t.Errorf("watchdog: Context cause %v, want ErrLockLost and ErrNotReplicated", cause)
		}
		if watched.Valid() {
			t.Error("watchdog: Valid after an unacknowledged renewal")
		}
		if lost, nr := testutil.ToFloat64(m.Lost), testutil.ToFloat64(m.NotReplicated); lost != 2 || nr != 2 {
			t.Errorf("Lost = %v, NotReplicated = %v; want 2 and 2", lost, nr)
		}
	})
}

// TestReplicaCheckHonoursDeadline: WAIT blocks in Redis, so its timeout is cut to the caller's
// deadline: with a lagging replica and a 10 s ReplicaTimeout, an Obtain under a 300 ms deadline
// returns at the deadline and leaves no client blocked on the master. On a frozen master, the
// checked calls return at their deadline too.
func TestReplicaCheckHonoursDeadline(t *testing.T) {
	master := testenv.StartRedis(t)
	replica := testenv.StartReplica(t, master)
	_, c := lockClient(t, master.Addr, lock.Options{ReplicaAcks: 1, ReplicaTimeout: 10 * time.Second})
	ctx := context.Background()
	held, err := c.Obtain(ctx, uniq("deadline-held"), lock.LockOptions{Lease: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Lag(t, master, replica)
	for _, kind := range lockKinds {
		tctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		start := time.Now()
		_, err := kind.obtain(tctx, c, uniq("deadline"), lock.LockOptions{})
		took := time.Since(start)
		cancel()
		t.Logf("%s with a lagging replica under a 300 ms deadline: %v after %v", kind.name, err, took.Round(time.Millisecond))
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, lock.ErrNotReplicated) {
			t.Errorf("%s: %v, want DeadlineExceeded or ErrNotReplicated", kind.name, err)
		}
		if took > 300*time.Millisecond+callBudget-callDeadline {
			t.Errorf("%s returned after %v", kind.name, took)
		}
		for deadline := time.Now().Add(time.Second); master.BlockedClients() > 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: a WAIT is still blocked on the master 1 s after the deadline", kind.name)
			}
		}
	}

	master.Freeze()
	defer master.Thaw()
	for _, kind := range lockKinds {
		took, err := timed(func(ctx context.Context) error {
			_, err := kind.obtain(ctx, c, uniq("frozen"), lock.LockOptions{})
			return err
		})
		if err == nil || took > callBudget {
			t.Errorf("%s on a frozen master with the replica check: %v after %v", kind.name, err, took)
		}
	}
	took, err := timed(func(ctx context.Context) error { return held.Extend(ctx, 10*time.Second) })
	if err == nil || took > callBudget {
		t.Errorf("Extend on a frozen master with the replica check: %v after %v", err, took)
	}
}

// TestReplicaCheckClient: the check needs a client whose connections it can address.
func TestReplicaCheckClient(t *testing.T) {
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": testenv.RedisAddr()}})
	defer ring.Close()
	defer func() {
		if recover() == nil {
			t.Error("New with ReplicaAcks on a Ring did not panic")
		}
	}()
	lock.New(ring, lock.Options{ReplicaAcks: 1})
}

// TestReplicaCheckClusterRouting: on a Cluster, WAIT must follow each script on the
// connection of the master that ran it (go-redis would route a keyless WAIT to any node).
// With master 0's replica lagging and master 1's in sync, every lock on master 0's slots is
// refused and every lock on master 1's is granted, alone or in a multi-lock; a multi-lock over
// both masters waits on both, and is refused as a whole.
func TestReplicaCheckClusterRouting(t *testing.T) {
	pc := testenv.StartCluster(t, 2, 1)
	rdb := pc.Client(t, nil)
	c := lock.New(rdb, checked(nil))
	defer c.Close()
	ctx := context.Background()

	// Names by the master that owns them (slots 0-8191: master 0).
	var on [2][]string
	for len(on[0]) < 4 || len(on[1]) < 4 {
		name := uniq("routed")
		slot, err := rdb.ClusterKeySlot(ctx, c.Key(name)).Result()
		if err != nil {
			t.Fatal(err)
		}
		if i := slot / 8192; len(on[i]) < 4 {
			on[i] = append(on[i], name)
		}
	}
	both := []string{on[0][0], on[1][0]}
	l, err := c.ObtainMulti(ctx, both, lock.LockOptions{Lease: 10 * time.Second})
	if err != nil {
		t.Fatalf("multi-lock over both masters, replicas in sync: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}

	testenv.Lag(t, pc.Masters[0], pc.Replicas[0][0])
	for i, names := range on {
		for _, name := range names {
			l, err := c.Obtain(ctx, name, lock.LockOptions{Lease: 10 * time.Second})
			switch {
			case i == 0 && !errors.Is(err, lock.ErrNotReplicated):
				t.Errorf("Obtain on the lagging master 0: %v, want ErrNotReplicated", err)
			case i == 1 && err != nil:
				t.Errorf("Obtain on master 1, replica in sync: %v", err)
			}
			_ = l.Release(ctx)
		}
	}
	if l, err := c.ObtainMulti(ctx, on[1], lock.LockOptions{Lease: 10 * time.Second}); err != nil {
		t.Errorf("multi-lock on master 1: %v", err)
	} else {
		_ = l.Release(ctx)
	}
	if _, err := c.ObtainMulti(ctx, both, lock.LockOptions{Lease: 10 * time.Second}); !errors.Is(err, lock.ErrNotReplicated) {
		t.Errorf("multi-lock over both masters, master 0 lagging: %v, want ErrNotReplicated", err)
	}
	// Nothing of the refused multi-lock stays held.
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		n := 0
		for _, name := range both {
			n += int(rdb.Exists(ctx, c.Key(name)).Val())
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d names of the refused multi-lock still held", n)
		}
	}
}

// TestRedlockNodeFailover: a Redlock node whose master fails over to a lagging replica
// forgets its grant, like a node restarted without its data. When the first holder had a
// bare majority (here node 2 was down), the second holder then finds a majority free: two
// holders. With the replica check on each node (RedlockOptions.ReplicaAcks), the lagging
// node's grant does not count, so the first holder never had its majority; and a node whose
// replica acknowledged the grant keeps it through its failover.
func TestRedlockNodeFailover(t *testing.T) {
	cases := []struct {
		name    string
		acks    int
		lagging bool
		// second: whether the second Redlock obtains; first: whether the first did.
		first, second bool
	}{
		{"without check", 0, true, true, true},
		{"with check, lagging replica", 1, true, false, true},
		{"with check, replica in sync", 1, false, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			m0 := testenv.StartRedis(t)
			r0 := testenv.StartReplica(t, m0)
			m1 := testenv.StartRedis(t)
			testenv.StartReplica(t, m1)
			m2 := testenv.StartRedis(t)
			clients := func(addrs ...string) []redis.UniversalClient {
				var cs []redis.UniversalClient
				for _, a := range addrs {
					c := redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1, DialerRetries: 1})
					t.Cleanup(func() { _ = c.Close() })
					cs = append(cs, c)
				}
				return cs
			}
			m := lock.NewMetrics(nil)
			first := lock.NewRedlock(clients(m0.Addr, m1.Addr, m2.Addr),
				// A fresh node has not seen the script: its first call may wait twice (see
				// runAcked), so the node timeout leaves room for two WAITs.
				lock.RedlockOptions{ReplicaAcks: tc.acks, ReplicaTimeout: 200 * time.Millisecond, NodeTimeout: time.Second, Metrics: m})
			defer first.Close()
			name := uniq("redlock-failover")

			m2.Kill() // down while the first holder takes the lock: a bare majority
			if tc.lagging {
				testenv.Lag(t, m0, r0)
			}
			l1, err := first.Obtain(ctx, name, lock.LockOptions{Lease: 10 * time.Second})
			if tc.first != (err == nil) {
				t.Fatalf("first Redlock: %v, want obtained %v", err, tc.first)
			}
			t.Logf("first Redlock: %v", err)
			if n, want := testutil.ToFloat64(m.NotReplicated), map[bool]float64{true: 1}[tc.acks > 0 && tc.lagging]; n != want {
				t.Errorf("NotReplicated = %v, want %v (node 0's grant)", n, want)
			}
			failover(m0, r0)
			m2.Start() // back, empty
			second := lock.NewRedlock(clients(r0.Addr, m1.Addr, m2.Addr), lock.RedlockOptions{})
			defer second.Close()
			l2, err := second.Obtain(ctx, name, lock.LockOptions{Lease: 10 * time.Second})
			t.Logf("second Redlock: %v", err)
			if tc.second != (err == nil) {
				t.Fatalf("second Redlock: %v, want obtained %v", err, tc.second)
			}
			if l1 != nil && l2 != nil {
				if !l1.Valid() {
					t.Fatal("the first handle is no longer Valid: the hazard did not show")
				}
				t.Logf("two holders: fences %d (first) and %d (second)", l1.Fence(), l2.Fence())
			}
			if l2 != nil {
				_ = l2.Release(ctx)
			}
		})
	}
}
