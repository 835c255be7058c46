package seckill

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/lua"
	"github.com/surgekit/surge/redisctx"
)

// RunConsumer persists admitted orders until ctx ends: every second it lists the vouchers
// warmed into Redis and keeps one reader per voucher whose sale is on (or ended less than
// Linger ago) or whose stream still holds orders. Run it in every server process: the
// readers of all processes share each stream's consumer group. Every second it also rebuilds
// the vouchers whose state Redis holds from before a restart or failover (see saleState). It
// returns nil when ctx ends.
func (s *Service) RunConsumer(ctx context.Context) error {
	if s.opts.Strategy == StrategySync {
		<-ctx.Done()
		return nil
	}
	var (
		mu         sync.Mutex
		running    = map[int]bool{}
		rebuilding = map[int]bool{}
		wg         sync.WaitGroup
	)
	defer wg.Wait()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		live, err := s.liveVouchers(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("listing seckill vouchers", "err", err)
		}
		// once runs fn for voucher v in the background unless it runs already.
		once := func(busy map[int]bool, v int, fn func()) {
			mu.Lock()
			start := !busy[v]
			busy[v] = true
			mu.Unlock()
			if start {
				wg.Add(1)
				go func() {
					defer wg.Done()
					fn()
					mu.Lock()
					delete(busy, v)
					mu.Unlock()
				}()
			}
		}
		for _, v := range live {
			once(running, v, func() { s.readVoucher(ctx, v) })
			if s.stale(ctx, v) {
				once(rebuilding, v, func() { s.rebuildStale(ctx, v) })
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// stale reports whether Redis holds a voucher's sale state from before a restart or failover.
func (s *Service) stale(ctx context.Context, voucherID int) bool {
	state, err := bounded(ctx, s.rdb, func(ctx context.Context) ([2]bool, error) {
		ready, current, err := s.saleState(ctx, voucherID)
		return [2]bool{ready, current}, err
	})
	ready, current := state[0], state[1]
	return err == nil && ready && !current
}

// rebuildStale rebuilds a voucher whose sale state Redis may have brought back older than it
// was (see saleState); Warm checks again under the voucher's lock, so that of all the
// processes noticing the restart, one rebuilds.
func (s *Service) rebuildStale(ctx context.Context, voucherID int) {
	s.log.Warn("Redis restarted or failed over since the voucher's sale state was rebuilt: rebuilding it", "voucher", voucherID)
	if err := s.Warm(ctx, voucherID); err != nil && ctx.Err() == nil && !errors.Is(err, ErrNoSuchVoucher) {
		s.log.Error("rebuilding a voucher after a Redis restart", "voucher", voucherID, "err", err)
	}
}

// liveVouchers lists the registered vouchers that need a reader; vouchers whose sale ended
// more than Linger ago with an empty stream leave the registry.
func (s *Service) liveVouchers(ctx context.Context) ([]int, error) {
	zs, err := bounded(ctx, s.rdb, func(ctx context.Context) ([]redis.Z, error) {
		return s.rdb.ZRangeWithScores(ctx, s.registryKey(), 0, -1).Result()
	})
	if err != nil {
		return nil, err
	}
	cutoff := float64(s.opts.Clock().Add(-s.opts.Linger).UnixMilli())
	var live, old []int
	for _, z := range zs {
		id, err := strconv.Atoi(fmt.Sprint(z.Member))
		if err != nil {
			continue
		}
		if z.Score >= cutoff {
			live = append(live, id)
		} else {
			old = append(old, id)
		}
	}
	if len(old) == 0 {
		return live, nil
	}
	// Each length's own error is read below; the pipeline's is the first of them.
	lens, _ := bounded(ctx, s.rdb, func(ctx context.Context) ([]*redis.IntCmd, error) {
		lens := make([]*redis.IntCmd, len(old))
		_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, v := range old {
				lens[i] = p.XLen(ctx, s.keys(v).Orders)
			}
			return nil
		})
		return lens, err
	})
	for i, v := range old {
		if lens == nil {
			break // given up on
		}
		n, err := lens[i].Result()
		switch {
		case err == nil && n > 0:
			live = append(live, v)
		case err == nil || errors.Is(err, redis.Nil):
			_ = boundedErr(ctx, s.rdb, func(ctx context.Context) error { return s.rdb.ZRem(ctx, s.registryKey(), v).Err() })
		}
	}
	return live, nil
}

// readVoucher is one voucher's reader: it reads new entries in batches, and every ClaimIdle/2
// takes over entries other consumers (or this one, after a failure) left pending too long.
// After an outage (the database, or Redis restarting or loading) it retries its own pending
// entries as soon as the service answers again, rather than after ClaimIdle.
// It returns when ctx ends, or when the sale is long over and the stream is empty.
func (s *Service) readVoucher(ctx context.Context, voucherID int) {
	k := s.keys(voucherID)
	claimEvery := s.opts.ClaimIdle / 2
	block := min(s.opts.Block, claimEvery)
	var lastClaim time.Time
	claimCursor := "0-0"
	retryOwn := false // an outage left entries pending here
	retryPause := minRetryPause
	acks := s.startAcker(ctx, voucherID)
	defer acks.stop()
	// While a full batch is being written, the next one is read (no BLOCK), so Redis and the
	// database work at the same time; a prefetched batch is pending here like any other.
	var prefetched chan readResult
	defer func() {
		if prefetched != nil {
			<-prefetched // its entries stay pending here and are claimed later, as after a crash
		}
	}()
	for ctx.Err() == nil {
		if !s.waitForDatabase(ctx) {
			return
		}
		if _, ok := s.orphans.LoadAndDelete(k.Orders); ok {
			retryOwn = true // a read or claim given up on delivered entries here after all
		}
		if retryOwn = retryOwn || acks.failed.Swap(false); retryOwn {
			// Write this consumer's own pending entries now rather than after ClaimIdle
			// (reading from 0 returns this consumer's pending list).
			if retryOwn = !s.retryOwn(ctx, voucherID); retryOwn {
				// Failed again: wait for Redis (the database has its own wait above), and back
				// off in case it answers PING but not the stream (a wrong-type key, say).
				s.waitForRedis(ctx)
				sleep(ctx, retryPause)
				retryPause = min(2*retryPause, maxRetryPause)
				continue
			}
			retryPause = minRetryPause
		}
		if time.Since(lastClaim) >= claimEvery {
			lastClaim = time.Now()
			var o outage
			claimCursor, o = s.claim(ctx, voucherID, claimCursor)
			retryOwn = retryOwn || o != noOutage
			if claimCursor == "0-0" {
				s.forgetConsumers(ctx, voucherID)
			}
		}
		var streams []redis.XStream
		var err error
		if prefetched != nil {
			r := <-prefetched
			prefetched = nil
			streams, err = r.streams, r.err
		} else {
			streams, err = s.readGroup(ctx, k.Orders, ">", block)
		}
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, redis.Nil):
			if s.finished(ctx, voucherID) {
				return
			}
			continue
		case isNoGroup(err):
			// The stream or its group is gone (Redis lost state): recreate and go on.
			err := boundedErr(ctx, s.opts.StreamClient, func(ctx context.Context) error {
				return s.ensureGroup(ctx, s.opts.StreamClient, k.Orders)
			})
			if err != nil {
				s.log.Warn("recreating a consumer group", "voucher", voucherID, "err", err)
				sleep(ctx, time.Second)
			}
			continue
		case err != nil:
			s.log.Warn("reading orders", "voucher", voucherID, "err", err)
			s.waitForRedis(ctx)
			continue
		}
		for _, st := range streams {
			if len(st.Messages) == s.opts.BatchSize && prefetched == nil {
				prefetched = make(chan readResult, 1)
				go func(out chan<- readResult) {
					streams, err := s.readGroup(ctx, k.Orders, ">", -1)
					out <- readResult{streams, err}
				}(prefetched)
			}
			if s.persist(ctx, voucherID, st.Messages, acks) != noOutage {
				retryOwn = true
			}
		}
		if retryOwn && prefetched != nil {
			// Not written now: a service is down; retryOwn reads them again from the pending
			// list once it is back.
			<-prefetched
			prefetched = nil
		}
	}
}

