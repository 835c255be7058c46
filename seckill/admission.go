package seckill

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/idgen"
	"github.com/surgekit/surge/lua"
	"github.com/surgekit/surge/redisctx"
)

// admissionOptions are the Options admission uses.
type admissionOptions struct {
	strategy  Strategy
	rateLimit RateLimit
	pipelines int // < 0: one script call per grab
	clock     func() time.Time
}

// admission decides grabs: in Redis by seckill_grab.lua (StrategyLua), batched with the grabs
// waiting at the same moment, or in the database (StrategySync, sync.go). A grab on a voucher
// Redis does not hold starts its rebuild in the background.
type admission struct {
	opts   admissionOptions
	rdb    redis.UniversalClient
	keys   keyspace
	ids    *idgen.Generator
	store  admissionStore
	limit  *limiter
	batch  *batcher     // nil: one call per grab
	acks   *replicaAcks // nil: answers without replica acknowledgements (replicaack.go)
	sync   *syncGrabber // StrategySync
	bg     *background
	m      *metrics
	log    *slog.Logger
	warm   func(ctx context.Context, voucherID int) error // rebuilds a voucher Redis lost
	vouchs voucherInfos
	told   *told                // the orders told, until written (told.go)
	counts *bucketCounts        // each voucher's stock buckets (buckets.go)
	borrow *borrower            // admits from another bucket when the user's is dry (borrow.go)
	signal func(int, time.Time) // tells this process's consumer a stream (a voucher's or a bucket's) has new entries, admitted at that time
}

// Bounds of the work a grab on a voucher Redis lost starts.
const (
	infoReadTimeout       = 10 * time.Second // "is this a seckill voucher?" (one database read)
	backgroundWarmTimeout = time.Minute      // the rebuild it starts
	// voucherInfoTTL is how long a "not ready" answer's facts are reused: a flood of grabs
	// costs at most one database read and one rebuild per voucher, second and process.
	voucherInfoTTL  = time.Second
	maxVoucherInfos = 10_000 // forgotten all at once past this
)

// grab decides one grab; the caller has checked ids, Close and the rate limit.
func (a *admission) grab(ctx context.Context, userID, voucherID int) (Admission, error) {
	if a.opts.strategy == StrategySync {
		return a.sync.grab(ctx, userID, voucherID)
	}
	orderID, err := a.ids.Next(ctx)
	if err != nil {
		return Admission{}, fmt.Errorf("seckill: order id: %w", err)
	}
	k, err := a.counts.of(ctx, voucherID)
	if err != nil {
		return Admission{}, fmt.Errorf("seckill: reading the voucher's buckets: %w", err)
	}
	// The user's own bucket decides (a voucher without buckets has one: its own keys); told
	// watches the bucket whose stream holds the order.
	home := bucketRef(voucherID, homeBucket(userID, k), k)
	r, err := a.admit(ctx, home, userID, orderID)
	queuedIn, borrowed := home, false
	if err == nil && r.Outcome == lua.GrabSoldOut && k > 1 {
		r, queuedIn, err = a.borrow.borrow(ctx, voucherID, k, userID, orderID)
		borrowed = true
	}
	if err == nil && k > 1 && (borrowed || r.Outcome == lua.GrabAlreadyBuyer) {
		err = a.confirmBuckets(ctx, voucherID, k, home, queuedIn, r.Outcome)
	}
	if errors.Is(err, ErrReplicationTimeout) {
		return Admission{}, err
	}
	if err != nil {
		return Admission{}, fmt.Errorf("seckill: admission script: %w", err)
	}
	switch r.Outcome {
	case lua.GrabAdmitted:
		now := time.Now()
		a.signal(queuedIn, now)
		a.told.note(queuedIn, userID, orderID, now)
		return Admission{OrderID: orderID, Status: StatusQueued}, nil
	case lua.GrabNotReady:
		return Admission{}, a.notReady(ctx, voucherID)
	case lua.GrabAlreadyBuyer:
		a.told.note(home, userID, r.Holder, time.Now())
		return Admission{OrderID: r.Holder, Status: StatusQueued}, ErrAlreadyPurchased
	}
	return Admission{}, refusalOf(r.Outcome)
}

// admit runs the admission script for one grab and returns its reply. With
// Options.Pipelines < 0 every grab is its own call; otherwise it joins a batch. If ctx ends
// while the batch is in flight the grab may still have been admitted: the caller is told
// ctx's error, and a retry with the same order id is answered "admitted" (the script is
// idempotent per order id).
func (a *admission) admit(ctx context.Context, voucherID, userID int, orderID int64) (lua.GrabReply, error) {
	req := lua.GrabRequest{User: userID, Order: orderID}
	switch {
	case a.batch != nil:
		return a.batch.admit(ctx, voucherID, req)
	case a.acks != nil:
		return a.acks.grabOne(ctx, voucherID, a.opts.clock(), req)
	}
	return grabAlone(ctx, a.rdb, a.keys.script(voucherID), a.opts.clock(), req)
}

