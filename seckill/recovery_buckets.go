package seckill

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/wait"
	"github.com/surgekit/surge/lua"
)

// Warming and rebuilding a voucher split into stock buckets (buckets.go). The caller holds the
// voucher's lock and row lock, so no batch commits meanwhile: every order is in the database
// or in one bucket's stream. Grabs go on (except during a full rebuild), each in one bucket.

// bucketCountRetention is how long the bucket count outlives the sale (the sale keys' default).
const bucketCountRetention = 7 * 24 * time.Hour

// setBucketCount writes the voucher's bucket count (before any bucket is made ready, so no
// process admits with another count than the buckets') and returns the one Redis held (0 if
// none).
func (r *recovery) setBucketCount(ctx context.Context, voucherID int, sale sale) (int, error) {
	keep := time.UnixMilli(max(sale.end.UnixMilli(), time.Now().UnixMilli())).Add(bucketCountRetention)
	old, err := r.rdb.SetArgs(ctx, r.keys.bucketsKey(voucherID), max(sale.buckets, 1),
		redis.SetArgs{ExpireAt: keep, Get: true}).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, fmt.Errorf("seckill: writing the buckets of voucher %d: %w", voucherID, err)
	}
	r.counts.forget(voucherID)
	prev, _ := strconv.Atoi(old)
	return prev, nil
}

// warmBuckets is warmLocked for a voucher with buckets (or that had some: prev).
func (r *recovery) warmBuckets(ctx context.Context, voucherID int, sale sale, prev int, full bool) error {
	k := max(sale.buckets, 1)
	refs := bucketRefs(voucherID, k)
	// Buckets the voucher no longer has (changed before its sale) admit nothing any more; their
	// stream, if anything was queued, is still read and drained by the consumer.
	for b := k; b < prev; b++ {
		old := r.keys.sale(bucketRef(voucherID, b, prev))
		if err := r.rdb.Del(ctx, old.Meta, old.Stock).Err(); err != nil {
			return fmt.Errorf("seckill: retiring bucket %d of voucher %d: %w", b, voucherID, err)
		}
	}
	if !full {
		for _, ref := range refs {
			st, err := lua.ReadSaleState(ctx, r.rdb, r.keys.script(ref))
			if err != nil {
				return fmt.Errorf("seckill: warming voucher %d: %w", voucherID, err)
			}
			full = full || !st.Ready || !st.Current
		}
	}
	var queuedMax int64
	for _, ref := range refs {
		if err := ensureGroup(ctx, r.rdb, r.keys.sale(ref).Orders, r.group); err != nil {
			return err
		}
		m, err := r.settlePersisted(ctx, ref)
		if err != nil {
			return err
		}
		queuedMax = max(queuedMax, m)
	}
	if full {
		if err := r.resetBuckets(ctx, voucherID, refs, queuedMax); err != nil {
			return err
		}
	}
	if err := r.commitBuckets(ctx, voucherID, refs, sale, full); err != nil {
		return err
	}
	r.borrow.forgetEmpty(voucherID)
	if full {
		r.log.Info("voucher sale state rebuilt from the database", "voucher", voucherID, "db_stock", sale.stock, "buckets", k)
	}
	return nil
}

