package lock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/lock"
)

func openDB(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", testenv.MySQL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	db.SetMaxOpenConns(32)
	db.SetMaxIdleConns(32)
	if _, err := db.Exec("CREATE TABLE counter (id INT PRIMARY KEY, n BIGINT NOT NULL, fence BIGINT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO counter VALUES (1, 0, 0)"); err != nil {
		t.Fatal(err)
	}
	return db
}

// The protected write: read the counter, write it back plus one, guarded by the fence (the
// documented form: a holder may write several times). A lost update (two holders at once)
// shows in the final count, a stale fence as ErrStaleFence.
const guardedIncrement = "UPDATE counter SET n = ?, fence = ? WHERE id = 1 AND fence <= ?"

// TestMutualExclusion runs independent clients (own Redis connections, like processes), each
// with goroutines taking the same lock, half as simple locks and half as reentrant locks of
// distinct owners (they exclude each other), and doing a non-atomic read-modify-write in
// MariaDB guarded by the fencing token. LOCK_LONG=1 does 50,000 acquisitions per Redis
// (100,000 in all); the default 600 per Redis keeps the package fast under -race.
func TestMutualExclusion(t *testing.T) {
	perRedis := 600
	if os.Getenv("LOCK_LONG") == "1" {
		perRedis = 50_000
	}
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		const clients, goroutines = 4, 4
		ctx := context.Background()
		db := openDB(t)
		name := uniq("mutex")
		var inside, violations, stale, done atomic.Int64
		var lastFence atomic.Int64
		start := time.Now()
		var wg sync.WaitGroup
		for ci := range clients {
			c := newClient(t, rdb, lock.Options{})
			m, r := c.NewMutex(name, lock.LockOptions{}), c.NewReentrant(name, lock.LockOptions{})
			for gi := range goroutines {
				owner := lock.WithOwner(ctx, fmt.Sprintf("c%d-g%d", ci, gi))
				wg.Go(func() {
					for done.Add(1) <= int64(perRedis) {
						var l *lock.Lock
						var err error
						if gi%2 == 0 {
							l, err = m.Lock(ctx)
						} else {
							l, err = r.Lock(owner)
						}
						if err != nil {
							t.Error(err)
							return
						}
						if inside.Add(1) != 1 {
							violations.Add(1)
						}
						if f := l.Fence(); f <= lastFence.Load() {
							violations.Add(1)
						} else {
							lastFence.Store(f)
						}
						var n int64
						if err := db.QueryRowContext(ctx, "SELECT n FROM counter WHERE id = 1").Scan(&n); err != nil {
							t.Error(err)
						}
						if _, err := lock.GuardedExec(ctx, db, guardedIncrement, l.Fence(), n+1, lock.FenceArg, lock.FenceArg); errors.Is(err, lock.ErrStaleFence) {
							stale.Add(1)
						} else if err != nil {
							t.Error(err)
						}
						inside.Add(-1)
						if err := l.Release(ctx); err != nil {
							t.Error(err)
						}
					}
				})
			}
		}
		wg.Wait()
		var n int64
		if err := db.QueryRow("SELECT n FROM counter WHERE id = 1").Scan(&n); err != nil {
			t.Fatal(err)
		}
		el := time.Since(start)
		t.Logf("%d acquisitions by %d clients x %d goroutines in %v (%.0f/s): counter %d, %d overlaps or fence regressions, %d stale-fence refusals",
			perRedis, clients, goroutines, el.Round(time.Millisecond), float64(perRedis)/el.Seconds(), n, violations.Load(), stale.Load())
		if n != int64(perRedis) || violations.Load() != 0 || stale.Load() != 0 {
			t.Fatalf("mutual exclusion violated: counter %d of %d, %d violations, %d stale fences", n, perRedis, violations.Load(), stale.Load())
		}
	})
}

