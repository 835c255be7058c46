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
// for, in process and without a Redis command, and a slow sweep (sweep.go) finds what no
// signal announces here (orders admitted by other processes, entries of dead consumers to
// claim). So its Redis connections and goroutines are bounded by Readers whatever the number
// of live vouchers, and an idle voucher costs one command per sweep cycle. Readers write
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
	wg.Add(1)
	go func() { defer wg.Done(); sw.run(ctx) }()
	defer wg.Wait()
	defer c.ready.close()

	rebuilds := newOnce()
	defer rebuilds.wait()
	restarts := &restartWatch{rdb: c.rdb}
	suspects := map[int]bool{} // vouchers to check for staleness until found current
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
		if restarts.changed(ctx) {
			for _, v := range live {
				suspects[v] = true
			}
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

// lingerCutoff is the end of sale before which a voucher leaves the live list (once its
// stream is empty).
func (c *consumer) lingerCutoff() time.Time { return c.opts.clock().Add(-c.opts.linger) }