// confirmBuckets has the replicas acknowledge an answer about a voucher split into k stock
// buckets that the home bucket's acknowledged call does not cover: a borrow (its steps ran in
// the home and the donor bucket), or an order already held, which a borrow may have queued
// in any bucket. Nil without replica acknowledgements, or for an answer that tells no order.
func (a *admission) confirmBuckets(ctx context.Context, voucherID, k, home, queuedIn int, o lua.GrabOutcome) error {
	if a.acks == nil || !tellsOrder(o) {
		return nil
	}
	sales := []int{home, queuedIn}
	if o == lua.GrabAlreadyBuyer {
		sales = sales[:0]
		for b := range k {
			sales = append(sales, bucketRef(voucherID, b, k))
		}
	}
	return a.acks.confirm(ctx, deadlineOf(ctx), sales...)
}

// notReady answers a grab on a voucher Redis does not know: ErrNoSuchVoucher if the database
// has no such seckill voucher, else ErrNotReady with a rebuild started in the background.
func (a *admission) notReady(ctx context.Context, voucherID int) error {
	now := time.Now()
	info, fresh := a.vouchs.get(voucherID, now)
	if !fresh {
		seckill, err := a.isSeckill(ctx, voucherID)
		if err != nil {
			return err
		}
		info = a.vouchs.setSeckill(voucherID, seckill, now)
	}
	if !info.seckill {
		return ErrNoSuchVoucher
	}
	if a.vouchs.startWarm(voucherID, now) {
		a.bg.goBackground(func(life context.Context) { a.rebuildLost(life, voucherID) })
	}
	return ErrNotReady
}

// isSeckill reads whether the database has a seckill voucher of this id; concurrent readers
// of one id share one read.
func (a *admission) isSeckill(ctx context.Context, voucherID int) (bool, error) {
	v, err := a.bg.shared(ctx, "info:"+strconv.Itoa(voucherID), infoReadTimeout, func(ctx context.Context) (any, error) {
		return a.store.isSeckill(ctx, voucherID)
	})
	if err != nil {
		return false, fmt.Errorf("seckill: reading voucher %d: %w", voucherID, err)
	}
	return v.(bool), nil
}

// rebuildLost rebuilds a voucher Redis lost, in the background; a failure is logged (the next
// grab starts another), except while the service closes.
func (a *admission) rebuildLost(life context.Context, voucherID int) {
	ctx, cancel := context.WithTimeout(life, backgroundWarmTimeout)
	defer cancel()
	err := a.warm(ctx, voucherID)
	if err != nil && !errors.Is(err, ErrNoSuchVoucher) && life.Err() == nil {
		a.log.Error("rebuilding a voucher's sale state", "voucher", voucherID, "err", err)
	}
}

// stock is the units Redis has left for admission, over all the voucher's buckets;
// ErrNotReady if it does not hold them.
func (a *admission) stock(ctx context.Context, voucherID int) (int, error) {
	k, err := a.counts.of(ctx, voucherID)
	if err != nil {
		return 0, err
	}
	if k == 1 {
		n, err := redisctx.Do(ctx, a.rdb, func(ctx context.Context) (int, error) {
			return a.rdb.Get(ctx, a.keys.sale(voucherID).Stock).Int()
		})
		if errors.Is(err, redis.Nil) {
			return 0, ErrNotReady
		}
		return n, err
	}
	return redisctx.Do(ctx, a.rdb, func(ctx context.Context) (int, error) {
		return bucketStock(ctx, a.rdb, a.keys, voucherID, k)
	})
}

// voucherInfos caches, for voucherInfoTTL, whether an id is a seckill voucher and when its
// last background rebuild started: a NOT_READY grab must tell "no such voucher" apart without
// a database read per request.
type voucherInfos struct {
	mu    sync.Mutex
	infos map[int]voucherInfo
}

type voucherInfo struct {
	seckill bool
	at      time.Time // when seckill was read
	warmAt  time.Time // when a rebuild last started
}

func (c *voucherInfos) get(voucherID int, now time.Time) (voucherInfo, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	info, ok := c.infos[voucherID]
	return info, ok && now.Sub(info.at) <= voucherInfoTTL
}

func (c *voucherInfos) setSeckill(voucherID int, seckill bool, now time.Time) voucherInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.infos == nil || len(c.infos) > maxVoucherInfos {
		c.infos = map[int]voucherInfo{}
	}
	info := c.infos[voucherID]
	info.seckill, info.at = seckill, now
	c.infos[voucherID] = info
	return info
}

// startWarm reports whether a rebuild of the voucher should start now (none started within
// voucherInfoTTL), and notes it.
func (c *voucherInfos) startWarm(voucherID int, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	info := c.infos[voucherID]
	if now.Sub(info.warmAt) <= voucherInfoTTL {
		return false
	}
	info.warmAt = now
	c.infos[voucherID] = info
	return true
}