type readResult struct {
	streams []redis.XStream
	err     error
}

// readGroup reads a batch for this consumer from id on: ">" new entries, "0" its own pending
// ones; block < 0 sends no BLOCK. A read given up on (ctx ended, or Redis hung past the
// bound) may still deliver entries once Redis answers: they are pending here then, and the
// reader takes them up again (orphaned) rather than leaving them to a claim after ClaimIdle.
func (s *Service) readGroup(ctx context.Context, stream, id string, block time.Duration) ([]redis.XStream, error) {
	rdb := s.opts.StreamClient
	ctx, cancel := context.WithTimeout(ctx, max(block, 0)+consumerCallTimeout)
	defer cancel()
	return redisctx.DoThen(ctx, rdb, func(ctx context.Context) ([]redis.XStream, error) {
		return rdb.XReadGroup(ctx, &redis.XReadGroupArgs{
			Group: s.opts.Group, Consumer: s.opts.Consumer, Streams: []string{stream, id},
			Count: int64(s.opts.BatchSize), Block: block,
		}).Result()
	}, func(streams []redis.XStream, _ error) { s.orphaned(stream, streams) })
}

// orphaned notes that a read or claim given up on delivered entries to this consumer.
func (s *Service) orphaned(stream string, streams []redis.XStream) {
	for _, st := range streams {
		if len(st.Messages) > 0 {
			s.orphans.Store(stream, true)
		}
	}
}

