package seckill

import (
	"context"
	"errors"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// bucketCount is the voucher's bucket count as Redis holds it (1 if none).
func (rc *reconciler) bucketCount(ctx context.Context, voucherID int) (int, error) {
	k, err := rc.rdb.Get(ctx, rc.keys.bucketsKey(voucherID)).Int()
	if errors.Is(err, redis.Nil) {
		return 1, nil
	}
	return min(max(k, 1), maxBuckets), err
}

// inspectBuckets is inspectRedis for a voucher split into k > 1 stock buckets (buckets.go):
// each bucket is read as a voucher is (a snapshot of its stock and stream in one step, its
// buyers, its stream against the database), and the figures are added up: the stock of all
// buckets against the database's less the orders queued in all streams, and the buyers of each
// user's own bucket against the expected buyers. A grab moves a unit from a bucket's stock to
// the same bucket's stream (a borrow: the donor's), so each bucket's snapshot is consistent on
// its own and the sums are exact, although the buckets are read one after the other.
func (rc *reconciler) inspectBuckets(ctx context.Context, r *VoucherReport, db *dbOrders, o ReconcileOptions, k int) error {
	v := redisView{registered: true, buyers: map[string]string{}, queued: map[int]queued{}}
	var stock int64
	stockKnown, ready, intents := true, true, int64(0)
	for b, ref := range bucketRefs(r.VoucherID, k) {
		br := VoucherReport{VoucherID: ref}
		var bv redisView
		if err := rc.snapshot(ctx, &br, &bv); err != nil {
			return err
		}
		buyers, err := rc.scanBuyers(ctx, &br)
		if err != nil {
			return err
		}
		for u, order := range buyers {
			// A rebuild also notes a borrowed order's user in the donor bucket; only the
			// user's own bucket decides admission.
			if id, err := strconv.Atoi(u); err == nil && homeBucket(id, k) == b {
				v.buyers[u] = order
			}
		}
		if err := rc.scanStream(ctx, &br, db, &bv); err != nil {
			return err
		}
		if b == 0 {
			v.meta, v.endScore = bv.meta, bv.endScore
		}
		v.registered = v.registered && bv.registered
		v.groupMissing = v.groupMissing || bv.groupMissing
		ready = ready && br.Ready
		if br.RedisStock == nil {
			stockKnown = false
		} else {
			stock += *br.RedisStock
		}
		r.Queued += br.Queued
		r.Pending += br.Pending
		r.DeadLetters += br.DeadLetters
		mergeScan(&v, &bv)
		for _, p := range br.Problems {
			r.problem(true, "bucket %d: %s", b, p)
		}
		n, err := rc.rdb.HLen(ctx, rc.keys.sale(ref).Borrows).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			r.problem(true, "bucket %d: borrow intents unreadable: %v", b, err)
		}
		intents += n
	}
	r.Ready, r.Registered = ready, v.registered
	if stockKnown {
		r.RedisStock = &stock
	}
	r.Buyers = len(v.buyers)
	want := expectFromStream(r, db, &v)
	r.note("stock split over %d buckets", k)
	if intents > 0 {
		r.note("%d borrows between buckets in progress: their grab or, past their deadline, recovery ends them", intents)
	}
	if !rc.checkReady(r, &v) {
		return nil
	}
	rc.checkState(ctx, r, &v)
	compareBuyers(r, want, &v, db, o)
	noteFacts(r, &v, rc.group, rc.keys.sale(r.VoucherID), o)
	return nil
}

// mergeScan adds one bucket's stream scan to the voucher's.
func mergeScan(v, b *redisView) {
	s, t := &v.scan, &b.scan
	s.unpersisted += t.unpersisted
	s.persisted += t.persisted
	s.superseding = append(s.superseding, t.superseding...)
	s.twice = append(s.twice, t.twice...)
	s.taken = append(s.taken, t.taken...)
	s.failedAgain += t.failedAgain
	s.bad += t.bad
	for u, q := range b.queued {
		if prev, ok := v.queued[u]; ok && !q.late && !prev.late {
			s.twice = append(s.twice, "user "+strconv.Itoa(u)+": orders "+strconv.FormatInt(prev.order, 10)+" and "+strconv.FormatInt(q.order, 10))
		}
		v.queued[u] = q
	}
}
