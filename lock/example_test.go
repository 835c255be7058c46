package lock_test

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/lock"
)

// The common case: one lock, waited for at most 2 s, the protected write guarded by the
// fencing token. (Examples without output are compiled, not run.)
func ExampleClient_Obtain() {
	ctx := context.Background()
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{"127.0.0.1:6379"}})
	var db *sql.DB // MySQL/MariaDB; the row has a fence column
	locks := lock.New(rdb, lock.Options{})
	defer locks.Close()

	l, err := locks.Obtain(ctx, "voucher:42", lock.LockOptions{Wait: 2 * time.Second})
	if errors.Is(err, lock.ErrNotObtained) {
		return // busy: someone else held it for 2 s
	}
	if err != nil {
		return
	}
	defer l.Release(ctx)
	// l.Context() ends if the watchdog finds the lock lost; GuardedExec refuses to write once
	// the lease has run out, and a late write is refused by the fence anyway.
	_, err = l.GuardedExec(l.Context(), db,
		"UPDATE voucher SET stock = stock - 1, fence = :fence WHERE id = ? AND fence <= :fence", 42)
	if errors.Is(err, lock.ErrStaleFence) || errors.Is(err, lock.ErrLockLost) {
		return // a newer holder wrote first, or may have: this one had lost the lock
	}
}

// Reentrancy by owner: the owner is the unit of work in the context, not a goroutine.
func ExampleReentrant() {
	ctx := lock.WithOwner(context.Background(), "order-7781")
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{"127.0.0.1:6379"}})
	locks := lock.New(rdb, lock.Options{})
	defer locks.Close()
	account := locks.NewReentrant("account:9", lock.LockOptions{})

	outer, err := account.Lock(ctx)
	if err != nil {
		return
	}
	defer outer.Release(ctx)
	inner, err := account.TryLock(ctx, 0) // same owner: re-enters at once, same fence
	if err != nil {
		return
	}
	defer inner.Release(ctx)
}

// All or nothing over several names, in any Cluster slots.
func ExampleClient_ObtainMulti() {
	ctx := context.Background()
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{"127.0.0.1:7101", "127.0.0.1:7102"}})
	locks := lock.New(rdb, lock.Options{})
	defer locks.Close()
	l, err := locks.ObtainMulti(ctx, []string{"account:1", "account:2"}, lock.LockOptions{Wait: time.Second})
	if err != nil {
		return
	}
	defer l.Release(ctx)
}