// consumerCallTimeout bounds each Redis call of the consumer beyond the time a blocking read
// waits by design, whatever the client's settings (package redisctx): a hung Redis holds a
// reader no longer than that, and a stopped consumer returns at once.
const consumerCallTimeout = 5 * time.Second

// bounded runs one Redis call of the consumer; it returns when ctx ends or at the latest
// consumerCallTimeout after it started.
func bounded[T any](ctx context.Context, rdb redis.UniversalClient, call func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, consumerCallTimeout)
	defer cancel()
	return redisctx.Do(ctx, rdb, call)
}

// boundedErr is bounded for a call that returns only an error.
func boundedErr(ctx context.Context, rdb redis.UniversalClient, call func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, consumerCallTimeout)
	defer cancel()
	return redisctx.Err(ctx, rdb, call)
}

// retryOwn persists the entries pending with this consumer, all of them, in batches. False
// if Redis or the database failed again: the caller tries again once they answer.
func (s *Service) retryOwn(ctx context.Context, voucherID int) bool {
	stream := s.keys(voucherID).Orders
	after := "0"
	for ctx.Err() == nil {
		streams, err := s.readGroup(ctx, stream, after, -1)
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
		if s.persist(ctx, voucherID, msgs, nil) != noOutage {
			return false
		}
		if len(msgs) < s.opts.BatchSize {
			return true
		}
		after = msgs[len(msgs)-1].ID
	}
	return false
}

// waitForRedis blocks until Redis answers (a loading Redis does not answer PING), polling
// often enough that a reader resumes within about a second of its return. False if ctx ended.
func (s *Service) waitForRedis(ctx context.Context) bool {
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, redisPollMax) {
		pctx, cancel := context.WithTimeout(ctx, redisPollMax)
		err := redisctx.Err(pctx, s.opts.StreamClient, func(ctx context.Context) error { return s.opts.StreamClient.Ping(ctx).Err() })
		cancel()
		if err == nil {
			return true
		}
		if !sleep(ctx, wait) {
			return false
		}
	}
}

// redisPollMax bounds the pause between two PINGs of waitForRedis, and each PING. A reader
// whose retry of its own pending entries fails again pauses minRetryPause, doubling up to
// maxRetryPause while it keeps failing.
const (
	redisPollMax  = 500 * time.Millisecond
	minRetryPause = 50 * time.Millisecond
	maxRetryPause = 2 * time.Second
)

