package seckill

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/lock"
	"github.com/surgekit/surge/redisctx"
)

// voucherLocks takes the per-voucher Redis lock that rebuilds, stock changes and reconcile
// serialise on (and batch commits, on a database without row locks: see sqlStore).
type voucherLocks struct {
	rdb   redis.UniversalClient
	locks *lock.Client
	keys  keyspace
}

// lock takes the voucher's lock, waiting for the holder.
func (v voucherLocks) lock(ctx context.Context, voucherID int) (*lock.Lock, error) {
	l, err := v.locks.Obtain(ctx, v.keys.voucherLock(voucherID), lock.LockOptions{Wait: -1})
	if err == nil && ctx.Err() != nil {
		// Obtained as the caller gave up (a late answer from Redis): nobody would use it.
		_ = l.Release(context.WithoutCancel(ctx))
		err = ctx.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("seckill: locking voucher %d: %w", voucherID, err)
	}
	return l, nil
}

// holding returns ctx, also ended when the lock l is lost, for work done under l: the
// caller's deadline still bounds it (a lock's own Context has none). done releases it.
func holding(ctx context.Context, l *lock.Lock) (held context.Context, done func()) {
	held, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(l.Context(), func() { cancel(context.Cause(l.Context())) })
	return held, func() { stop(); cancel(nil) }
}

// under runs work holding the voucher's lock, with a ctx that ends with ctx or when the lock
// is lost. It returns at ctx's deadline whatever the Redis client's settings; work given up
// on that way stops at its next call and releases the lock.
func (v voucherLocks) under(ctx context.Context, voucherID int, work func(ctx context.Context) error) error {
	return redisctx.Err(ctx, v.rdb, func(ctx context.Context) error {
		l, err := v.lock(ctx, voucherID)
		if err != nil {
			return err
		}
		defer l.Release(context.WithoutCancel(ctx))
		held, done := holding(ctx, l)
		defer done()
		return work(held)
	})
}
