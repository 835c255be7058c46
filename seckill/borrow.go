package seckill

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/lua"
	"github.com/surgekit/surge/redisctx"
)

// Borrowing. A user whose own bucket is sold out while others still hold stock must not be
// told SOLD_OUT. The user's grab borrows a unit in three one-slot steps:
//
//  1. reserve, in the user's bucket: the user becomes a buyer under the order id (so no other
//     grab of the user is admitted meanwhile) and an intent records the order, its user and a
//     deadline;
//  2. take, in one donor bucket after another until one has a unit: the donor decrements its
//     stock and queues the order in its own stream, in one script, and notes the order in its
//     lent hash; a take runs only until the deadline (Redis's clock);
//  3. end, in the user's bucket: the intent goes, and the reservation with it if no donor had a
//     unit (the user is told SOLD_OUT and may grab again).
//
// A unit is at every moment in one bucket's stock or one bucket's stream, so the stock stays
// exact whatever step a crash interrupts. A crash (or a lost reply) between steps leaves an
// intent: once its deadline has passed no take can run any more, and recovery ends it: taken if
// a donor's lent hash names the order, else undone (resolveBorrows). A full rebuild waits out
// the deadline of every borrow begun before it (rebuildBuckets).

// borrowTimeout bounds a borrow's steps; its takes run only until then (Redis's clock).
// borrowMargin covers clock differences between this process and the Redis masters before
// recovery ends an intent.
const (
	borrowTimeout = 2 * time.Second
	borrowMargin  = time.Second
)

// soldOutHint is how long a borrow that found every bucket empty answers the voucher's later
// borrows SOLD_OUT at once, in this process: after a sale sold out, each grab would otherwise
// cost a call per bucket. Stock only comes back through a failed order or a stock raise.
const soldOutHint = 50 * time.Millisecond

// borrower runs borrows and ends the intents left behind.
type borrower struct {
	rdb   redis.UniversalClient
	keys  keyspace
	clock func() time.Time

	mu    sync.Mutex
	empty map[int]time.Time // voucher -> a borrow found every bucket empty then
}

// borrow tries to admit a user whose own bucket (of k) answered SOLD_OUT, from the other
// buckets. It answers like the grab script: admitted (the order is queued in a donor's
// stream, whose reference it returns), SOLD_OUT, or the home bucket's refusal. An error leaves
// an intent that recovery ends; the order may then stand after all, as after a lost reply of
// a grab.
func (b *borrower) borrow(ctx context.Context, voucherID, k, userID int, orderID int64) (lua.GrabReply, int, error) {
	r, donor, err := b.borrowFrom(ctx, voucherID, k, userID, orderID)
	return r, bucketRef(voucherID, donor, k), err
}

func (b *borrower) borrowFrom(ctx context.Context, voucherID, k, userID int, orderID int64) (lua.GrabReply, int, error) {
	sold := lua.GrabReply{Outcome: lua.GrabSoldOut}
	if b.emptyRecently(voucherID) {
		return sold, 0, nil
	}
	// The steps run to their end even if the caller gives up: an intent is cheaper to end now
	// than by recovery.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), borrowTimeout)
	defer cancel()
	notAfter := time.Now().Add(borrowTimeout)
	now := b.clock()
	home := homeBucket(userID, k)
	hk := b.keys.script(bucketRef(voucherID, home, k))
	r, err := redisctx.Do(ctx, b.rdb, func(ctx context.Context) (lua.GrabReply, error) {
		return lua.BorrowReserve(ctx, b.rdb, hk, now, userID, orderID, notAfter)
	})
	if err != nil || r.Outcome != lua.GrabAdmitted {
		return r, 0, err
	}
	taken, donor := false, 0
	first := rand.IntN(k - 1) // donors in a random order: borrowers spread over them
	for i := range k - 1 {
		donor = (home + 1 + (first+i)%(k-1)) % k
		dk := b.keys.script(bucketRef(voucherID, donor, k))
		t, err := redisctx.Do(ctx, b.rdb, func(ctx context.Context) (lua.GrabReply, error) {
			return lua.BorrowTake(ctx, b.rdb, dk, now, userID, orderID, notAfter)
		})
		if err != nil {
			// The take may have run: only recovery, past the deadline, can tell.
			return lua.GrabReply{}, 0, fmt.Errorf("seckill: borrowing from bucket %d: %w", donor, err)
		}
		if t.Outcome == lua.GrabAdmitted {
			r.StockLeft, taken = t.StockLeft, true
			break
		}
		if t.Outcome == lua.BorrowTooLate {
			break
		}
	}
	_, err = redisctx.Do(ctx, b.rdb, func(ctx context.Context) (bool, error) {
		return lua.BorrowEnd(ctx, b.rdb, hk, userID, orderID, taken)
	})
	if taken {
		return r, donor, nil // a failed end leaves the intent to recovery, which finds the loan
	}
	if err != nil {
		return lua.GrabReply{}, 0, fmt.Errorf("seckill: ending a borrow: %w", err)
	}
	b.noteEmpty(voucherID)
	return sold, 0, nil
}