// finished reports whether a voucher's reader can stop: its sale ended Linger ago or more and
// no order waits in its stream.
func (s *Service) finished(ctx context.Context, voucherID int) bool {
	end, err := bounded(ctx, s.rdb, func(ctx context.Context) (float64, error) {
		return s.rdb.ZScore(ctx, s.registryKey(), strconv.Itoa(voucherID)).Result()
	})
	switch {
	case errors.Is(err, redis.Nil):
		// Unregistered (deleted, or Redis lost it): nothing more to read once the stream is
		// empty; a rebuild registers it again and the supervisor starts a new reader.
	case err != nil || end >= float64(s.opts.Clock().Add(-s.opts.Linger).UnixMilli()):
		return false
	}
	n, err := bounded(ctx, s.rdb, func(ctx context.Context) (int64, error) {
		return s.rdb.XLen(ctx, s.keys(voucherID).Orders).Result()
	})
	return err == nil && n == 0
}

// claim takes over entries pending for longer than ClaimIdle (their consumer died or failed
// to persist them) and persists them, or dead-letters those delivered too often. It returns
// the XAUTOCLAIM cursor to continue from next time, and the outage that left claimed entries
// pending here, if one did.
func (s *Service) claim(ctx context.Context, voucherID int, cursor string) (string, outage) {
	k := s.keys(voucherID)
	type claimed struct {
		msgs []redis.XMessage
		next string
	}
	cctx, cancel := context.WithTimeout(ctx, consumerCallTimeout)
	c, err := redisctx.DoThen(cctx, s.rdb, func(ctx context.Context) (claimed, error) {
		msgs, next, err := s.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{
			Stream: k.Orders, Group: s.opts.Group, Consumer: s.opts.Consumer,
			MinIdle: s.opts.ClaimIdle, Start: cursor, Count: int64(s.opts.BatchSize),
		}).Result()
		return claimed{msgs, next}, err
	}, func(c claimed, _ error) { s.orphaned(k.Orders, []redis.XStream{{Messages: c.msgs}}) })
	cancel()
	msgs, next := c.msgs, c.next
	if err != nil {
		if ctx.Err() == nil && !strings.HasPrefix(err.Error(), "NOGROUP") {
			s.log.Warn("claiming pending orders", "voucher", voucherID, "err", err)
		}
		return "0-0", noOutage
	}
	if len(msgs) == 0 {
		return next, noOutage
	}
	s.m.claimed.Add(float64(len(msgs)))
	// XAUTOCLAIM counted this delivery; XPENDING tells how many there were.
	pending, err := bounded(ctx, s.rdb, func(ctx context.Context) ([]redis.XPendingExt, error) {
		return s.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{
			Stream: k.Orders, Group: s.opts.Group, Consumer: s.opts.Consumer,
			Start: msgs[0].ID, End: msgs[len(msgs)-1].ID, Count: int64(2 * len(msgs)),
		}).Result()
	})
	if err != nil {
		s.log.Warn("reading delivery counts", "voucher", voucherID, "err", err)
		return next, redisDown
	}
	deliveries := make(map[string]int64, len(pending))
	for _, p := range pending {
		deliveries[p.ID] = p.RetryCount
	}
	var retry []redis.XMessage
	for _, m := range msgs {
		// Deliveries alone do not condemn an entry: consumers that crash in a loop re-claim
		// healthy entries too. It must also have failed here, in this process.
		_, failedHere := s.lastErr.Load(m.ID)
		if n := deliveries[m.ID]; n > s.opts.MaxDeliveries && failedHere {
			s.deadLetter(ctx, voucherID, m, n)
		} else {
			retry = append(retry, m)
		}
	}
	if len(retry) > 0 {
		return next, s.persist(ctx, voucherID, retry, nil)
	}
	return next, noOutage
}

