package seckill

import (
	"context"
	"fmt"
	"time"

	"github.com/surgekit/surge/lock"
)

// The per-user lock of the synchronous strategy: its lease bounds how long a grab whose process
// died blocks that user's next grab; a user's concurrent grabs wait at most userLockWait.
const (
	userLockLease = 10 * time.Second
	userLockWait  = 5 * time.Second
)

// syncGrabber is StrategySync's admission: under the user's lock, one database transaction
// (orderStore.buyNow). The lock keeps one user's concurrent grabs from racing to the
// database; the unique (user, voucher) index would catch them anyway.
type syncGrabber struct {
	locks *lock.Client
	keys  keyspace
	store admissionStore
	clock func() time.Time
}

func (g *syncGrabber) grab(ctx context.Context, userID, voucherID int) (Admission, error) {
	l, err := g.locks.Obtain(ctx, g.keys.userLock(userID), lock.LockOptions{Lease: userLockLease, Wait: userLockWait})
	if err != nil {
		return Admission{}, fmt.Errorf("seckill: locking user %d: %w", userID, err)
	}
	defer l.Release(context.WithoutCancel(ctx))
	return g.store.buyNow(l.Context(), userID, voucherID, g.clock())
}