// TestLostLock: a watchdog lock whose key disappears has its Context cancelled within one
// renewal period; the next holder's fence is greater, and the old holder's late write is
// refused by the guarded write in MariaDB.
func TestLostLock(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		const lease = 900 * time.Millisecond
		const period = lease / 3
		ctx := context.Background()
		db := openDB(t)
		a := newClient(t, rdb, lock.Options{WatchdogLease: lease})
		b := newClient(t, rdb, lock.Options{})
		name := uniq("lost")

		old, err := a.Obtain(ctx, name, lock.LockOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// The watchdog keeps it past its lease.
		time.Sleep(lease + period)
		if old.Context().Err() != nil {
			t.Fatalf("lock lost while the watchdog ran: %v", context.Cause(old.Context()))
		}
		if _, err := lock.GuardedExec(ctx, db, guardedIncrement, old.Fence(), 1, lock.FenceArg, lock.FenceArg); err != nil {
			t.Fatal(err)
		}

		rdb.Del(ctx, a.Key(name)) // lost: expired through a pause, evicted, failed over...
		deleted := time.Now()
		select {
		case <-old.Done():
		case <-time.After(3 * time.Second):
			t.Fatal("Context not cancelled after the key was deleted")
		}
		noticed := time.Since(deleted)
		t.Logf("loss noticed after %v (renewal period %v)", noticed, period)
		if noticed > period+150*time.Millisecond {
			t.Fatalf("loss noticed after %v, want within one renewal period (%v)", noticed, period)
		}
		if cause := context.Cause(old.Context()); !errors.Is(cause, lock.ErrLockLost) {
			t.Fatalf("cause %v", cause)
		}

		next, err := b.Obtain(ctx, name, lock.LockOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if next.Fence() <= old.Fence() {
			t.Fatalf("fence %d after %d", next.Fence(), old.Fence())
		}
		if _, err := lock.GuardedExec(ctx, db, guardedIncrement, next.Fence(), 2, lock.FenceArg, lock.FenceArg); err != nil {
			t.Fatal(err)
		}
		// The old holder wakes up and writes late: refused.
		if _, err := lock.GuardedExec(ctx, db, guardedIncrement, old.Fence(), 3, lock.FenceArg, lock.FenceArg); !errors.Is(err, lock.ErrStaleFence) {
			t.Fatalf("late write with the stale fence: %v, want ErrStaleFence", err)
		}
		var n int64
		_ = db.QueryRow("SELECT n FROM counter WHERE id = 1").Scan(&n)
		if n != 2 {
			t.Fatalf("counter %d, want the new holder's 2", n)
		}
		if err := old.Release(ctx); !errors.Is(err, lock.ErrLockLost) {
			t.Fatalf("Release of the lost lock: %v", err)
		}
		if rdb.Exists(ctx, a.Key(name)).Val() != 1 {
			t.Fatal("the old holder's Release deleted the new holder's lock")
		}
		_ = next.Release(ctx)
	})
}

// TestWatchdogBlocked: the watchdog cannot reach Redis (the server is gone); the lock's
// Context is cancelled within one renewal period. (The client fails fast: go-redis' default
// of 5 dial retries 100 ms apart would hold the renewal until its ttl/6 timeout.)
func TestWatchdogBlocked(t *testing.T) {
	const lease = 900 * time.Millisecond
	addr, stop := testenv.PrivateRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1})
	defer rdb.Close()
	c := lock.New(rdb, lock.Options{WatchdogLease: lease})
	defer c.Close()
	l, err := c.Obtain(context.Background(), uniq("blocked"), lock.LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stop()
	stopped := time.Now()
	select {
	case <-l.Done():
	case <-time.After(3 * time.Second):
		t.Fatal("Context not cancelled with Redis gone")
	}
	noticed := time.Since(stopped)
	t.Logf("unreachable Redis noticed after %v; cause: %v", noticed, context.Cause(l.Context()))
	if noticed > lease/3+150*time.Millisecond {
		t.Fatalf("noticed after %v, want within one renewal period (%v)", noticed, lease/3)
	}
	if cause := context.Cause(l.Context()); !errors.Is(cause, lock.ErrLockLost) {
		t.Fatalf("cause %v", cause)
	}
}

