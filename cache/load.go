package cache

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/lua"
)

// GetOrLoad returns id's value from the cache, loading it with load on a miss.
//
// Across every process sharing the Redis, one caller per key runs load: callers in one
// process share a singleflight, and processes compete for a Redis lease (SET NX PX with an
// owner token). The others wait for the value to land and are woken by a pub/sub event, not
// a poll. The shared load runs under its own deadline (LoadTimeout), detached from the first
// caller: a caller whose context ends gets ctx.Err(), the others still get the value.
//
// A loader's ErrNotFound is cached as an absence for AbsentTTL. If Redis fails, the loader
// is called directly, at most OutageLoads at once per process (ErrOverloaded beyond that).
func (c *Cache[V]) GetOrLoad(ctx context.Context, id string, load Loader[V]) (V, error) {
	var zero V
	if c.rejectedByFilter(ctx, id) {
		return zero, ErrNotFound
	}
	if v, err, ok := c.fromLocal(id); ok {
		return v, err
	}
	since := c.l1.begin(id)
	b, err := c.rdb.Get(ctx, c.Key(id)).Bytes()
	switch {
	case err == nil:
		if e, derr := decodeEntry(b); derr == nil {
			c.rebuildIfStale(id, e, load)
			return c.remember(id, e, since)
		}
	case errors.Is(err, redis.Nil):
	case ctx.Err() != nil:
		return zero, ctx.Err()
	default:
		return c.outageLoad(ctx, id, load, err)
	}
	c.stats.misses.Inc()
	return c.shared(ctx, id, load)
}

type loaded[V any] struct {
	v   V
	err error
}

// shared runs one load per id in this process and hands its result to every caller.
func (c *Cache[V]) shared(ctx context.Context, id string, load Loader[V]) (V, error) {
	ch := c.group.DoChan(id, func() (any, error) {
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.opts.LoadTimeout)
		defer cancel()
		// DoChan re-panics in a goroutine of its own, where no caller could recover: every
		// panic must end here, as an error for all the callers sharing the load.
		v, err := guard(func() (V, error) { return c.leaseAndLoad(lctx, id, load) })
		return loaded[V]{v, err}, nil
	})
	select {
	case r := <-ch:
		l := r.Val.(loaded[V])
		return l.v, l.err
	case <-ctx.Done():
		var zero V
		return zero, ctx.Err()
	}
}

// leaseAndLoad loops until the value is cached by someone or this caller holds the lease
// and loads it.
func (c *Cache[V]) leaseAndLoad(ctx context.Context, id string, load Loader[V]) (V, error) {
	var zero V
	keys := []string{c.Key(id), c.leaseKey(id)}
	token := newToken()
	var waitStart time.Time
	for {
		woken := c.events.wait(id)
		res, err := lua.CacheLease.Run(ctx, c.rdb, keys, token, ms(c.opts.LeaseTTL), "1").Slice()
		if err != nil {
			if ctx.Err() != nil {
				return zero, ctx.Err()
			}
			return c.outageLoad(ctx, id, load, err)
		}
		switch res[0].(int64) {
		case 1: // cached meanwhile
			if !waitStart.IsZero() {
				c.stats.waited(time.Since(waitStart))
			}
			e, derr := decodeEntry([]byte(res[1].(string)))
			if derr != nil { // not ours (or damaged): drop it and load afresh
				if err := c.runSet(ctx, id, nil, 0); err != nil {
					return zero, err
				}
				continue
			}
			return c.value(e)
		case 2: // lease taken: this caller loads
			return c.loadWithLease(ctx, id, load, token)
		}
		// Another process is loading. Wait for its event, or at most its remaining lease
		// (the event can be lost if the subscription reconnects), then try again.
		if waitStart.IsZero() {
			waitStart = time.Now()
		}
		wait := time.Duration(res[1].(int64)) * time.Millisecond
		if wait <= 0 {
			wait = time.Millisecond
		}
		t := time.NewTimer(wait)
		select {
		case <-woken.ch:
			if woken.op == 'n' {
				// The loader found no such id and, with a Bloom filter, cached nothing:
				// take its answer rather than load again in every process.
				t.Stop()
				c.stats.waited(time.Since(waitStart))
				return zero, ErrNotFound
			}
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return zero, ctx.Err()
		}
		t.Stop()
	}
}

// loadWithLease calls the loader while holding the lease and writes the result back through
// the fill script, which refuses if a write revoked the lease meanwhile (stale set).
func (c *Cache[V]) loadWithLease(ctx context.Context, id string, load Loader[V], token string) (V, error) {
	c.stats.loads.Inc()
	v, err := guard(func() (V, error) { return load(ctx, id) })
	absent := errors.Is(err, ErrNotFound)
	if err != nil && !absent {
		c.stats.loadErrors.Inc()
		// Hand the lease back so a waiter can retry now rather than after the lease TTL.
		c.release(ctx, id, token, "r:")
		return v, err
	}
	if absent && c.opts.Filter != nil && !c.opts.AbsentWithFilter {
		// A Bloom false positive: answer absent without writing a key, and tell the waiters
		// so they do not each load it again.
		c.release(ctx, id, token, "n:")
		return v, ErrNotFound
	}
	b, px, encErr := c.encode(v, absent)
	if encErr != nil {
		c.release(ctx, id, token, "r:")
		return v, encErr
	}
	ok, ferr := lua.CacheFill.Run(context.WithoutCancel(ctx), c.rdb, []string{c.Key(id), c.leaseKey(id)},
		token, b, px, c.channel(), "f:"+id).Int()
	if ferr == nil && ok == 0 {
		c.stats.staleSetsRejected.Inc()
	}
	// The caller gets what it loaded either way: it was current when read. A failed
	// write-back only means the next reader loads again.
	if absent {
		return v, ErrNotFound
	}
	return v, nil
}

// outageLoad answers from the loader when Redis fails, bounded so that a Redis outage
// cannot turn into an unbounded stampede on the database.
func (c *Cache[V]) outageLoad(ctx context.Context, id string, load Loader[V], cause error) (V, error) {
	var zero V
	if c.outage == nil {
		return zero, fmt.Errorf("cache: redis: %w", cause)
	}
	if !c.outage.TryAcquire(1) {
		return zero, fmt.Errorf("%w: %v", ErrOverloaded, cause)
	}
	defer c.outage.Release(1)
	c.stats.outageLoads.Inc()
	c.stats.loads.Inc()
	v, err := guard(func() (V, error) { return load(ctx, id) })
	if err != nil && !errors.Is(err, ErrNotFound) {
		c.stats.loadErrors.Inc()
	}
	return v, err
}

// release gives id's lease back without writing, announcing why with the event kind op
// ("r:" the load failed, "n:" no such id and nothing cached). It runs even if ctx ended.
func (c *Cache[V]) release(ctx context.Context, id, token, op string) {
	_ = lua.CacheRelease.Run(context.WithoutCancel(ctx), c.rdb, []string{c.leaseKey(id)}, token, c.channel(), op+id).Err()
}

// rebuildIfStale queues a background rebuild when e is a logically expired value, which is
// served meanwhile (and counted as such).
func (c *Cache[V]) rebuildIfStale(id string, e entry, load Loader[V]) {
	if c.opts.Mode == ModeLogical && time.Now().After(e.expireAt) {
		c.stats.staleServed.Inc()
		c.rebuild.submit(id, func() { c.refresh(id, load) })
	}
}