// forgetConsumers removes from the group the consumers of processes long gone: every restart
// joins under a new name, and without this the group's consumer list would only grow. Only
// consumers with nothing pending and idle for 100 x ClaimIdle go.
func (s *Service) forgetConsumers(ctx context.Context, voucherID int) {
	stream := s.keys(voucherID).Orders
	consumers, err := bounded(ctx, s.rdb, func(ctx context.Context) ([]redis.XInfoConsumer, error) {
		return s.rdb.XInfoConsumers(ctx, stream, s.opts.Group).Result()
	})
	if err != nil {
		return
	}
	for _, c := range consumers {
		if c.Name != s.opts.Consumer && c.Pending == 0 && c.Idle > 100*s.opts.ClaimIdle {
			_ = boundedErr(ctx, s.rdb, func(ctx context.Context) error {
				return s.rdb.XGroupDelConsumer(ctx, stream, s.opts.Group, c.Name).Err()
			})
		}
	}
}

// outage says which service a batch found unreachable.
type outage int

const (
	noOutage outage = iota
	databaseDown
	redisDown
)

// persist writes a batch of entries to the database and settles what was written (with acks,
// acknowledging it in the background). A batch that fails is retried entry by entry, so one
// bad entry does not hold up the others; entries that still fail stay pending, to be claimed
// again later and dead-lettered eventually. If the database or Redis is unreachable, nothing
// is retried: persist reports the outage, and the reader waits for the service and retries
// its own pending entries.
func (s *Service) persist(ctx context.Context, voucherID int, msgs []redis.XMessage, acks *acker) outage {
	orders := make([]order, 0, len(msgs))
	for _, m := range msgs {
		o, err := parseEntry(m)
		if err != nil {
			s.noteFailure(m.ID, err)
			s.log.Error("unreadable order entry left pending", "voucher", voucherID, "err", err)
			continue
		}
		orders = append(orders, o)
	}
	if len(orders) == 0 {
		return noOutage
	}
	start := time.Now()
	lctx := ctx
	if s.opts.Dialect != "mysql" {
		// MySQL serialises a batch commit with rebuilds and reconcile on the voucher's row
		// lock (see writeBatch); SQLite has no row locks, so the voucher's lock does it.
		l, err := s.lockVoucher(ctx, voucherID)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("persisting orders", "voucher", voucherID, "err", err)
			}
			return redisDown
		}
		defer l.Release(context.WithoutCancel(ctx))
		lctx = l.Context()
	}
	st, err := s.writeBatch(lctx, voucherID, orders)
	var nm *notMine
	if errors.As(err, &nm) {
		s.recordLostUntilDone(lctx, voucherID, nm.gone)
		if len(nm.kept) == 0 {
			return noOutage
		}
		orders = nm.kept
		st, err = s.writeBatch(lctx, voucherID, orders)
	}
	if err != nil {
		if o := s.outageOf(ctx, err); o != noOutage {
			s.log.Warn("orders stay queued: a service is unreachable", "voucher", voucherID, "err", err)
			return o
		}
		if st, err = s.writeEach(lctx, voucherID, orders); err != nil {
			s.log.Warn("orders stay queued: Redis is unreachable", "voucher", voucherID, "err", err)
			return redisDown
		}
	}
	s.m.rehomed.Add(float64(st.rehomed))
	s.m.superseded.Add(float64(st.superseded))
	if acks != nil {
		acks.add(st.done)
		st.done = nil
	}
	if err := s.settle(context.WithoutCancel(ctx), voucherID, st); err != nil {
		return redisDown
	}
	s.m.batches.Observe(time.Since(start).Seconds())
	return noOutage
}

// writeEach writes a failed batch's orders one by one; those that fail alone stay pending
// (and count a failure against their entry). It stops at an unreachable Redis, which is no
// fault of an entry.
func (s *Service) writeEach(ctx context.Context, voucherID int, orders []order) (settlement, error) {
	var st settlement
	var nm *notMine
	for _, o := range orders {
		one, err := s.writeBatch(ctx, voucherID, []order{o})
		switch {
		case errors.As(err, &nm):
			// No longer this consumer's: another consumer claimed it, or Redis lost it.
			s.recordLostUntilDone(ctx, voucherID, nm.gone)
		case errors.Is(err, errRedisUnavailable):
			return st, err
		case err != nil:
			s.noteFailure(o.entry, err)
			s.log.Error("order not persisted; it stays pending", "voucher", voucherID, "order", o.id, "err", err)
		default:
			st.add(one)
		}
	}
	return st, nil
}

