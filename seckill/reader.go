package seckill

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/wait"
	"github.com/surgekit/surge/redisctx"
)

// reader is one voucher's reader: it reads new entries in batches, and every ClaimIdle/2
// takes over entries other consumers (or this one, after a failure) left pending too long.
// After an outage (the database, or Redis restarting or loading) it retries its own pending
// entries as soon as the service answers again, rather than after ClaimIdle.
type reader struct {
	c         *consumer
	ctx       context.Context
	voucherID int
	stream    string
	acks      *acker

	claimEvery, block time.Duration
	lastClaim         time.Time
	lastOwnCheck      time.Time // last look for own entries pending unseen (ownIdle)
	claimCursor       string    // XAUTOCLAIM's cursor
	// retryOwn: an outage left entries pending here, to be written before new ones.
	retryOwn   bool
	retryPause time.Duration // backs off while retrying them keeps failing
	// prefetched is the next batch, read while the last full one was written, so that Redis
	// and the database work at the same time; its entries are pending here like any other.
	prefetched chan readResult
}

type readResult struct {
	streams []redis.XStream
	err     error
}

// waitForRedis PINGs after redisPollMin, doubling up to redisPollMax, which also bounds each
// PING. A reader whose retry of its own pending entries fails again pauses minRetryPause,
// doubling up to maxRetryPause while it keeps failing; one that cannot recreate its consumer
// group pauses groupRetryPause.
const (
	redisPollMin    = 50 * time.Millisecond
	redisPollMax    = 500 * time.Millisecond
	minRetryPause   = 50 * time.Millisecond
	maxRetryPause   = 2 * time.Second
	groupRetryPause = time.Second
)

func (c *consumer) newReader(ctx context.Context, voucherID int) *reader {
	claimEvery := c.opts.claimIdle / 2
	return &reader{
		c: c, ctx: ctx, voucherID: voucherID, stream: c.keys.sale(voucherID).Orders,
		claimEvery: claimEvery, block: min(c.opts.block, claimEvery), claimCursor: "0-0", retryPause: minRetryPause,
	}
}

// run reads until ctx ends, or until the sale is long over and the stream is empty.
func (r *reader) run() {
	r.acks = r.c.startAcker(r.ctx, r.voucherID)
	defer r.acks.stop()
	defer r.dropPrefetched() // its entries stay pending here and are claimed later, as after a crash
	for r.ctx.Err() == nil {
		if !r.c.waitForDatabase(r.ctx) {
			return
		}
		if !r.recoverOwn() {
			continue
		}
		r.claimIfDue()
		streams, err := r.next()
		if r.ctx.Err() != nil {
			return
		}
		if err != nil {
			if r.afterReadError(err) {
				return
			}
			continue
		}
		r.persistRead(streams)
	}
}

// recoverOwn writes this consumer's own pending entries if an outage, a failed
// acknowledgement or a read given up on left some. False if that failed again (after waiting
// for Redis and backing off): the loop starts over.
func (r *reader) recoverOwn() bool {
	if _, ok := r.c.orphans.LoadAndDelete(r.stream); ok {
		r.retryOwn = true // a read or claim given up on delivered entries here after all
	}
	if time.Since(r.lastOwnCheck) >= ownIdle {
		r.lastOwnCheck = time.Now()
		r.retryOwn = r.retryOwn || r.c.hasIdleOwn(r.ctx, r.stream)
	}
	r.retryOwn = r.retryOwn || r.acks.failed.Swap(false)
	if !r.retryOwn {
		return true
	}
	if r.retryOwn = !r.c.retryOwn(r.ctx, r.voucherID); r.retryOwn {
		// Failed again: wait for Redis (the database has its own wait), and back off in case
		// it answers PING but not the stream (a wrong-type key, say).
		r.c.waitForRedis(r.ctx)
		wait.Sleep(r.ctx, r.retryPause)
		r.retryPause = min(2*r.retryPause, maxRetryPause)
		return false
	}
	r.retryPause = minRetryPause
	return true
}

