package lock_test

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/lock"
	"github.com/surgekit/surge/redisfailover"
)

// The examples keep every key under "example:" (Options.Prefix); a lock's keys expire with its
// lease. Redis at REDIS_ADDR (comma-separated: a Cluster), else localhost:6379; the database at
// MYSQL_DSN, else root@tcp(localhost:3306)/test.

// The common case: one lock, waited for at most 2 s, the protected write guarded by the
// fencing token. Needs Redis and a MySQL/MariaDB database.
func ExampleClient_Obtain() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: cmp.Or(os.Getenv("REDIS_ADDR"), "localhost:6379")})
	defer rdb.Close()
	db, err := sql.Open("mysql", cmp.Or(os.Getenv("MYSQL_DSN"), "root@tcp(localhost:3306)/test"))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	// The row keeps the fence of its last writer.
	mustExec(db, "CREATE TABLE IF NOT EXISTS example_voucher (id BIGINT PRIMARY KEY, stock INT NOT NULL, fence BIGINT NOT NULL DEFAULT 0)")
	defer mustExec(db, "DROP TABLE example_voucher")
	mustExec(db, "REPLACE INTO example_voucher (id, stock) VALUES (42, 100)")

	locks := lock.New(rdb, lock.Options{Prefix: "example:lock"})
	defer locks.Close()
	l, err := locks.Obtain(ctx, "voucher:42", lock.LockOptions{Wait: 2 * time.Second})
	if errors.Is(err, lock.ErrNotObtained) {
		fmt.Println("busy: someone else held it for 2 s")
		return
	}
	if err != nil {
		panic(err)
	}
	defer l.Release(ctx)
	// l.Context() ends if the watchdog finds the lock lost; GuardedExec refuses to write once
	// the lease has run out, and a late write is refused by the fence anyway. The holder may
	// write as often as it needs.
	_, err = l.GuardedExec(l.Context(), db,
		"UPDATE example_voucher SET stock = stock - 1, fence = ? WHERE id = ? AND fence <= ?", lock.FenceArg, 42, lock.FenceArg)
	if errors.Is(err, lock.ErrStaleFence) || errors.Is(err, lock.ErrLockLost) {
		fmt.Println("lost the lock: a newer holder wrote first, or may have")
		return
	}
	var stock int
	if err := db.QueryRowContext(ctx, "SELECT stock FROM example_voucher WHERE id = 42").Scan(&stock); err != nil {
		panic(err)
	}
	fmt.Println("stock", stock, err)
	// Output: stock 99 <nil>
}

func mustExec(db *sql.DB, query string) {
	if _, err := db.Exec(query); err != nil {
		panic(err)
	}
}

// Reentrancy by owner: the owner is the unit of work in the context, not a goroutine.
func ExampleReentrant() {
	ctx := lock.WithOwner(context.Background(), "order-7781")
	rdb := redis.NewClient(&redis.Options{Addr: cmp.Or(os.Getenv("REDIS_ADDR"), "localhost:6379")})
	defer rdb.Close()
	locks := lock.New(rdb, lock.Options{Prefix: "example:lock"})
	defer locks.Close()
	account := locks.NewReentrant("account:9", lock.LockOptions{})

	outer, err := account.Lock(ctx)
	if err != nil {
		panic(err)
	}
	inner, err := account.TryLock(ctx, 0) // same owner: re-enters at once, same fence
	if err != nil {
		panic(err)
	}
	fmt.Println("re-entered, same fence:", inner.Fence() == outer.Fence())
	fmt.Println(inner.Release(ctx), outer.Release(ctx))
	// Output:
	// re-entered, same fence: true
	// <nil> <nil>
}

// All or nothing over several names, in any Cluster slots: on a single node, or on a Cluster
// when REDIS_ADDR names several seed nodes.
func ExampleClient_ObtainMulti() {
	ctx := context.Background()
	addrs := strings.Split(cmp.Or(os.Getenv("REDIS_ADDR"), "localhost:6379"), ",")
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: addrs})
	defer rdb.Close()
	locks := lock.New(rdb, lock.Options{Prefix: "example:lock"})
	defer locks.Close()
	l, err := locks.ObtainMulti(ctx, []string{"account:1", "account:2"}, lock.LockOptions{Wait: time.Second})
	if err != nil {
		panic(err)
	}
	fmt.Println("both held:", l.Valid())
	fmt.Println(l.Release(ctx))
	// Output:
	// both held: true
	// <nil>
}

// The replica check: a lock counts only once a replica has it, so that a failover to that
// replica keeps it (see the package documentation, "Failover"). A Redis with no
// replica (as on a developer's machine): there, the acquisition is refused and undone.
func ExampleOptions_replicaAcks() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: cmp.Or(os.Getenv("REDIS_ADDR"), "localhost:6379")})
	defer rdb.Close()
	locks := lock.New(rdb, lock.Options{Prefix: "example:lock", ReplicaAcks: 1, ReplicaTimeout: 100 * time.Millisecond})
	defer locks.Close()

	l, err := locks.Obtain(ctx, "payout:3", lock.LockOptions{})
	switch {
	case errors.Is(err, lock.ErrNotReplicated):
		// Released again on the master. A replica is down or lagging: retry later, or alert.
		fmt.Println("not obtained: no replica acknowledged it in time")
		return
	case err != nil:
		panic(err)
	}
	defer l.Release(ctx)
	fmt.Println("obtained, and a replica has it")
	// Output: not obtained: no replica acknowledged it in time
}

// Locks on a Redis that fails over: redisfailover.NewClient builds the client, for a Cluster
// whose masters have replicas (here) or a master watched by Sentinel (MasterName, Addrs: the
// Sentinels), and follows a promotion within about a second. A lock held at that moment may be
// lost with a replica that lagged: the fencing token still refuses the old holder's writes (see
// Fencing in the package documentation).
func Example_failover() {
	ctx := context.Background()
	rdb := redisfailover.NewClient(&redis.UniversalOptions{
		Addrs:                 []string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"}, // seeds
		ContextTimeoutEnabled: true,
	})
	defer rdb.Close()
	locks := lock.New(rdb, lock.Options{Prefix: "example:lock"})
	defer locks.Close()
	if l, err := locks.Obtain(ctx, "voucher:42", lock.LockOptions{Wait: time.Second}); err == nil {
		defer l.Release(ctx)
	}
}