// recordLostUntilDone records FAILED the orders whose entries Redis lost (see recordLost),
// trying again until it succeeds or ctx ends: only this consumer still knows them.
func (s *Service) recordLostUntilDone(ctx context.Context, voucherID int, gone []order) {
	for pause := minRetryPause; len(gone) > 0; pause = min(2*pause, maxRetryPause) {
		_, err := s.recordLost(ctx, voucherID, gone)
		if err == nil || ctx.Err() != nil {
			return
		}
		s.log.Error("recording orders lost with Redis's state; trying again", "voucher", voucherID, "orders", len(gone), "err", err)
		sleep(ctx, pause)
	}
}

// outageOf tells whether err comes from an unreachable service: Redis (as writeBatch wraps
// it), or the database (which is then pinged, and flagged down for the reader to wait on).
func (s *Service) outageOf(ctx context.Context, err error) outage {
	switch {
	case errors.Is(err, errRedisUnavailable):
		return redisDown
	case !s.databaseUp(ctx):
		s.dbDown.Store(true)
		return databaseDown
	}
	return noOutage
}

// acker acknowledges a reader's persisted entries in the background, in order, so that the
// XACK/XDEL of one batch overlaps the read and the insert of the next (Redis and the database
// work at the same time). Until then the entries are both in the database and pending here,
// the state a crash between commit and acknowledgement leaves: a rebuild settles such entries
// first (settlePersisted) and reconcile counts them as persisted, so nothing depends on the
// delay.
type acker struct {
	batches chan []order
	done    chan struct{}
	failed  atomic.Bool // an acknowledgement failed: the reader retries its own pending entries
}

func (s *Service) startAcker(ctx context.Context, voucherID int) *acker {
	a := &acker{batches: make(chan []order, 4), done: make(chan struct{})}
	ctx = context.WithoutCancel(ctx) // persisted entries are acknowledged even while stopping
	go func() {
		defer close(a.done)
		for done := range a.batches {
			if err := s.settle(ctx, voucherID, settlement{done: done}); err != nil {
				a.failed.Store(true)
			}
		}
	}()
	return a
}

func (a *acker) add(done []order) {
	if len(done) > 0 {
		a.batches <- done
	}
}

// stop acknowledges what is queued, then returns.
func (a *acker) stop() {
	close(a.batches)
	<-a.done
}

