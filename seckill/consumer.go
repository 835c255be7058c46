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

	"github.com/surgekit/surge/lua"
)

// consumerOptions are the Options the order consumer uses.
type consumerOptions struct {
	streams       redis.UniversalClient // the readers' reads: a pool of their own
	group, name   string                // consumer group, and this process's consumer in it
	batchSize     int
	readers       int // reader goroutines of the process
	sweepRate     int // the sweep's commands per second
	claimIdle     time.Duration
	maxDeliveries int64
	linger        time.Duration
	clock         func() time.Time
}

// consumer persists admitted orders. A fixed set of readers (reader.go) serves the vouchers
// with work from a fair queue (ready.go): admission signals each voucher it admits an order
// for, in process and without a Redis command; processes that admit without a consumer
// announce their vouchers on a channel (announce.go); and a slow sweep (sweep.go) finds what
// nothing signalled (an announcement lost, entries of dead consumers to claim). So its Redis
// connections and goroutines are bounded by Readers whatever the number of live vouchers, and
// an idle voucher costs one command per sweep cycle. Readers write
// batches through the order store (persist.go), take over what dead consumers left pending
// and give up on what keeps failing (claim.go). Redis is brought in line by the settler.
type consumer struct {
	opts    consumerOptions
	rdb     redis.UniversalClient
	keys    keyspace
	store   batchStore
	settler *settler
	m       *metrics
	log     *slog.Logger
	ready   *readyQueue
	// announce names the channel on which processes without a consumer announce new orders
	// (announce.go), and this process's id in it.
	announce *announcer
	// rebuildStale rebuilds a voucher whose sale state Redis holds from before a restart or
	// failover (recovery.go).
	rebuildStale func(ctx context.Context, voucherID int)
	// stale reports whether Redis holds a voucher's sale state from before a restart; ok
	// false if it could not tell.
	stale func(ctx context.Context, voucherID int) (stale, ok bool)

	failures *failures
	orphans  sync.Map    // stream -> a read given up on delivered entries here
	dbDown   atomic.Bool // the last persist found the database unreachable
}

// supervisorTick is how often run lists the live vouchers and looks for a Redis restart.
const supervisorTick = time.Second

// signal tells the consumer that voucher v has new entries in its stream.
func (c *consumer) signal(v int) { c.ready.signal(v, 0) }

// run persists admitted orders until ctx ends: it starts the readers and the sweep, and every
// second lists the vouchers warmed into Redis (those whose sale is on or ended less than
// Linger ago, or whose stream still holds orders) and, after Redis restarted or failed over
// (its run_id changed), rebuilds each voucher whose state Redis holds from before.
func (c *consumer) run(ctx context.Context) {
	c.ready.reopen()
	var wg sync.WaitGroup
	for range c.opts.readers {
		wg.Add(1)
		go func() { defer wg.Done(); c.newReader(ctx).run() }()
	}
	sw := newSweeper(c)
	wg.Add(2)
	go func() { defer wg.Done(); sw.run(ctx) }()
	go func() { defer wg.Done(); c.listen(ctx, sw) }()
	defer wg.Wait()
	defer c.ready.close()

	rebuilds := newOnce()
	defer rebuilds.wait()
	restarts := &restartWatch{rdb: c.rdb}
	suspects := map[int]bool{} // vouchers to check for staleness until found current
	suspectAll := false        // a restart seen: every live voucher is a suspect, once listed
	tick := time.NewTicker(supervisorTick)
	defer tick.Stop()
	for {
		live, err := c.liveVouchers(ctx)
		if err != nil {
			c.failed(ctx, opListVouchers, err)
		} else {
			c.ready.setLive(live)
			sw.setLive(live)
		}
		// A restart is often seen in a pass whose listing failed (CLUSTERDOWN right after a
		// promotion): its vouchers are suspects as soon as a listing succeeds.
		suspectAll = restarts.changed(ctx) || suspectAll
		if suspectAll && err == nil {
			for _, v := range live {
				suspects[v] = true
			}
			suspectAll = false
		}
		for v := range suspects {
			stale, ok := c.stale(ctx, v)
			switch {
			case stale:
				rebuilds.start(v, func() { c.rebuildStale(ctx, v) })
			case ok:
				delete(suspects, v)
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

// liveVouchers lists the registered vouchers the consumer sweeps; vouchers whose sale ended
// more than Linger ago with an empty stream are retired and leave the registry.
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

// retiredKeep is how long a finished sale's keys (meta, stock, buyers, stream) outlive its
// retirement: grabs meanwhile are still answered ENDED from meta rather than rebuilding it.
// Its dead letters keep their own expiry (a week after the end; each is a FAILED row too).
const retiredKeep = 2 * time.Minute

// oldWithOrders keeps the vouchers whose sale ended Linger ago and whose stream still holds
// orders; the others are retired (lua.RetireSale: their keys expire within retiredKeep) and
// leave the registry.
func (c *consumer) oldWithOrders(ctx context.Context, old []int) []int {
	var keep []int
	for _, v := range old {
		r, err := bounded(ctx, c.rdb, func(ctx context.Context) (lua.Retirement, error) {
			return lua.RetireSale(ctx, c.rdb, c.keys.script(v), retiredKeep)
		})
		if err == nil && r == lua.SaleNotFound {
			r, err = c.emptyStream(ctx, v)
		}
		switch {
		case err != nil:
			c.failed(ctx, opUnregister, err, "voucher", v)
			keep = append(keep, v)
		case r == lua.SaleNotOver:
			keep = append(keep, v)
		default:
			err := boundedErr(ctx, c.rdb, func(ctx context.Context) error { return c.rdb.ZRem(ctx, c.keys.registry(), v).Err() })
			if err != nil { // it stays registered: the next pass tries again
				c.failed(ctx, opUnregister, err, "voucher", v)
			}
		}
	}
	return keep
}

// emptyStream tells, for a voucher Redis holds no sale state of, whether its stream still
// holds orders (SaleNotOver) or not (SaleRetired).
func (c *consumer) emptyStream(ctx context.Context, v int) (lua.Retirement, error) {
	n, err := bounded(ctx, c.rdb, func(ctx context.Context) (int64, error) {
		return c.rdb.XLen(ctx, c.keys.sale(v).Orders).Result()
	})
	switch {
	case errors.Is(err, redis.Nil) || err == nil && n == 0:
		return lua.SaleRetired, nil
	case err != nil:
		return 0, err
	}
	return lua.SaleNotOver, nil
}

// failed logs and counts an error of background work, which has no caller to return it to;
// an error because ctx ended is no failure.
func (c *consumer) failed(ctx context.Context, op string, err error, args ...any) {
	if ctx.Err() != nil {
		return
	}
	c.m.background.WithLabelValues(op).Inc()
	c.ready.trouble()
	c.log.Warn("seckill consumer: "+op+" failed; retried on a later pass", append(args, "err", err)...)
}

// lingerCutoff is the end of sale before which a voucher leaves the live list (once its
// stream is empty).
func (c *consumer) lingerCutoff() time.Time { return c.opts.clock().Add(-c.opts.linger) }