// claimIfDue claims entries left pending too long, every claimEvery.
func (r *reader) claimIfDue() {
	if time.Since(r.lastClaim) < r.claimEvery {
		return
	}
	r.lastClaim = time.Now()
	var o outage
	r.claimCursor, o = r.c.claim(r.ctx, r.voucherID, r.claimCursor)
	r.retryOwn = r.retryOwn || o != noOutage
	if r.claimCursor == "0-0" {
		r.c.forgetConsumers(r.ctx, r.voucherID)
	}
}

// next is the prefetched batch, or a new read that blocks up to block.
func (r *reader) next() ([]redis.XStream, error) {
	if r.prefetched == nil {
		return r.c.readGroup(r.ctx, r.stream, ">", r.block)
	}
	res := <-r.prefetched
	r.prefetched = nil
	return res.streams, res.err
}

// afterReadError handles a read that failed; true if the reader is done.
func (r *reader) afterReadError(err error) bool {
	switch {
	case errors.Is(err, redis.Nil):
		return r.c.finished(r.ctx, r.voucherID)
	case isNoGroup(err):
		// The stream or its group is gone (Redis lost state): recreate and go on.
		streams := r.c.opts.streams
		err := boundedErr(r.ctx, streams, func(ctx context.Context) error {
			return ensureGroup(ctx, streams, r.stream, r.c.opts.group)
		})
		if err != nil {
			r.c.log.Warn("recreating a consumer group", "voucher", r.voucherID, "err", err)
			wait.Sleep(r.ctx, groupRetryPause)
		}
	default:
		r.c.log.Warn("reading orders", "voucher", r.voucherID, "err", err)
		r.c.waitForRedis(r.ctx)
		// Redis may have served the read and lost the reply (it restarted, the connection
		// broke): its entries are pending here then, unseen. Read them back now.
		r.retryOwn = true
	}
	return false
}

// persistRead writes what a read returned, prefetching the next batch while a full one is
// written.
func (r *reader) persistRead(streams []redis.XStream) {
	for _, st := range streams {
		if len(st.Messages) == r.c.opts.batchSize && r.prefetched == nil {
			r.prefetch()
		}
		if r.c.persist(r.ctx, r.voucherID, st.Messages, r.acks) != noOutage {
			r.retryOwn = true
		}
	}
	if r.retryOwn {
		// Not written now: a service is down; recoverOwn reads them again from the pending
		// list once it is back.
		r.dropPrefetched()
	}
}

func (r *reader) prefetch() {
	r.prefetched = make(chan readResult, 1)
	go func(out chan<- readResult) {
		streams, err := r.c.readGroup(r.ctx, r.stream, ">", -1)
		out <- readResult{streams, err}
	}(r.prefetched)
}

// dropPrefetched waits for a prefetch in flight and leaves its entries pending.
func (r *reader) dropPrefetched() {
	if r.prefetched != nil {
		<-r.prefetched
		r.prefetched = nil
	}
}

// ownIdle is how long an entry may sit pending with this consumer unknown to it before the
// reader takes it up again. A read whose reply was lost leaves entries pending under this
// consumer's name with no error to say so when go-redis resends the read on a new connection
// (its retries), and the resent ">" read returns other entries. Checked every ownIdle, one
// XPENDING per voucher, instead of leaving them to a claim after ClaimIdle.
const ownIdle = 2 * time.Second

// hasIdleOwn reports whether entries have been pending with this consumer for ownIdle or more.
func (c *consumer) hasIdleOwn(ctx context.Context, stream string) bool {
	rdb := c.opts.streams
	pending, err := bounded(ctx, rdb, func(ctx context.Context) ([]redis.XPendingExt, error) {
		return rdb.XPendingExt(ctx, &redis.XPendingExtArgs{
			Stream: stream, Group: c.opts.group, Consumer: c.opts.name,
			Idle: ownIdle, Start: "-", End: "+", Count: 1,
		}).Result()
	})
	return err == nil && len(pending) > 0
}