// settle brings Redis in line with how a batch's orders stand in the database: persisted
// entries are acknowledged and deleted, the buyer of an order standing under another id names
// that order, and an order recorded FAILED before is dead-lettered and its admission
// compensated. If Redis fails here, the entries stay pending and their redelivery settles them.
func (s *Service) settle(ctx context.Context, voucherID int, st settlement) error {
	k := s.scriptKeys(voucherID)
	var errs []error
	if len(st.done) > 0 {
		entries := make([]string, len(st.done))
		for i, o := range st.done {
			entries[i] = o.entry
			s.lastErr.Delete(o.entry)
		}
		err := boundedErr(ctx, s.rdb, func(ctx context.Context) error {
			_, err := lua.Ack(ctx, s.rdb, k, s.opts.Group, entries)
			return err
		})
		if err != nil {
			s.log.Warn("acknowledging persisted orders", "voucher", voucherID, "err", err)
			errs = append(errs, err)
		} else {
			s.m.persisted.Add(float64(len(st.done)))
		}
	}
	for _, r := range st.relinked {
		err := boundedErr(ctx, s.rdb, func(ctx context.Context) error {
			_, err := lua.RelinkEntry(ctx, s.rdb, k, s.opts.Group, lua.Relink{
				Entry: r.order.entry, User: strconv.Itoa(r.order.user), Order: strconv.FormatInt(r.order.id, 10),
				To: strconv.FormatInt(r.to, 10), Superseded: r.superseded,
			})
			return err
		})
		if err != nil {
			s.log.Warn("settling an order standing under another id", "voucher", voucherID, "order", r.order.id, "err", err)
			errs = append(errs, err)
		}
		s.lastErr.Delete(r.order.entry)
	}
	for _, o := range st.failed {
		// Recorded FAILED by an earlier delivery whose compensation did not run, or while Redis
		// had lost the entry (which came back with an older state). Its unit is not put back:
		// the cause may have been the database's stock (a rebuild recounts it anyway).
		err := s.fail(ctx, voucherID, o.entry, &o, false, "recorded FAILED by an earlier delivery", 0)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// deadLetter gives up on an entry: its order is recorded FAILED in the database (if it can
// be), the entry moves to the dead-letter stream and its admission is compensated. An order
// found standing as a live order was persisted after all and is settled as such.
func (s *Service) deadLetter(ctx context.Context, voucherID int, m redis.XMessage, deliveries int64) {
	reason := fmt.Sprintf("not persisted after %d deliveries", deliveries)
	var cause error
	if v, ok := s.lastErr.LoadAndDelete(m.ID); ok {
		cause = v.(error)
		reason += ": " + cause.Error()
	}
	o, err := parseEntry(m)
	if err != nil {
		_ = s.fail(ctx, voucherID, m.ID, nil, false, reason, deliveries)
		return
	}
	tr, err := s.recordFailed(ctx, voucherID, o)
	if err != nil {
		s.log.Error("could not record the FAILED order", "voucher", voucherID, "order", o.id, "err", err)
	}
	if tr.standing == standsOwn || tr.standing == standsElsewhere {
		// It reached the database after all: settle it as persisted.
		var st settlement
		st.place(o, tr)
		_ = s.settle(ctx, voucherID, st)
		return
	}
	_ = s.fail(ctx, voucherID, m.ID, &o, !errors.Is(cause, errStockGuard), reason, deliveries)
}

// fail moves an entry to the dead-letter stream and compensates its order's admission (o nil:
// the entry is unreadable), putting the unit back on sale if restore.
func (s *Service) fail(ctx context.Context, voucherID int, entry string, o *order, restore bool, reason string, deliveries int64) error {
	d := lua.DeadLetter{Entry: entry, Restore: restore, Reason: reason, Deliveries: deliveries, MaxLen: s.opts.DeadLetterMaxLen}
	if o != nil {
		d.User, d.Order = strconv.Itoa(o.user), strconv.FormatInt(o.id, 10)
	}
	settled, err := bounded(ctx, s.rdb, func(ctx context.Context) (bool, error) {
		return lua.FailEntry(ctx, s.rdb, s.scriptKeys(voucherID), s.opts.Group, d)
	})
	if err != nil {
		s.log.Error("dead-lettering an order entry", "voucher", voucherID, "entry", entry, "err", err)
		return err
	}
	s.lastErr.Delete(entry)
	if settled {
		s.m.dead.Inc()
		s.log.Error("order FAILED and compensated", "voucher", voucherID, "entry", entry, "order", d.Order,
			"user", d.User, "reason", reason)
	}
	return nil
}

func (s *Service) noteFailure(entry string, err error) { s.lastErr.Store(entry, err) }

// databaseUp pings the database.
func (s *Service) databaseUp(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := s.db.ExecContext(ctx, "SELECT 1")
	return err == nil
}

// waitForDatabase blocks while the database is unreachable, so that no entry is read or
// claimed (which would count deliveries against it) during an outage. False if ctx ended.
func (s *Service) waitForDatabase(ctx context.Context) bool {
	if !s.dbDown.Load() {
		return ctx.Err() == nil
	}
	for wait := 100 * time.Millisecond; !s.databaseUp(ctx); wait = min(2*wait, 2*time.Second) {
		if !sleep(ctx, wait) {
			return false
		}
	}
	s.dbDown.Store(false)
	return ctx.Err() == nil
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
