package seckill

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/wait"
)

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
func (c *consumer) persist(ctx context.Context, voucherID int, msgs []redis.XMessage, acks *acker) outage {
	return c.persistOrders(ctx, voucherID, c.readable(voucherID, msgs), acks)
}

// persistOrders is persist for entries parsed already (readable).
func (c *consumer) persistOrders(ctx context.Context, voucherID int, orders []order, acks *acker) outage {
	if len(orders) == 0 {
		return noOutage
	}
	start := time.Now()
	gctx, release, err := c.store.guardCommits(ctx, voucherID)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("persisting orders", "voucher", voucherID, "err", err)
		}
		return redisDown
	}
	defer release()
	st, o := c.write(ctx, gctx, voucherID, orders)
	if st == nil {
		return o
	}
	return c.settleWritten(ctx, voucherID, *st, acks, start)
}

// settleWritten settles a batch the database now holds (with acks, acknowledging its
// persisted entries in the background) and counts it, written since start.
func (c *consumer) settleWritten(ctx context.Context, voucherID int, st settlement, acks *acker, start time.Time) outage {
	c.m.rehomed.Add(float64(st.rehomed))
	c.m.superseded.Add(float64(st.superseded))
	if acks != nil {
		acks.add(voucherID, st.done)
		st.done = nil
	}
	if err := c.settler.settle(context.WithoutCancel(ctx), voucherID, st); err != nil {
		return redisDown
	}
	c.m.batches.Observe(time.Since(start).Seconds())
	return noOutage
}

// readable parses a batch's entries; an unreadable one stays pending (and counts a failure).
func (c *consumer) readable(voucherID int, msgs []redis.XMessage) []order {
	orders := make([]order, 0, len(msgs))
	for _, m := range msgs {
		o, err := parseEntry(m)
		if err != nil {
			c.failures.note(m.ID, err)
			c.log.Error("unreadable order entry left pending", "voucher", voucherID, "err", err)
			continue
		}
		orders = append(orders, o)
	}
	return orders
}

// write writes a batch in one transaction (gctx: under what guardCommits asked), leaving
// out the entries that stopped being this consumer's, or entry by entry if that fails for
// another reason than an outage. It returns what to settle, nil if nothing (then the outage
// that stopped it, if one did).
func (c *consumer) write(ctx, gctx context.Context, voucherID int, orders []order) (*settlement, outage) {
	st, err := c.writeBatch(gctx, voucherID, orders)
	var nm *notMine
	if errors.As(err, &nm) {
		c.recordLostUntilDone(gctx, voucherID, nm.gone)
		if len(nm.kept) == 0 {
			return nil, noOutage
		}
		orders = nm.kept
		st, err = c.writeBatch(gctx, voucherID, orders)
	}
	if err == nil {
		return &st, noOutage
	}
	if o := c.outageOf(ctx, err); o != noOutage {
		c.log.Warn("orders stay queued: a service is unreachable", "voucher", voucherID, "err", err)
		return nil, o
	}
	if st, err = c.writeEach(gctx, voucherID, orders); err != nil {
		c.log.Warn("orders stay queued: Redis is unreachable", "voucher", voucherID, "err", err)
		return nil, redisDown
	}
	return &st, noOutage
}

// writeBatch writes orders in one transaction that commits only if their entries are still
// pending with this consumer.
func (c *consumer) writeBatch(ctx context.Context, voucherID int, orders []order) (settlement, error) {
	return c.store.writeBatch(ctx, voucherID, orders, func(ctx context.Context) error {
		return c.stillMine(ctx, voucherID, orders)
	})
}

// writeEach writes a failed batch's orders one by one; those that fail alone stay pending
// (and count a failure against their entry). It stops at an unreachable Redis, which is no
// fault of an entry.
func (c *consumer) writeEach(ctx context.Context, voucherID int, orders []order) (settlement, error) {
	var st settlement
	var nm *notMine
	for _, o := range orders {
		one, err := c.writeBatch(ctx, voucherID, []order{o})
		switch {
		case errors.As(err, &nm):
			// No longer this consumer's: another consumer claimed it, or Redis lost it.
			c.recordLostUntilDone(ctx, voucherID, nm.gone)
		case errors.Is(err, errRedisUnavailable):
			return st, err
		case errors.Is(err, errStockGuard):
			// Final: holding the voucher's row lock, the database had no unit left for it
			// (Redis admitted beyond the database's stock). No retry changes that; the
			// order fails now rather than after MaxDeliveries claims.
			n, _ := c.deliveries(ctx, voucherID, []redis.XMessage{{ID: o.entry}}) // 0 if unread
			c.failOrder(ctx, voucherID, o, false, err.Error(), n[o.entry])
		case err != nil:
			c.failures.note(o.entry, err)
			c.log.Error("order not persisted; it stays pending", "voucher", voucherID, "order", o.id, "err", err)
		default:
			st.add(one)
		}
	}
	return st, nil
}

