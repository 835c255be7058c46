package seckill

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/redisctx"
)

// claim takes over entries pending for longer than ClaimIdle (their consumer died or failed
// to persist them) and persists them, or dead-letters those delivered too often. It returns
// the XAUTOCLAIM cursor to continue from next time, and the outage that left claimed entries
// pending here, if one did.
func (c *consumer) claim(ctx context.Context, voucherID int, cursor string) (string, outage) {
	msgs, next, err := c.autoClaim(ctx, voucherID, cursor)
	if err != nil {
		if ctx.Err() == nil && !isNoGroup(err) {
			c.log.Warn("claiming pending orders", "voucher", voucherID, "err", err)
		}
		return "0-0", noOutage
	}
	if len(msgs) == 0 {
		return next, noOutage
	}
	c.m.claimed.Add(float64(len(msgs)))
	retry, err := c.triage(ctx, voucherID, msgs)
	if err != nil {
		return next, redisDown
	}
	if len(retry) > 0 {
		return next, c.persist(ctx, voucherID, retry, nil)
	}
	return next, noOutage
}

// triage dead-letters the entries delivered more than MaxDeliveries times that also failed
// here, and returns the others, to retry. Deliveries alone do not condemn an entry: consumers
// that crash in a loop re-deliver healthy entries too. It must also have failed here, in this
// process. An error (reading the delivery counts) leaves every entry pending.
func (c *consumer) triage(ctx context.Context, voucherID int, msgs []redis.XMessage) ([]redis.XMessage, error) {
	if !slices.ContainsFunc(msgs, func(m redis.XMessage) bool { return c.failures.failedHere(m.ID) }) {
		return msgs, nil
	}
	deliveries, err := c.deliveries(ctx, voucherID, msgs)
	if err != nil {
		c.log.Warn("reading delivery counts", "voucher", voucherID, "err", err)
		return nil, err
	}
	var retry []redis.XMessage
	for _, m := range msgs {
		if n := deliveries[m.ID]; n > c.opts.maxDeliveries && c.failures.failedHere(m.ID) {
			c.deadLetter(ctx, voucherID, m, n)
		} else {
			retry = append(retry, m)
		}
	}
	return retry, nil
}

// autoClaim runs XAUTOCLAIM for this consumer from cursor. Entries a claim given up on took
// anyway are orphaned: the reader takes them up.
func (c *consumer) autoClaim(ctx context.Context, voucherID int, cursor string) ([]redis.XMessage, string, error) {
	stream := c.keys.sale(voucherID).Orders
	type claimed struct {
		msgs []redis.XMessage
		next string
	}
	ctx, cancel := context.WithTimeout(ctx, consumerCallTimeout)
	defer cancel()
	got, err := redisctx.DoThen(ctx, c.rdb, func(ctx context.Context) (claimed, error) {
		msgs, next, err := c.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{
			Stream: stream, Group: c.opts.group, Consumer: c.opts.name,
			MinIdle: c.opts.claimIdle, Start: cursor, Count: int64(c.opts.batchSize),
		}).Result()
		return claimed{msgs, next}, err
	}, func(got claimed, _ error) { c.orphaned(stream, []redis.XStream{{Messages: got.msgs}}) })
	return got.msgs, got.next, err
}

// deliveries reads how often each entry pending here was delivered (the claim or read that
// returned it counted this time too).
func (c *consumer) deliveries(ctx context.Context, voucherID int, msgs []redis.XMessage) (map[string]int64, error) {
	pending, err := bounded(ctx, c.rdb, func(ctx context.Context) ([]redis.XPendingExt, error) {
		return c.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{
			Stream: c.keys.sale(voucherID).Orders, Group: c.opts.group, Consumer: c.opts.name,
			Start: msgs[0].ID, End: msgs[len(msgs)-1].ID, Count: int64(2 * len(msgs)),
		}).Result()
	})
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(pending))
	for _, p := range pending {
		out[p.ID] = p.RetryCount
	}
	return out, nil
}

// forgetConsumersIdle is how many ClaimIdle periods a consumer with nothing pending must be
// idle before forgetConsumers removes it: its process is long gone.
const forgetConsumersIdle = 100

// forgetConsumers removes from the group the consumers of processes long gone: every restart
// joins under a new name, and without this the group's consumer list would only grow.
func (c *consumer) forgetConsumers(ctx context.Context, voucherID int) {
	stream := c.keys.sale(voucherID).Orders
	consumers, err := bounded(ctx, c.rdb, func(ctx context.Context) ([]redis.XInfoConsumer, error) {
		return c.rdb.XInfoConsumers(ctx, stream, c.opts.group).Result()
	})
	if err != nil {
		c.failed(ctx, opListConsumers, err, "voucher", voucherID)
		return
	}
	for _, other := range consumers {
		if other.Name != c.opts.name && other.Pending == 0 && other.Idle > forgetConsumersIdle*c.opts.claimIdle {
			err := boundedErr(ctx, c.rdb, func(ctx context.Context) error {
				return c.rdb.XGroupDelConsumer(ctx, stream, c.opts.group, other.Name).Err()
			})
			if err != nil {
				c.failed(ctx, opForgetConsumer, err, "voucher", voucherID, "consumer", other.Name)
			}
		}
	}
}

// deadLetter gives up on an entry: its order is recorded FAILED in the database (if it can
// be), the entry moves to the dead-letter stream and its admission is compensated. An order
// found standing as a live order was persisted after all and is settled as such.
func (c *consumer) deadLetter(ctx context.Context, voucherID int, m redis.XMessage, deliveries int64) {
	reason := fmt.Sprintf("not persisted after %d deliveries", deliveries)
	cause := c.failures.take(m.ID)
	if cause != nil {
		reason += ": " + cause.Error()
	}
	o, err := parseEntry(m)
	if err != nil {
		_ = c.settler.fail(ctx, voucherID, m.ID, nil, false, reason, deliveries)
		return
	}
	c.failOrder(ctx, voucherID, o, !errors.Is(cause, errStockGuard), reason, deliveries)
}

// failOrder records an order given up on FAILED and dead-letters its entry, compensating its
// admission (the unit goes back on sale if restore). An order found standing as a live order
// was persisted after all and is settled as such.
func (c *consumer) failOrder(ctx context.Context, voucherID int, o order, restore bool, reason string, deliveries int64) {
	tr, err := c.store.recordFailed(ctx, voucherID, o)
	if err != nil {
		c.log.Error("could not record the FAILED order", "voucher", voucherID, "order", o.id, "err", err)
	}
	if tr.standing == standsOwn || tr.standing == standsElsewhere {
		// It reached the database after all: settle it as persisted.
		var st settlement
		st.place(o, tr)
		_ = c.settler.settle(ctx, voucherID, st)
		return
	}
	_ = c.settler.fail(ctx, voucherID, o.entry, &o, restore, reason, deliveries)
}