func (b *borrower) emptyRecently(voucherID int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	at, ok := b.empty[voucherID]
	return ok && time.Since(at) < soldOutHint
}

func (b *borrower) noteEmpty(voucherID int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.empty == nil || len(b.empty) > maxVoucherInfos {
		b.empty = map[int]time.Time{}
	}
	b.empty[voucherID] = time.Now()
}

// forgetEmpty drops the sold-out hint (a warm changed the stock).
func (b *borrower) forgetEmpty(voucherID int) {
	b.mu.Lock()
	delete(b.empty, voucherID)
	b.mu.Unlock()
}

// BorrowsEnded counts what resolveBorrows did.
type BorrowsEnded struct {
	Completed int // a donor had lent the unit: the reservation stays
	Undone    int // none had: the reservation went
	Waiting   int // still within their deadline
}

// resolveBorrows ends the intents of a voucher's k buckets whose deadline (plus borrowMargin)
// passed before now, or all of them with all: the caller knows no take can run any more.
func (b *borrower) resolveBorrows(ctx context.Context, voucherID, k int, now time.Time, all bool) (BorrowsEnded, error) {
	var out BorrowsEnded
	var errs []error
	for h := range k {
		hk := b.keys.script(bucketRef(voucherID, h, k))
		intents, err := b.rdb.HGetAll(ctx, hk.Borrows).Result()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for order, v := range intents {
			user, deadline, ok := parseIntent(v)
			orderID, perr := strconv.ParseInt(order, 10, 64)
			if !ok || perr != nil {
				errs = append(errs, fmt.Errorf("seckill: unreadable borrow intent %s=%q in %s", order, v, hk.Borrows))
				continue
			}
			if !all && now.Before(deadline.Add(borrowMargin)) {
				out.Waiting++
				continue
			}
			taken, err := b.lent(ctx, voucherID, k, order)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if _, err := lua.BorrowEnd(ctx, b.rdb, hk, user, orderID, taken); err != nil {
				errs = append(errs, err)
				continue
			}
			if taken {
				out.Completed++
			} else {
				out.Undone++
			}
		}
	}
	return out, errors.Join(errs...)
}

// lent reports whether any bucket lent a unit to the order.
func (b *borrower) lent(ctx context.Context, voucherID, k int, order string) (bool, error) {
	for d := range k {
		ok, err := b.rdb.HExists(ctx, b.keys.sale(bucketRef(voucherID, d, k)).Lent, order).Result()
		if err != nil {
			return false, err
		}
		if ok {
			return true, nil
		}
	}
	return false, nil
}

// parseIntent reads an intent's "user:notAfter".
func parseIntent(v string) (user int, notAfter time.Time, ok bool) {
	u, ms, found := strings.Cut(v, ":")
	if !found {
		return 0, time.Time{}, false
	}
	user, err1 := strconv.Atoi(u)
	t, err2 := strconv.ParseInt(ms, 10, 64)
	return user, time.UnixMilli(t), err1 == nil && err2 == nil
}

// borrowSweep is how often a process ends the borrows left behind (by any process) whose
// deadline has passed; borrowRecent is how long after it last met a voucher with buckets (a
// grab, a status read) a process keeps sweeping it.
const (
	borrowSweep  = 2 * time.Second
	borrowRecent = 10 * time.Minute
)

// run ends, every borrowSweep until life ends, the expired intents of the vouchers with
// buckets this process has met in the last borrowRecent. An intent left by a process that
// died is ended by any other serving the sale, or by this one once a grab or a status read
// of the voucher (its user's, say) comes here. Vouchers without buckets cost nothing: an idle
// process sends no command.
func (b *borrower) run(life context.Context, counts *bucketCounts) {
	tick := time.NewTicker(borrowSweep)
	defer tick.Stop()
	for {
		select {
		case <-life.Done():
			return
		case <-tick.C:
		}
		for _, vk := range counts.bucketedSince(time.Now().Add(-borrowRecent)) {
			ctx, cancel := context.WithTimeout(life, consumerCallTimeout)
			_, _ = b.resolveBorrows(ctx, vk.voucher, vk.k, time.Now(), false) // an error: the next sweep tries again
			cancel()
		}
	}
}

// ResolveBorrows ends a voucher's borrows whose deadline has passed (a grab's process died, or
// lost a reply, between a borrow's steps): completed where a bucket lent the unit, undone
// where none did. Every process does it in the background every two seconds; reconcile and
// tests call it directly.
func (s *Service) ResolveBorrows(ctx context.Context, voucherID int) (BorrowsEnded, error) {
	k, err := s.admission.counts.of(ctx, voucherID)
	if err != nil || k < 2 {
		return BorrowsEnded{}, err
	}
	return redisctx.Do(ctx, s.rdb, func(ctx context.Context) (BorrowsEnded, error) {
		return s.borrower.resolveBorrows(ctx, voucherID, k, time.Now(), false)
	})
}
