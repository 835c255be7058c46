package seckill

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/wait"
	"github.com/surgekit/surge/redisctx"
)

// reader is one of the consumer's readers: it takes a voucher with work from the ready queue
// and gives it a turn — its own pending entries first if an outage, a failed acknowledgement
// or a read given up on left some; claims and checks if the sweep asked; then up to
// turnBatches batches of new entries (non-blocking reads: the voucher was signalled) — and
// puts it back at the tail of the queue if more may be left. A reader acknowledges what it
// persisted in the background (acker), so that Redis and the database work at the same time.
type reader struct {
	c    *consumer
	ctx  context.Context
	acks *acker
	// prefetched is the next batch, read while the last full one was written; its entries
	// are pending here like any other.
	prefetched chan readResult
}

type readResult struct {
	streams []redis.XStream
	orders  [][]order // each stream's entries parsed (readable), off the writer's path
	err     error
}

// turnBatches is how many batches a reader persists for one voucher before it lets the other
// vouchers waiting have a turn. A voucher no other waits behind keeps its reader for up to
// turnBatchesAlone batches, the read of each next batch overlapping the write of the last
// (the last batch of a turn reads nothing ahead); then its turn ends all the same, so that
// what the sweep asked of it (claims, checks) waits no longer.
const (
	turnBatches      = 4
	turnBatchesAlone = 64
)

// While this process admits orders (one in the last surgeWindow), a reader reads new entries
// surgeBatchSize at a time (or BatchSize if smaller), not BatchSize: an XREADGROUP of 500
// entries holds Redis for about 2 ms, and the admission scripts queued behind it wait that
// long. Measured on 2 cores, admission with the consumer running: 1.85-1.87x redis-benchmark
// (median of 3 sales) with reads of 150, 1.53-1.59x with 500; a drain with no admission
// running reads 500 at a time, 0.72-0.74x raw INSERTs, against 0.44-0.48x with 150.
const (
	surgeWindow    = 100 * time.Millisecond
	surgeBatchSize = 150
)

// While this process admits orders, its consumer gives each voucher a turn at most every
// surgePace, reading what gathered meanwhile: the surge's admissions keep the CPU (and the
// database's, where it shares the machine) rather than sharing it with a stream of small
// batches, and the orders persist within about surgePace of their answer. Measured with
// bench seckill (2 cores, Redis and MariaDB on the machine, the median of 3 sales per run,
// builds interleaved): admission 2.21 and 2.77× redis-benchmark with a pace of 0.3 s (0.5 s:
// 2.60, 2.58; 1 s: 2.58, 2.72) against 1.25-2.40× unpaced. A consumer in a process that
// admits nothing (dedicated order workers) is never paced.
const surgePace = 300 * time.Millisecond

// paced parks vs (just taken, wanting only a read of new entries) until surgePace after its
// last turn began, if this process is surging and that is still to come; true if it did.
func (c *consumer) paced(vs *voucherState) bool {
	if !c.ready.surging() {
		return false
	}
	now := time.Now()
	if next := vs.lastTurn.Add(surgePace); now.Before(next) {
		c.ready.park(vs, next)
		return true
	}
	vs.lastTurn = now
	return false
}

// readCount is how many new entries one read asks for now.
func (c *consumer) readCount() int {
	if c.ready.surging() {
		return c.surgeReadCount()
	}
	return c.opts.batchSize
}

// surgeReadCount is how many new entries one read asks for during a surge.
func (c *consumer) surgeReadCount() int { return min(c.opts.batchSize, surgeBatchSize) }

// fullRead reports whether a read of new entries that returned n may have left more: n is as
// many as a read asks for during a surge or after it.
func (c *consumer) fullRead(n int) bool { return n >= c.surgeReadCount() }

// waitForRedis PINGs after redisPollMin, doubling up to redisPollMax, which also bounds each
// PING. A voucher whose retry of its own pending entries fails again is signalled again after
// minRetryPause, doubling up to maxRetryPause while it keeps failing; one whose consumer group
// cannot be recreated after groupRetryPause.
const (
	redisPollMin    = 50 * time.Millisecond
	redisPollMax    = 500 * time.Millisecond
	minRetryPause   = 50 * time.Millisecond
	maxRetryPause   = 2 * time.Second
	groupRetryPause = time.Second
)

func (c *consumer) newReader(ctx context.Context) *reader {
	return &reader{c: c, ctx: ctx}
}