// resetBuckets starts a full rebuild of every bucket: ids raised, admission paused, the borrows
// begun before it ended, and each buyer put back in the user's own bucket, from the database
// and from every bucket's stream (a borrowed order waits in its donor's stream).
func (r *recovery) resetBuckets(ctx context.Context, voucherID int, refs []int, queuedMax int64) error {
	if err := r.raiseIDs(ctx, queuedMax); err != nil {
		return err
	}
	for _, ref := range refs {
		if err := lua.WarmReset(ctx, r.rdb, r.keys.script(ref)); err != nil {
			return fmt.Errorf("seckill: rebuilding voucher %d: %w", voucherID, err)
		}
	}
	k := len(refs)
	if k > 1 {
		// No bucket is ready now, so no borrow can begin; one begun before may still take a unit
		// until its deadline. Past it, every intent is final: end them all.
		if !wait.Sleep(ctx, borrowTimeout+borrowMargin) {
			return ctx.Err()
		}
		if _, err := r.borrow.resolveBorrows(ctx, voucherID, k, time.Now(), true); err != nil {
			return fmt.Errorf("seckill: ending the borrows of voucher %d: %w", voucherID, err)
		}
	}
	var last int64
	for {
		buyers, err := r.store.buyers(ctx, voucherID, last, buyersPage)
		if err != nil {
			return fmt.Errorf("seckill: reading orders of voucher %d: %w", voucherID, err)
		}
		if len(buyers) == 0 {
			break
		}
		if err := r.warmHomeBuyers(ctx, voucherID, k, buyers); err != nil {
			return err
		}
		last = buyers[len(buyers)-1].Order
	}
	for _, ref := range refs {
		if err := r.loadStreamBuyers(ctx, voucherID, k, ref); err != nil {
			return err
		}
	}
	return nil
}

// loadStreamBuyers puts the users of a bucket's queued orders in their own buckets.
func (r *recovery) loadStreamBuyers(ctx context.Context, voucherID, k, ref int) error {
	start := "-"
	for {
		msgs, err := r.rdb.XRangeN(ctx, r.keys.sale(ref).Orders, start, "+", buyersPage).Result()
		if err != nil {
			return fmt.Errorf("seckill: reading the queue of voucher %d: %w", voucherID, err)
		}
		buyers := make([]lua.Buyer, 0, len(msgs))
		for _, m := range msgs {
			if o, err := parseEntry(m); err == nil {
				buyers = append(buyers, lua.Buyer{User: o.user, Order: o.id})
			}
		}
		if err := r.warmHomeBuyers(ctx, voucherID, k, buyers); err != nil {
			return err
		}
		if len(msgs) < buyersPage {
			return nil
		}
		start = "(" + msgs[len(msgs)-1].ID
	}
}

// warmHomeBuyers adds buyers to their own buckets' buyers hashes.
func (r *recovery) warmHomeBuyers(ctx context.Context, voucherID, k int, buyers []lua.Buyer) error {
	byBucket := make([][]lua.Buyer, k)
	for _, b := range buyers {
		h := homeBucket(b.User, k)
		byBucket[h] = append(byBucket[h], b)
	}
	for h, list := range byBucket {
		if err := lua.WarmBuyers(ctx, r.rdb, r.keys.script(bucketRef(voucherID, h, k)), list); err != nil {
			return fmt.Errorf("seckill: loading buyers of voucher %d: %w", voucherID, err)
		}
	}
	return nil
}

// commitBuckets sets every bucket's window and stock and makes it ready: a full rebuild splits
// the stock (splitBuckets), a warm of ready buckets tops it up (topUpBuckets). More orders
// queued than the database's stock (Redis sold units the database never had) is logged.
func (r *recovery) commitBuckets(ctx context.Context, voucherID int, refs []int, sale sale, full bool) error {
	commit := r.topUpBuckets
	if full {
		commit = r.splitBuckets
	}
	excess, err := commit(ctx, voucherID, refs, sale)
	if err != nil {
		return err
	}
	if excess > 0 {
		r.log.Error("more orders queued than the database's stock", "voucher", voucherID, "excess", excess)
	}
	zs := make([]redis.Z, len(refs))
	for b, ref := range refs {
		zs[b] = redis.Z{Score: float64(sale.end.UnixMilli()), Member: ref}
	}
	if err := r.rdb.ZAdd(ctx, r.keys.registry(), zs...).Err(); err != nil {
		return fmt.Errorf("seckill: registering voucher %d: %w", voucherID, err)
	}
	return nil
}