// recordLostUntilDone records FAILED the orders whose entries Redis lost (see
// sqlStore.recordLost), trying again until it succeeds or ctx ends: only this consumer still
// knows them.
func (c *consumer) recordLostUntilDone(ctx context.Context, voucherID int, gone []order) {
	for pause := minRetryPause; len(gone) > 0; pause = min(2*pause, maxRetryPause) {
		recorded, err := c.store.recordLost(ctx, voucherID, gone, func(ctx context.Context) ([]bool, error) {
			return c.goneFromStream(ctx, voucherID, gone)
		})
		if err == nil {
			c.m.lost.Add(float64(recorded))
		}
		if err == nil || ctx.Err() != nil {
			return
		}
		c.log.Error("recording orders lost with Redis's state; trying again", "voucher", voucherID, "orders", len(gone), "err", err)
		wait.Sleep(ctx, pause)
	}
}

// outageOf tells whether err comes from an unreachable service: Redis (as writeBatch wraps
// it), or the database (which is then pinged, and flagged down for the reader to wait on).
func (c *consumer) outageOf(ctx context.Context, err error) outage {
	switch {
	case errors.Is(err, errRedisUnavailable):
		return redisDown
	case !c.databaseUp(ctx):
		c.dbDown.Store(true)
		return databaseDown
	}
	return noOutage
}

// stillMine checks that the orders' entries are still pending with this consumer. If some
// are not, it returns *notMine: the ones still pending here, and those gone from the stream.
// A failure to ask Redis is errRedisUnavailable.
func (c *consumer) stillMine(ctx context.Context, voucherID int, orders []order) error {
	pending, err := bounded(ctx, c.rdb, func(ctx context.Context) ([]redis.XPendingExt, error) {
		return c.rdb.XPendingExt(ctx, c.pendingHere(voucherID, orders)).Result()
	})
	if err != nil && !isNoGroup(err) {
		return fmt.Errorf("%w: checking pending orders: %w", errRedisUnavailable, err)
	}
	mine := make(map[string]bool, len(pending))
	for _, p := range pending {
		mine[p.ID] = true
	}
	nm := &notMine{}
	var others []order
	for _, o := range orders {
		if mine[o.entry] {
			nm.kept = append(nm.kept, o)
		} else {
			others = append(others, o)
		}
	}
	if len(others) == 0 {
		return nil
	}
	gone, err := c.goneFromStream(ctx, voucherID, others)
	if err != nil {
		return err
	}
	for i, o := range others {
		if gone[i] {
			nm.gone = append(nm.gone, o)
		} else {
			c.log.Warn("order entry claimed by another consumer; skipped here", "voucher", voucherID, "order", o.id, "entry", o.entry)
		}
	}
	return nm
}

// pendingHere asks for the entries of orders (a voucher's, in stream order) pending with this
// consumer.
func (c *consumer) pendingHere(voucherID int, orders []order) *redis.XPendingExtArgs {
	return &redis.XPendingExtArgs{
		Stream: c.keys.sale(voucherID).Orders, Group: c.opts.group, Consumer: c.opts.name,
		Start: orders[0].entry, End: orders[len(orders)-1].entry, Count: int64(len(orders)),
	}
}

// goneFromStream reports, for each order, whether the stream no longer holds its entry (the
// same entry id with the same order: after a flush, a new entry can get an old one's id).
func (c *consumer) goneFromStream(ctx context.Context, voucherID int, orders []order) ([]bool, error) {
	stream := c.keys.sale(voucherID).Orders
	cmds, err := bounded(ctx, c.rdb, func(ctx context.Context) ([]*redis.XMessageSliceCmd, error) {
		cmds := make([]*redis.XMessageSliceCmd, len(orders))
		_, err := c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, o := range orders {
				cmds[i] = p.XRangeN(ctx, stream, o.entry, o.entry, 1)
			}
			return nil
		})
		return cmds, err
	})
	if cmds == nil || err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("%w: reading the stream: %w", errRedisUnavailable, err)
	}
	out := make([]bool, len(orders))
	for i, o := range orders {
		msgs, _ := cmds[i].Result()
		out[i] = len(msgs) != 1 || !o.carries(msgs[0])
	}
	return out, nil
}

// acker acknowledges a reader's persisted entries in the background, in order, so that the
// XACK/XDEL of one batch overlaps the read and the insert of the next (Redis and the database
// work at the same time). Until then the entries are both in the database and pending here,
// the state a crash between commit and acknowledgement leaves: a rebuild settles such entries
// first (settlePersisted) and reconcile counts them as persisted, so nothing depends on the
// delay. A failed acknowledgement signals the voucher to write its pending entries again.
type acker struct {
	batches chan ackBatch
	done    chan struct{}
}

type ackBatch struct {
	voucherID int
	done      []order
}

// ackerQueue is how many persisted batches may wait for their acknowledgement.
const ackerQueue = 4

func (c *consumer) startAcker(ctx context.Context) *acker {
	a := &acker{batches: make(chan ackBatch, ackerQueue), done: make(chan struct{})}
	ctx = context.WithoutCancel(ctx) // persisted entries are acknowledged even while stopping
	go func() {
		defer close(a.done)
		for b := range a.batches {
			if err := c.settler.settle(ctx, b.voucherID, settlement{done: b.done}); err != nil {
				c.ready.signal(b.voucherID, wantRetry)
			}
		}
	}()
	return a
}

func (a *acker) add(voucherID int, done []order) {
	if len(done) > 0 {
		a.batches <- ackBatch{voucherID, done}
	}
}

// stop acknowledges what is queued, then returns.
func (a *acker) stop() {
	close(a.batches)
	<-a.done
}