// run serves vouchers until ctx ends.
func (r *reader) run() {
	r.acks = r.c.startAcker(r.ctx)
	defer r.acks.stop()
	for {
		vs, wants := r.c.ready.take()
		if vs == nil {
			return
		}
		if r.c.ready.troubled(vs) {
			vs.retryOwn = true
		}
		if wants == 0 && !vs.retryOwn && (r.c.paced(vs) || r.gangTurn(vs)) {
			continue
		}
		more := r.turn(vs, wants)
		if r.dropPrefetched(vs) {
			more = true
		}
		r.c.ready.release(vs, more && r.ctx.Err() == nil)
	}
}

// turn gives a voucher one turn; true if it has more work right away.
func (r *reader) turn(vs *voucherState, wants uint8) bool {
	if !r.c.waitForDatabase(r.ctx) {
		return false
	}
	if !r.recoverOwn(vs, wants) {
		return false // signalled again after a pause
	}
	if wants&wantClaim != 0 {
		r.claim(vs)
	}
	if wants&wantForget != 0 {
		r.c.forgetConsumers(r.ctx, vs.id)
	}
	for i := 0; ; i++ {
		streams, orders, err := r.next(vs)
		if r.ctx.Err() != nil {
			return false
		}
		if err != nil {
			return r.afterReadError(vs, err)
		}
		more := i < turnBatches-1 || i < turnBatchesAlone-1 && !r.c.ready.waiting()
		if !r.persistRead(vs, streams, orders, more) {
			// A batch not written for an outage is retried at once: the next turn waits for
			// the database, or for Redis and backs off.
			return vs.retryOwn
		}
		if !more {
			return true // a full turn: maybe more
		}
	}
}

// recoverOwn writes this consumer's own pending entries if an outage, a failed
// acknowledgement or a read given up on left some (or the sweep found some idle here). False
// if that failed again: the voucher is signalled again after a pause.
func (r *reader) recoverOwn(vs *voucherState, wants uint8) bool {
	if _, ok := r.c.orphans.LoadAndDelete(vs.stream); ok {
		vs.retryOwn = true // a read or claim given up on delivered entries here after all
	}
	if wants&wantOwn != 0 && time.Since(vs.lastOwn) >= ownIdle {
		vs.lastOwn = time.Now()
		vs.retryOwn = vs.retryOwn || r.c.hasIdleOwn(r.ctx, vs.stream)
	}
	vs.retryOwn = vs.retryOwn || wants&wantRetry != 0
	if !vs.retryOwn {
		return true
	}
	if vs.retryOwn = !r.c.retryOwn(r.ctx, vs.id); vs.retryOwn {
		// Failed again: wait for Redis (the database has its own wait), and back off in case
		// it answers PING but not the stream (a wrong-type key, say).
		r.c.waitForRedis(r.ctx)
		r.c.ready.later(vs.id, vs.retryPause)
		vs.retryPause = min(2*vs.retryPause, maxRetryPause)
		return false
	}
	vs.retryPause = minRetryPause
	return true
}

// claim claims entries left pending too long, at most every ClaimIdle/2 per voucher, going
// through the pending list in up to turnBatches pages.
func (r *reader) claim(vs *voucherState) {
	if time.Since(vs.lastClaim) < r.c.opts.claimIdle/2 {
		return
	}
	vs.lastClaim = time.Now()
	for range turnBatches {
		var o outage
		vs.claimCursor, o = r.c.claim(r.ctx, vs.id, vs.claimCursor)
		vs.retryOwn = vs.retryOwn || o != noOutage
		if vs.claimCursor == "0-0" || r.ctx.Err() != nil {
			return
		}
	}
}

// next is the prefetched batch, or a new read (which does not block), with its entries
// parsed.
func (r *reader) next(vs *voucherState) ([]redis.XStream, [][]order, error) {
	if r.prefetched == nil {
		return r.read(vs).values()
	}
	res := <-r.prefetched
	r.prefetched = nil
	return res.values()
}

// read reads a batch of new entries and parses them (readable).
func (r *reader) read(vs *voucherState) readResult {
	streams, err := r.c.readGroup(r.ctx, vs.stream, ">", r.c.readCount())
	orders := make([][]order, len(streams))
	for i, st := range streams {
		orders[i] = r.c.readable(vs.id, st.Messages) // 0.4-0.6 ms a batch of 500
	}
	return readResult{streams, orders, err}
}

func (res readResult) values() ([]redis.XStream, [][]order, error) {
	return res.streams, res.orders, res.err
}

