package cache

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"

	"github.com/surgekit/surge/lua"
)

// GetOrLoad returns id's value from the cache, loading it with load on a miss. It reads L1,
// then Redis; the Bloom filter, if any, is asked only on a miss, before the load.
//
// Across every process sharing the Redis, one caller per key runs load: callers in one
// process share a singleflight, and processes compete for a Redis lease (SET NX PX with an
// owner token). The others wait for the value to land and are woken by a pub/sub event, not
// a poll. The shared load runs under its own deadline (LoadTimeout), detached from the first
// caller: a caller whose context ends gets ctx.Err(), the others still get the value. A
// loader that panics fails the callers sharing its load with a *PanicError.
//
// A loader's ErrNotFound is cached as an absence for AbsentTTL. If Redis fails (or the
// breaker is open), an L1 copy past its TTL is served if it is within MaxStale, else the
// loader is called directly, at most OutageLoads at once per process and once per id
// (ErrOverloaded beyond that).
func (c *Cache[V]) GetOrLoad(ctx context.Context, id string, load Loader[V]) (V, error) {
	var zero V
	if v, err, ok := c.fromLocal(id); ok {
		return v, err
	}
	since := c.l1.begin(id)
	b, err := c.get(ctx, id)
	switch {
	case err == nil:
		v, err := c.fromRedis(ctx, id, b, since, load)
		if !errors.Is(err, errUndecodable) {
			return v, err
		}
	case errors.Is(err, redis.Nil):
	case ctx.Err() != nil:
		return zero, ctx.Err()
	default:
		return c.fallback(ctx, id, load, err)
	}
	if c.rejectedByFilter(ctx, id) {
		return zero, ErrNotFound
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
	return c.share(ctx, &c.group, id, func(lctx context.Context) (V, error) { return c.leaseAndLoad(lctx, id, load) })
}

// share runs fn once per key of group at a time, under its own LoadTimeout detached from the
// callers, and returns its result to each caller (or the caller's ctx error if that ends first).
func (c *Cache[V]) share(ctx context.Context, group *singleflight.Group, key string, fn func(ctx context.Context) (V, error)) (V, error) {
	ch := group.DoChan(key, func() (any, error) {
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.opts.LoadTimeout)
		defer cancel()
		// DoChan re-panics in a goroutine of its own, where no caller could recover: every
		// panic must end here, as an error for all the callers sharing the load.
		v, err := guard(func() (V, error) { return fn(lctx) })
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
	token := rand.Text()
	var waitStart time.Time
	for {
		if v, err, done := c.leaseOrWait(ctx, id, load, token, &waitStart); done {
			return v, err
		}
	}
}

// leaseOrWait reads the value or takes the lease and loads. If another process holds the
// lease it waits for that load's event (or at most its remaining lease: the event can be lost
// if the subscription reconnects) and reports not done, to be called again.
func (c *Cache[V]) leaseOrWait(ctx context.Context, id string, load Loader[V], token string, waitStart *time.Time) (v V, err error, done bool) {
	woken := c.events.wait(id)
	defer c.events.forget(id, woken)
	res, err := c.lease(ctx, id, lua.CacheLease(c.Key(id), c.leaseKey(id), token, c.opts.LeaseTTL), token)
	if err != nil {
		if ctx.Err() != nil {
			return v, ctx.Err(), true
		}
		v, err = c.fallback(ctx, id, load, err)
		return v, err, true
	}
	switch res.Outcome {
	case lua.LeaseCached:
		if !waitStart.IsZero() {
			c.stats.waited(time.Since(*waitStart))
		}
		v, err = c.fromLease(ctx, id, res.Value)
		if errors.Is(err, errUndecodable) { // dropped: lease again
			return v, nil, false
		}
		return v, err, true
	case lua.LeaseTaken:
		v, err = c.loadWithLease(ctx, id, load, token)
		return v, err, true
	}
	if waitStart.IsZero() {
		*waitStart = time.Now()
	}
	t := time.NewTimer(max(res.Wait, time.Millisecond))
	defer t.Stop()
	select {
	case <-woken.ch:
		switch woken.kind {
		case evNotFound:
			// The loader found no such id and, with a Bloom filter, cached nothing: take
			// its answer rather than load again in every process.
			c.stats.waited(time.Since(*waitStart))
			return v, ErrNotFound, true
		case evFailed:
			c.stats.waited(time.Since(*waitStart))
			return v, fmt.Errorf("%w: %s", ErrPeerLoadFailed, id), true
		}
	case <-t.C:
	case <-ctx.Done():
		return v, ctx.Err(), true
	}
	return v, nil, false
}

// lease runs a lease call (token's) for id. A lease taken by a call abandoned at its bound is
// handed back as soon as its reply arrives, so that no process waits it out.
func (c *Cache[V]) lease(ctx context.Context, id string, call lua.Call[lua.LeaseReply], token string) (lua.LeaseReply, error) {
	return doThen(c.redis, ctx, func(ctx context.Context) (lua.LeaseReply, error) {
		return call.Run(ctx, c.rdb)
	}, func(r lua.LeaseReply, err error) {
		if err == nil && r.Outcome == lua.LeaseTaken {
			c.release(context.Background(), id, token, evReleased)
		}
	})
}

// loadWithLease calls the loader while holding the lease and writes the result back through
// the fill script, which refuses if a write revoked the lease meanwhile (stale set).
func (c *Cache[V]) loadWithLease(ctx context.Context, id string, load Loader[V], token string) (V, error) {
	c.stats.loads.Inc()
	v, err := guard(func() (V, error) { return load(ctx, id) })
	absent := errors.Is(err, ErrNotFound)
	if err != nil && !absent {
		c.stats.loadErrors.Inc()
		// Hand the lease back at once, and tell the processes waiting for this load that
		// it failed: they fail too, as the callers sharing it here do, rather than each
		// trying the failing database in turn.
		c.release(ctx, id, token, evFailed)
		return v, err
	}
	if absent {
		c.countFalsePositive()
	}
	if absent && !c.cachesAbsences() {
		// A Bloom false positive: answer absent without writing a key, and tell the waiters
		// so they do not each load it again.
		c.release(ctx, id, token, evNotFound)
		return v, ErrNotFound
	}
	b, px, encErr := c.encode(v, absent)
	if encErr != nil {
		c.release(ctx, id, token, evReleased)
		return v, encErr
	}
	written, ferr := doThen(c.redis, context.WithoutCancel(ctx), func(ctx context.Context) (bool, error) {
		return lua.CacheFill(c.Key(id), c.leaseKey(id), token, b, px, c.channel(), "f:"+id).Run(ctx, c.rdb)
	}, func(_ bool, err error) {
		if err != nil { // cut at the bound and never sent (a congested pool): free the waiters
			c.release(context.Background(), id, token, evReleased)
		}
	})
	if ferr == nil && !written {
		c.stats.staleSetsRejected.Inc()
	}
	// The caller gets what it loaded either way: it was current when read. A failed
	// write-back only means the next reader loads again.
	if absent {
		return v, ErrNotFound
	}
	return v, nil
}

// fallback answers a read when Redis fails: an L1 copy within MaxStale, else the bounded loader.
func (c *Cache[V]) fallback(ctx context.Context, id string, load Loader[V], cause error) (V, error) {
	if v, err, ok := c.fromStaleLocal(ctx, id); ok {
		return v, err
	}
	return c.outageLoad(ctx, id, load, cause)
}

// outageLoad answers from the loader when Redis fails, bounded so that a Redis outage cannot
// turn into a stampede on the database: one call per id at a time in this process, at most
// OutageLoads ids at once. What it loads is kept in L1, if there is one.
func (c *Cache[V]) outageLoad(ctx context.Context, id string, load Loader[V], cause error) (V, error) {
	if c.outage == nil {
		var zero V
		return zero, c.redisErr(ctx, "get "+c.Key(id), cause)
	}
	return c.share(ctx, &c.outageGroup, id, func(lctx context.Context) (V, error) {
		var zero V
		if !c.outage.TryAcquire(1) {
			return zero, fmt.Errorf("%w: %w", ErrOverloaded, cause)
		}
		defer c.outage.Release(1)
		c.stats.outageLoads.Inc()
		c.stats.loads.Inc()
		since := c.l1.begin(id)
		v, err := guard(func() (V, error) { return load(lctx, id) })
		switch {
		case err == nil || errors.Is(err, ErrNotFound):
			c.l1.put(id, v, err != nil, since, time.Time{})
		default:
			c.stats.loadErrors.Inc()
		}
		return v, err
	})
}

// release gives id's lease back without writing, announcing why with the event kind ("r"
// no result, "n" no such id and nothing cached). It runs even if ctx ended.
func (c *Cache[V]) release(ctx context.Context, id, token string, kind byte) {
	_ = doErr(c.redis, context.WithoutCancel(ctx), func(ctx context.Context) error {
		_, err := lua.CacheRelease(c.leaseKey(id), token, c.channel(), string(kind)+":"+id).Run(ctx, c.rdb)
		return err
	})
}

// rebuildIfStale queues a background rebuild when e is a logically expired value, which is
// served meanwhile (and counted as such).
func (c *Cache[V]) rebuildIfStale(id string, e entry, load Loader[V]) {
	if c.opts.Mode == ModeLogical && !e.expireAt.IsZero() && time.Now().After(e.expireAt) {
		c.stats.staleServed.Inc()
		c.rebuild.submit(id, func() { c.refresh(id, e.expireAt, load) })
	}
}
