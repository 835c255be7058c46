package lua

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// The steps of a borrow between the stock buckets of one voucher (seckill/buckets.go), each
// in one bucket's slot, and the warm's move of stock between buckets.
var (
	seckillBorrowReserve = load("seckill_borrow_reserve.lua")
	seckillBorrowTake    = load("seckill_borrow_take.lua")
	seckillBorrowEnd     = load("seckill_borrow_end.lua")
	seckillBucketMove    = load("seckill_bucket_move.lua")
)

// BorrowTooLate is BorrowTake's outcome past the borrow's deadline: nothing taken.
const BorrowTooLate GrabOutcome = 6

// BorrowReserve records, in the user's own bucket, the user as a buyer under order and an
// intent waiting for a donor until notAfter (seckill_borrow_reserve.lua). Outcomes:
// GrabAdmitted (reserved), GrabNotReady, GrabNotStarted, GrabEnded, GrabAlreadyBuyer (Holder).
func BorrowReserve(ctx context.Context, rdb redis.Scripter, home SeckillKeys, now time.Time, user int, order int64, notAfter time.Time) (GrabReply, error) {
	res, err := seckillBorrowReserve.Run(ctx, rdb, []string{home.Meta, home.Buyers, home.Borrows},
		now.UnixMilli(), user, order, notAfter.UnixMilli()).Slice()
	if err != nil {
		return GrabReply{}, err
	}
	r, ok := parseBorrowPair(res)
	if !ok || r.Outcome == GrabSoldOut || r.Outcome == BorrowTooLate {
		return GrabReply{}, malformed("seckill_borrow_reserve.lua", res)
	}
	return r, nil
}

// BorrowTake takes one unit in a donor bucket for an order reserved in another one and queues
// the order in the donor's stream (seckill_borrow_take.lua). Outcomes: GrabAdmitted (taken;
// StockLeft is the donor's), GrabNotReady, GrabEnded, GrabSoldOut (none here), BorrowTooLate.
func BorrowTake(ctx context.Context, rdb redis.Scripter, donor SeckillKeys, now time.Time, user int, order int64, notAfter time.Time) (GrabReply, error) {
	res, err := seckillBorrowTake.Run(ctx, rdb, []string{donor.Meta, donor.Stock, donor.Orders, donor.Lent},
		now.UnixMilli(), user, order, notAfter.UnixMilli()).Slice()
	if err != nil {
		return GrabReply{}, err
	}
	r, ok := parseBorrowPair(res)
	if !ok || r.Outcome == GrabNotStarted || r.Outcome == GrabAlreadyBuyer {
		return GrabReply{}, malformed("seckill_borrow_take.lua", res)
	}
	return r, nil
}

// BorrowEnd ends a borrow in the user's own bucket: the intent goes, and the reservation too
// unless taken (seckill_borrow_end.lua). It reports whether the intent was still there.
func BorrowEnd(ctx context.Context, rdb redis.Scripter, home SeckillKeys, user int, order int64, taken bool) (bool, error) {
	n, err := seckillBorrowEnd.Run(ctx, rdb, []string{home.Buyers, home.Borrows}, user, order, flag(taken)).Int64()
	return settledFlag("seckill_borrow_end.lua", n, err)
}

// MoveBucketStock adds units to a bucket's stock, or takes up to -units from it, and returns
// the units moved (seckill_bucket_move.lua): all of an addition, none if the bucket has no
// stock (not ready), a take up to the stock there is. Redis runs it only until notAfter by
// its own clock (ErrCommitTooLate), as a warm's commit.
func MoveBucketStock(ctx context.Context, rdb redis.Scripter, keys SeckillKeys, units int64, notAfter time.Time) (int64, error) {
	res, err := seckillBucketMove.Run(ctx, rdb, []string{keys.Stock}, units, notAfter.UnixMilli()).Int64Slice()
	switch {
	case err != nil:
		return 0, err
	case len(res) != 2:
		return 0, malformed("seckill_bucket_move.lua", res)
	case res[0] == 0:
		return 0, ErrCommitTooLate
	}
	moved := res[1]
	if units > 0 && moved != units && moved != 0 || units <= 0 && (moved > 0 || moved < units) {
		return 0, malformed("seckill_bucket_move.lua", res)
	}
	return moved, nil
}

func parseBorrowPair(res []any) (GrabReply, bool) {
	if len(res) != 2 {
		return GrabReply{}, false
	}
	c, ok := res[0].(int64)
	if !ok {
		return GrabReply{}, false
	}
	r := GrabReply{Outcome: GrabOutcome(c)}
	switch r.Outcome {
	case GrabAdmitted:
		r.StockLeft, ok = res[1].(int64)
		return r, ok && r.StockLeft >= 0
	case GrabAlreadyBuyer:
		s, _ := res[1].(string)
		id, err := strconv.ParseInt(s, 10, 64)
		r.Holder = id
		return r, err == nil && id > 0
	case GrabNotReady, GrabNotStarted, GrabEnded, GrabSoldOut, BorrowTooLate:
		return r, true
	}
	return GrabReply{}, false
}