// afterReadError handles a read that failed; true if the voucher has more work right away.
func (r *reader) afterReadError(vs *voucherState, err error) bool {
	switch {
	case errors.Is(err, redis.Nil):
		return false // nothing new
	case isNoGroup(err):
		// The stream or its group is gone (Redis lost state): recreate the group and go on.
		// A stream that is gone is not made again here: it would never expire (the sale may
		// have ended and its keys expired, an announcement of it heard late). The next
		// admission makes it, and the read after that its group.
		streams := r.c.opts.streams
		err := boundedErr(r.ctx, streams, func(ctx context.Context) error {
			return groupOnStream(ctx, streams, vs.stream, r.c.opts.group)
		})
		if errors.Is(err, errNoStream) {
			return false
		}
		if err != nil {
			r.c.log.Warn("recreating a consumer group", "voucher", vs.id, "err", err)
			r.c.ready.later(vs.id, groupRetryPause)
			return false
		}
		return true
	default:
		r.c.log.Warn("reading orders", "voucher", vs.id, "err", err)
		r.c.ready.trouble()
		r.c.waitForRedis(r.ctx)
		// Redis may have served the read and lost the reply (it restarted, the connection
		// broke): its entries are pending here then, unseen. Read them back now.
		vs.retryOwn = true
		return true
	}
}

// persistRead writes what a read returned (orders: its entries parsed) and, with prefetch
// (the turn has another batch to come), reads and parses the next batch while a full one is
// written. True if the batch was full and written: more may wait. The last batch of a turn
// reads nothing ahead: a batch read then would wait pending here for the voucher's next turn,
// which would read it again from the pending list — along with entries whose acknowledgement
// is still in flight, written twice.
func (r *reader) persistRead(vs *voucherState, streams []redis.XStream, orders [][]order, prefetch bool) bool {
	full := false
	for i, st := range streams {
		full = r.c.fullRead(len(st.Messages))
		if full && prefetch && r.prefetched == nil {
			r.prefetch(vs)
		}
		o := r.c.persistOrders(r.ctx, vs.id, orders[i], r.acks)
		if o == redisDown {
			r.c.ready.trouble()
		}
		if o != noOutage {
			vs.retryOwn = true
		}
	}
	if vs.retryOwn {
		// Not written now: a service is down; recoverOwn reads them again from the pending
		// list once it is back.
		r.dropPrefetched(vs)
		return false
	}
	return full
}

func (r *reader) prefetch(vs *voucherState) {
	r.prefetched = make(chan readResult, 1)
	go func(out chan<- readResult) { out <- r.read(vs) }(r.prefetched)
}

// dropPrefetched waits for a prefetch in flight and leaves its entries pending here: the
// voucher's next turn reads them again first (retryOwn), as after a crash. True if it held
// entries.
func (r *reader) dropPrefetched(vs *voucherState) bool {
	if r.prefetched == nil {
		return false
	}
	res := <-r.prefetched
	r.prefetched = nil
	for _, st := range res.streams {
		if len(st.Messages) > 0 {
			vs.retryOwn = true
			return true
		}
	}
	return false
}

// ownIdle is how long an entry may sit pending with this consumer unknown to it before the
// reader takes it up again. A read whose reply was lost leaves entries pending under this
// consumer's name with no error to say so when go-redis resends the read on a new connection
// (its retries), and the resent ">" read returns other entries. Checked (one XPENDING) when the
// sweep finds entries pending on a voucher, at most every ownIdle, instead of leaving them to
// a claim after ClaimIdle.
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
// ones; it does not block. A read given up on (ctx ended, or Redis hung past the
// bound) may still deliver entries once Redis answers: they are pending here then, and the
// reader takes them up again (orphaned) rather than leaving them to a claim after ClaimIdle.
func (c *consumer) readGroup(ctx context.Context, stream, id string, count int) ([]redis.XStream, error) {
	rdb := c.opts.streams
	ctx, cancel := context.WithTimeout(ctx, consumerCallTimeout)
	defer cancel()
	return redisctx.DoThen(ctx, rdb, func(ctx context.Context) ([]redis.XStream, error) {
		return rdb.XReadGroup(ctx, c.readArgs(stream, id, count)).Result()
	}, func(streams []redis.XStream, _ error) { c.orphaned(stream, streams) })
}

// readArgs reads a batch of stream's entries for this consumer from id on, without blocking.
func (c *consumer) readArgs(stream, id string, count int) *redis.XReadGroupArgs {
	return &redis.XReadGroupArgs{
		Group: c.opts.group, Consumer: c.opts.name, Streams: []string{stream, id},
		Count: int64(count), Block: -1,
	}
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
		streams, err := c.readGroup(ctx, stream, after, c.opts.batchSize)
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
		after = msgs[len(msgs)-1].ID
		// Each read re-delivers them: an entry failing here is given up on here after
		// MaxDeliveries, as a claim would (never idle for ClaimIdle, it would not be claimed).
		retry, err := c.triage(ctx, voucherID, msgs)
		if err != nil || len(retry) > 0 && c.persist(ctx, voucherID, retry, nil) != noOutage {
			return false
		}
		if len(msgs) < c.opts.batchSize {
			return true
		}
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