func TestGuardedExecBinding(t *testing.T) {
	db := openDB(t)
	ctx := context.Background()
	// Every lock.FenceArg is the fence; the other arguments keep their order.
	if _, err := db.Exec("CREATE TABLE notes (id INT PRIMARY KEY, body VARCHAR(64), fence BIGINT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO notes VALUES (7, '', 0)"); err != nil {
		t.Fatal(err)
	}
	q := "UPDATE notes SET body = CONCAT(?, ':fence'), fence = ? WHERE id = ? AND fence <= ?"
	if _, err := lock.GuardedExec(ctx, db, q, 5, "x", lock.FenceArg, 7, lock.FenceArg); err != nil {
		t.Fatal(err)
	}
	var body string
	var fence int64
	_ = db.QueryRow("SELECT body, fence FROM notes WHERE id = 7").Scan(&body, &fence)
	if body != "x:fence" || fence != 5 {
		t.Fatalf("row = %q, %d", body, fence)
	}
	// The same holder writes again; an older one is refused.
	if _, err := lock.GuardedExec(ctx, db, q, 5, "y", lock.FenceArg, 7, lock.FenceArg); err != nil {
		t.Fatalf("second write with the same fence: %v", err)
	}
	if _, err := lock.GuardedExec(ctx, db, q, 4, "z", lock.FenceArg, 7, lock.FenceArg); !errors.Is(err, lock.ErrStaleFence) {
		t.Fatalf("smaller fence: %v, want ErrStaleFence", err)
	}
	_ = db.QueryRow("SELECT body FROM notes WHERE id = 7").Scan(&body)
	if body != "y:fence" {
		t.Fatalf("body %q after the refused write, want the holder's y:fence", body)
	}
	if _, err := lock.GuardedExec(ctx, db, q, 6, "y", lock.FenceArg, lock.FenceArg); err == nil {
		t.Fatal("missing arg accepted")
	}
	if _, err := lock.GuardedExec(ctx, db, "UPDATE notes SET body = ? WHERE id = ?", 6, "y", 7); err == nil {
		t.Fatal("a write without lock.FenceArg accepted")
	}
}

// TestGuardedExecUnchangedRow: MySQL reports changed rows by default, so a guarded write that
// leaves the row as it was is refused as stale (the safe side); with clientFoundRows=true the
// driver counts matched rows and the write passes (lock/fence.go documents both).
func TestGuardedExecUnchangedRow(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.MySQL(t)
	open := func(dsn string) *sql.DB {
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		return db
	}
	changed, found := open(dsn), open(dsn+"&clientFoundRows=true")
	if _, err := changed.Exec("CREATE TABLE counter (id INT PRIMARY KEY, n BIGINT NOT NULL, fence BIGINT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	if _, err := changed.Exec("INSERT INTO counter VALUES (1, 7, 5)"); err != nil {
		t.Fatal(err)
	}
	if _, err := lock.GuardedExec(ctx, changed, guardedIncrement, 5, 7, lock.FenceArg, lock.FenceArg); !errors.Is(err, lock.ErrStaleFence) {
		t.Fatalf("unchanged row, changed-rows count: %v, want ErrStaleFence", err)
	}
	if _, err := lock.GuardedExec(ctx, found, guardedIncrement, 5, 7, lock.FenceArg, lock.FenceArg); err != nil {
		t.Fatalf("unchanged row, clientFoundRows=true: %v", err)
	}
	if _, err := lock.GuardedExec(ctx, found, guardedIncrement, 4, 7, lock.FenceArg, lock.FenceArg); !errors.Is(err, lock.ErrStaleFence) {
		t.Fatalf("older fence, clientFoundRows=true: %v, want ErrStaleFence", err)
	}
}
