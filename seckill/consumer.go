package seckill

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// consumerOptions are the Options the order consumer uses.
type consumerOptions struct {
	streams          redis.UniversalClient // blocking reads: a pool of their own
	group, name      string                // consumer group, and this process's consumer in it
	batchSize        int
	block, claimIdle time.Duration
	maxDeliveries    int64
	linger           time.Duration
	clock            func() time.Time
}

// consumer persists admitted orders: one reader per live voucher stream (reader.go) writes
// batches through the order store (persist.go), takes over what dead consumers left pending
// and gives up on what keeps failing (claim.go). Redis is brought in line by the settler.
type consumer struct {
	opts    consumerOptions
	rdb     redis.UniversalClient
	keys    keyspace
	store   batchStore
	settler *settler
	m       *metrics
	log     *slog.Logger
	// rebuildStale rebuilds a voucher whose sale state Redis holds from before a restart or
	// failover (recovery.go).
	rebuildStale func(ctx context.Context, voucherID int)
	// stale reports whether Redis holds a voucher's sale state from before a restart.
	stale func(ctx context.Context, voucherID int) bool

	failures *failures
	orphans  sync.Map    // stream -> a read given up on delivered entries here
	dbDown   atomic.Bool // the last persist found the database unreachable
}

// supervisorTick is how often run lists the live vouchers and checks them for staleness.
const supervisorTick = time.Second

// run persists admitted orders until ctx ends: every second it lists the vouchers warmed into
// Redis and keeps one reader per voucher whose sale is on (or ended less than Linger ago) or
// whose stream still holds orders, and one rebuild per voucher whose state Redis holds from
// before a restart or failover.
func (c *consumer) run(ctx context.Context) {
	readers, rebuilds := newOnce(), newOnce()
	defer readers.wait()
	defer rebuilds.wait()
	tick := time.NewTicker(supervisorTick)
	defer tick.Stop()
	for {
		live, err := c.liveVouchers(ctx)
		if err != nil {
			c.failed(ctx, opListVouchers, err)
		}
		for _, v := range live {
			readers.start(v, func() { c.newReader(ctx, v).run() })
			if c.stale(ctx, v) {
				rebuilds.start(v, func() { c.rebuildStale(ctx, v) })
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// once runs at most one goroutine per voucher at a time.
type once struct {
	mu   sync.Mutex
	busy map[int]bool
	wg   sync.WaitGroup
}

func newOnce() *once { return &once{busy: map[int]bool{}} }

// start runs fn for voucher v in the background unless it runs already.
func (o *once) start(v int, fn func()) {
	o.mu.Lock()
	running := o.busy[v]
	o.busy[v] = true
	o.mu.Unlock()
	if running {
		return
	}
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		fn()
		o.mu.Lock()
		delete(o.busy, v)
		o.mu.Unlock()
	}()
}

func (o *once) wait() { o.wg.Wait() }

// liveVouchers lists the registered vouchers that need a reader; vouchers whose sale ended
// more than Linger ago with an empty stream leave the registry.
func (c *consumer) liveVouchers(ctx context.Context) ([]int, error) {
	zs, err := bounded(ctx, c.rdb, func(ctx context.Context) ([]redis.Z, error) {
		return c.rdb.ZRangeWithScores(ctx, c.keys.registry(), 0, -1).Result()
	})
	if err != nil {
		return nil, err
	}
	cutoff := float64(c.lingerCutoff().UnixMilli())
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
	return append(live, c.oldWithOrders(ctx, old)...), nil
}

// oldWithOrders keeps the vouchers whose sale ended Linger ago and whose stream still holds
// orders; those with an empty stream leave the registry.
func (c *consumer) oldWithOrders(ctx context.Context, old []int) []int {
	if len(old) == 0 {
		return nil
	}
	// Each length's own error is read below; the pipeline's is the first of them.
	lens, _ := bounded(ctx, c.rdb, func(ctx context.Context) ([]*redis.IntCmd, error) {
		lens := make([]*redis.IntCmd, len(old))
		_, err := c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, v := range old {
				lens[i] = p.XLen(ctx, c.keys.sale(v).Orders)
			}
			return nil
		})
		return lens, err
	})
	if lens == nil {
		return nil // given up on
	}
	var keep []int
	for i, v := range old {
		n, err := lens[i].Result()
		switch {
		case err == nil && n > 0:
			keep = append(keep, v)
		case err == nil || errors.Is(err, redis.Nil):
			err := boundedErr(ctx, c.rdb, func(ctx context.Context) error { return c.rdb.ZRem(ctx, c.keys.registry(), v).Err() })
			if err != nil { // it stays registered: the next pass tries again
				c.failed(ctx, opUnregister, err, "voucher", v)
			}
		}
	}
	return keep
}

// failed logs and counts an error of background work, which has no caller to return it to;
// an error because ctx ended is no failure.
func (c *consumer) failed(ctx context.Context, op string, err error, args ...any) {
	if ctx.Err() != nil {
		return
	}
	c.m.background.WithLabelValues(op).Inc()
	c.log.Warn("seckill consumer: "+op+" failed; retried on a later pass", append(args, "err", err)...)
}

// lingerCutoff is the end of sale before which a voucher's reader may stop.
func (c *consumer) lingerCutoff() time.Time { return c.opts.clock().Add(-c.opts.linger) }

// finished reports whether a voucher's reader can stop: its sale ended Linger ago or more and
// no order waits in its stream.
func (c *consumer) finished(ctx context.Context, voucherID int) bool {
	end, err := bounded(ctx, c.rdb, func(ctx context.Context) (float64, error) {
		return c.rdb.ZScore(ctx, c.keys.registry(), strconv.Itoa(voucherID)).Result()
	})
	switch {
	case errors.Is(err, redis.Nil):
		// Unregistered (deleted, or Redis lost it): nothing more to read once the stream is
		// empty; a rebuild registers it again and the supervisor starts a new reader.
	case err != nil || end >= float64(c.lingerCutoff().UnixMilli()):
		return false
	}
	n, err := bounded(ctx, c.rdb, func(ctx context.Context) (int64, error) {
		return c.rdb.XLen(ctx, c.keys.sale(voucherID).Orders).Result()
	})
	return err == nil && n == 0
}