// splitBuckets commits a full rebuild, every bucket reset (none admits until its commit): the
// database stock less the orders queued in all streams is split evenly over the buckets, each
// bucket's commit subtracting its own queue. A bucket whose queue is past its share (orders
// failed back meanwhile aside, only if more orders are queued than the database has units)
// gets 0, and the excess is taken from the next buckets, then from any bucket with stock. It
// returns the excess it could not take.
func (r *recovery) splitBuckets(ctx context.Context, voucherID int, refs []int, sale sale) (int64, error) {
	k := len(refs)
	lens := make([]int64, k)
	var queued int64
	for b, ref := range refs {
		n, err := r.rdb.XLen(ctx, r.keys.sale(ref).Orders).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return 0, fmt.Errorf("seckill: reading the queue of voucher %d: %w", voucherID, err)
		}
		lens[b], queued = n, queued+n
	}
	avail := max(int64(sale.stock)-queued, 0)
	var carry int64
	for b, ref := range refs {
		if testHookBeforeBucketCommit != nil {
			testHookBeforeBucketCommit(b)
		}
		target := lens[b] + splitStock(avail, b, k) - carry
		s := sale.script()
		s.Stock = target
		q, err := timed(ctx, r.rdb, bucketName(ref), func(ctx context.Context, notAfter time.Time) (int64, error) {
			_, q, err := lua.WarmCommitQueued(ctx, r.rdb, r.keys.script(ref), s, true, notAfter)
			return q, err
		})
		if err != nil {
			return 0, err
		}
		carry = max(q-target, 0)
	}
	r.log.Debug("voucher buckets split", "voucher", voucherID, "db_stock", sale.stock, "queued", lens, "excess", carry)
	return r.takeStock(ctx, refs, carry)
}

// topUpBuckets commits a warm of buckets that are all ready, selling meanwhile: it sets each
// bucket's window and moves only the difference between the database's stock and the units
// the buckets hold, their stock plus their queued orders. A sale moves a unit from one to the
// other, so each bucket's sum holds still while it sells, and the total is exact though the
// buckets are read one after the other. Setting each bucket's stock to a share instead would
// hand one bucket units that another, not yet set, went on selling: sold twice. It returns the
// excess it could not take.
func (r *recovery) topUpBuckets(ctx context.Context, voucherID int, refs []int, sale sale) (int64, error) {
	var held int64
	for b, ref := range refs {
		if testHookBeforeBucketCommit != nil {
			testHookBeforeBucketCommit(b)
		}
		n, err := timed(ctx, r.rdb, bucketName(ref), func(ctx context.Context, notAfter time.Time) (int64, error) {
			stock, queued, err := lua.WarmRefresh(ctx, r.rdb, r.keys.script(ref), sale.script(), notAfter)
			return stock + queued, err
		})
		if err != nil {
			return 0, err
		}
		held += n
	}
	diff := int64(sale.stock) - held
	r.log.Debug("voucher buckets topped up", "voucher", voucherID, "db_stock", sale.stock, "held", held)
	if diff < 0 {
		return r.takeStock(ctx, refs, -diff)
	}
	for b, ref := range refs {
		if add := splitStock(diff, b, len(refs)); add > 0 {
			// A bucket lost meanwhile takes none: the grab that finds it starts a rebuild.
			_, err := timed(ctx, r.rdb, bucketName(ref), func(ctx context.Context, notAfter time.Time) (int64, error) {
				return lua.MoveBucketStock(ctx, r.rdb, r.keys.script(ref), add, notAfter)
			})
			if err != nil {
				return 0, err
			}
		}
	}
	return 0, nil
}

// takeStock takes n units from the buckets' stock, in order, and returns what it could not
// take.
func (r *recovery) takeStock(ctx context.Context, refs []int, n int64) (int64, error) {
	for _, ref := range refs {
		if n == 0 {
			break
		}
		want := n
		moved, err := timed(ctx, r.rdb, bucketName(ref), func(ctx context.Context, notAfter time.Time) (int64, error) {
			return lua.MoveBucketStock(ctx, r.rdb, r.keys.script(ref), -want, notAfter)
		})
		if err != nil {
			return 0, err
		}
		n += moved
	}
	return n, nil
}

// testHookBeforeBucketCommit, set by tests only, runs before a warm commits each bucket.
var testHookBeforeBucketCommit func(bucket int)

// bucketName names a bucket in errors.
func bucketName(ref int) string {
	return fmt.Sprintf("bucket %d of voucher %d", bucketOf(ref), voucherOf(ref))
}