// readGroup reads a batch for this consumer from id on: ">" new entries, "0" its own pending
// ones; block < 0 sends no BLOCK. A read given up on (ctx ended, or Redis hung past the
// bound) may still deliver entries once Redis answers: they are pending here then, and the
// reader takes them up again (orphaned) rather than leaving them to a claim after ClaimIdle.
func (c *consumer) readGroup(ctx context.Context, stream, id string, block time.Duration) ([]redis.XStream, error) {
	rdb := c.opts.streams
	ctx, cancel := context.WithTimeout(ctx, max(block, 0)+consumerCallTimeout)
	defer cancel()
	return redisctx.DoThen(ctx, rdb, func(ctx context.Context) ([]redis.XStream, error) {
		return rdb.XReadGroup(ctx, &redis.XReadGroupArgs{
			Group: c.opts.group, Consumer: c.opts.name, Streams: []string{stream, id},
			Count: int64(c.opts.batchSize), Block: block,
		}).Result()
	}, func(streams []redis.XStream, _ error) { c.orphaned(stream, streams) })
}

// orphaned notes that a read or claim given up on delivered entries to this consumer.
func (c *consumer) orphaned(stream string, streams []redis.XStream) {
	for _, st := range streams {
		if len(st.Messages) > 0 {
			c.orphans.Store(stream, true)
		}
	}
}

// retryOwn persists the entries pending with this consumer, all of them, in batches. False
// if Redis or the database failed again: the caller tries again once they answer.
func (c *consumer) retryOwn(ctx context.Context, voucherID int) bool {
	stream := c.keys.sale(voucherID).Orders
	after := "0"
	for ctx.Err() == nil {
		streams, err := c.readGroup(ctx, stream, after, -1)
		switch {
		case isNoGroup(err) || errors.Is(err, redis.Nil):
			return true // nothing pending: the group is gone, or empty
		case err != nil:
			return false
		}
		msgs := streams[0].Messages
		if len(msgs) == 0 {
			return true
		}
		if c.persist(ctx, voucherID, msgs, nil) != noOutage {
			return false
		}
		if len(msgs) < c.opts.batchSize {
			return true
		}
		after = msgs[len(msgs)-1].ID
	}
	return false
}

// waitForRedis blocks until Redis answers (a loading Redis does not answer PING), polling
// often enough that a reader resumes within about a second of its return. False if ctx ended.
func (c *consumer) waitForRedis(ctx context.Context) bool {
	rdb := c.opts.streams
	for pause := redisPollMin; ; pause = min(2*pause, redisPollMax) {
		pctx, cancel := context.WithTimeout(ctx, redisPollMax)
		err := redisctx.Err(pctx, rdb, func(ctx context.Context) error { return rdb.Ping(ctx).Err() })
		cancel()
		if err == nil {
			return true
		}
		if !wait.Sleep(ctx, pause) {
			return false
		}
	}
}

// waitForDatabase pings after databasePollMin, doubling up to databasePollMax, which also
// bounds each ping.
const (
	databasePollMin = 100 * time.Millisecond
	databasePollMax = 2 * time.Second
)

// databaseUp pings the database.
func (c *consumer) databaseUp(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, databasePollMax)
	defer cancel()
	return c.store.ping(ctx) == nil
}

// waitForDatabase blocks while the database is unreachable, so that no entry is read or
// claimed (which would count deliveries against it) during an outage. False if ctx ended.
func (c *consumer) waitForDatabase(ctx context.Context) bool {
	if !c.dbDown.Load() {
		return ctx.Err() == nil
	}
	for pause := databasePollMin; !c.databaseUp(ctx); pause = min(2*pause, databasePollMax) {
		if !wait.Sleep(ctx, pause) {
			return false
		}
	}
	c.dbDown.Store(false)
	return ctx.Err() == nil
}
