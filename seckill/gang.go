package seckill

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/redisctx"
)

// gangSize is how many quiet vouchers a reader serves in one turn: with many sales live at
// once each voucher has a few new orders at a time, and a transaction per voucher makes the
// database's commits, not the orders, the consumer's limit. A gang is read in one pipeline
// (one command per stream: each voucher's keys are in a slot of their own) and written in one
// transaction.
const gangSize = 16

// gangTurn gives vs and the quiet vouchers waiting behind it (up to gangSize in all) one
// turn together; false if there were none to join it, and vs is the caller's still.
func (r *reader) gangTurn(vs *voucherState) bool {
	if !r.c.store.canGang() {
		return false
	}
	more := r.c.ready.takeQuiet(gangSize - 1)
	if len(more) == 0 {
		return false
	}
	gang := append([]*voucherState{vs}, more...)
	again := make([]bool, len(gang)) // back in the queue at once
	defer func() {
		for i, g := range gang {
			r.c.ready.release(g, again[i] && r.ctx.Err() == nil)
		}
	}()
	if !r.c.waitForDatabase(r.ctx) {
		return true
	}
	reads := r.c.readGang(r.ctx, gang)
	var batches []gangBatch
	var members []int // gang index of each batch
	for i, g := range gang {
		if _, ok := r.c.orphans.LoadAndDelete(g.stream); ok {
			g.retryOwn = true // a read given up on delivered entries here after all
		}
		switch err := reads[i].err; {
		case g.retryOwn:
			again[i] = true // its own pending entries first, in a turn of its own
			continue
		case err != nil:
			again[i] = r.afterReadError(g, err)
			continue
		}
		msgs := reads[i].msgs
		again[i] = len(msgs) == r.c.opts.batchSize
		if orders := r.c.readable(g.id, msgs); len(orders) > 0 {
			batches = append(batches, gangBatch{voucherID: g.id, orders: orders})
			members = append(members, i)
			if len(orders) < len(msgs) {
				reads[i].msgs = readableOnly(msgs, orders) // the unreadable are noted once
			}
		}
	}
	if len(batches) == 0 {
		return true
	}
	start := time.Now()
	mine := func(ctx context.Context) error { return r.c.allMine(ctx, batches) }
	sts, err := r.c.store.writeGang(r.ctx, batches, mine)
	if err == nil {
		r.c.m.gangs.WithLabelValues("committed").Inc()
		for j, b := range batches {
			if r.c.settleWritten(r.ctx, b.voucherID, sts[j], r.acks, start) != noOutage {
				gang[members[j]].retryOwn = true
				again[members[j]] = true
			}
		}
		return true
	}
	r.c.m.gangs.WithLabelValues("split").Inc()
	if r.ctx.Err() == nil {
		r.c.log.Debug("gang write split voucher by voucher", "vouchers", len(batches), "err", err)
	}
	// Written one by one, as a turn of its own would: each failure is sorted out there (an
	// entry no longer this consumer's, a bad entry, an outage).
	down := false
	for j, b := range batches {
		g := gang[members[j]]
		if down || r.c.persist(r.ctx, b.voucherID, reads[members[j]].msgs, r.acks) != noOutage {
			down = true // the others would find the same outage: they wait with it
			g.retryOwn = true
			again[members[j]] = true
		}
	}
	return true
}

// gangRead is what a gang's read returned for one voucher.
type gangRead struct {
	msgs []redis.XMessage
	err  error // redis.Nil: nothing new
}

// readGang reads each voucher's new entries, in one pipeline; like readGroup, it does not
// block, and a read given up on that delivers entries later marks them orphaned.
func (c *consumer) readGang(ctx context.Context, gang []*voucherState) []gangRead {
	rdb := c.opts.streams
	ctx, cancel := context.WithTimeout(ctx, consumerCallTimeout)
	defer cancel()
	read := func(ctx context.Context) ([]*redis.XStreamSliceCmd, error) {
		cmds := make([]*redis.XStreamSliceCmd, len(gang))
		_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, g := range gang {
				cmds[i] = p.XReadGroup(ctx, c.readArgs(g.stream, ">", c.opts.batchSize))
			}
			return nil
		})
		return cmds, err
	}
	late := func(cmds []*redis.XStreamSliceCmd, _ error) {
		for i, cmd := range cmds {
			if cmd != nil {
				streams, _ := cmd.Result()
				c.orphaned(gang[i].stream, streams)
			}
		}
	}
	cmds, err := redisctx.DoThen(ctx, rdb, read, late)
	out := make([]gangRead, len(gang))
	for i := range gang {
		switch {
		case cmds == nil:
			out[i].err = gangErr(err, ctx)
		default:
			streams, err := cmds[i].Result()
			out[i].err = err
			for _, st := range streams {
				out[i].msgs = append(out[i].msgs, st.Messages...)
			}
		}
	}
	return out
}

// gangErr is the error of a pipeline that gave no replies: its own, or ctx's.
func gangErr(err error, ctx context.Context) error {
	if err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return errors.New("seckill: no reply to a gang read")
}

// allMine checks that every order of the batches is still pending with this consumer (one
// XPENDING per stream, in one pipeline); errGangSplit if one is not: the voucher's own write
// sorts it out (stillMine).
func (c *consumer) allMine(ctx context.Context, batches []gangBatch) error {
	cmds, err := bounded(ctx, c.rdb, func(ctx context.Context) ([]*redis.XPendingExtCmd, error) {
		cmds := make([]*redis.XPendingExtCmd, len(batches))
		_, err := c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, b := range batches {
				cmds[i] = p.XPendingExt(ctx, c.pendingHere(b.voucherID, b.orders))
			}
			return nil
		})
		return cmds, err
	})
	if cmds == nil || err != nil && !errors.Is(err, redis.Nil) && !replyError(err) {
		return fmt.Errorf("%w: checking pending orders: %w", errRedisUnavailable, err)
	}
	for i, b := range batches {
		pending, err := cmds[i].Result()
		if err != nil || len(pending) != len(b.orders) {
			return errGangSplit
		}
		for j, p := range pending {
			if p.ID != b.orders[j].entry {
				return errGangSplit
			}
		}
	}
	return nil
}

// readableOnly is the messages of the orders parsed from them.
func readableOnly(msgs []redis.XMessage, orders []order) []redis.XMessage {
	ok := make(map[string]bool, len(orders))
	for _, o := range orders {
		ok[o.entry] = true
	}
	return slices.DeleteFunc(slices.Clone(msgs), func(m redis.XMessage) bool { return !ok[m.ID] })
}
