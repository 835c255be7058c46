package cache

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/lua"
)

// Get reads id from L1 and Redis only: the value, ErrNotFound for a cached absence (or, when
// nothing is cached, a Bloom reject), ErrMiss when nothing is cached, or the Redis error
// (while Redis fails, an L1 copy within MaxStale is returned instead). In logical mode a stale
// value is returned as is.
func (c *Cache[V]) Get(ctx context.Context, id string) (V, error) {
	var zero V
	if v, err, ok := c.fromLocal(id); ok {
		return v, err
	}
	since := c.l1.begin(id)
	b, err := c.get(ctx, id)
	if err == nil {
		v, err := c.fromRedis(ctx, id, b, since, nil)
		if !errors.Is(err, errUndecodable) {
			return v, err
		}
	} else if !errors.Is(err, redis.Nil) {
		if v, err, ok := c.fromStaleLocal(ctx, id); ok {
			return v, err
		}
		return zero, c.redisErr(ctx, "get "+c.Key(id), err)
	}
	if c.rejectedByFilter(ctx, id) {
		return zero, ErrNotFound
	}
	c.stats.misses.Inc()
	return zero, ErrMiss
}

// fromLocal answers from L1 when it holds a live copy.
func (c *Cache[V]) fromLocal(id string) (V, error, bool) {
	e, ok := c.l1.get(id)
	return c.answer(e, ok, c.stats.localHits)
}

// fromStaleLocal answers from an L1 copy past its TTL (within MaxStale) when Redis failed.
func (c *Cache[V]) fromStaleLocal(ctx context.Context, id string) (V, error, bool) {
	e, ok := c.l1.stale(id)
	return c.answer(e, ok && ctx.Err() == nil, c.stats.staleLocalServed)
}

// answer turns an L1 copy, if ok, into a read's answer, counted in served.
func (c *Cache[V]) answer(e localEntry[V], ok bool, served prometheus.Counter) (V, error, bool) {
	if !ok {
		var zero V
		return zero, nil, false
	}
	served.Inc()
	if e.absent {
		return e.v, ErrNotFound, true
	}
	return e.v, nil, true
}

// get reads id's raw entry from Redis (redis.Nil when there is none).
func (c *Cache[V]) get(ctx context.Context, id string) ([]byte, error) {
	return do(c.redis, ctx, func(ctx context.Context) ([]byte, error) { return c.rdb.Get(ctx, c.Key(id)).Bytes() })
}

// redisErr is the error of a failed Redis call: the caller's ctx error if that is what ended
// it, else the Redis error wrapped with what failed.
func (c *Cache[V]) redisErr(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("cache: %s: %w", what, err)
}

// errUndecodable marks a cached entry this cache cannot read: foreign bytes, another
// Options.Version, or a payload the Codec rejects (V changed in a deploy). Such an entry is
// dropped and read as a miss, so that a schema change costs one reload per key instead of an
// error on every read until the TTL.
var errUndecodable = errors.New("cache: undecodable entry")

// decode turns stored bytes into their entry and value (ErrNotFound for an absence).
func (c *Cache[V]) decode(b []byte) (entry, V, error) {
	var v V
	e, err := decodeEntry(b)
	switch {
	case err != nil:
		return e, v, errUndecodable
	case e.absent:
		return e, v, ErrNotFound
	case e.version != c.opts.Version:
		return e, v, fmt.Errorf("%w: version %d, this cache reads %d", errUndecodable, e.version, c.opts.Version)
	}
	if err := c.opts.Codec.Unmarshal(e.payload, &v); err != nil {
		return e, v, fmt.Errorf("%w: %v", errUndecodable, err)
	}
	return e, v, nil
}

// fromRedis answers a read from the bytes Redis holds for id: the value (kept in L1 when
// fresh), ErrNotFound for an absence, or errUndecodable after dropping bytes it cannot
// read. With load (a loading read) a logically expired value is queued for rebuild.
func (c *Cache[V]) fromRedis(ctx context.Context, id string, b []byte, since uint64, load Loader[V]) (V, error) {
	e, v, err := c.decode(b)
	if errors.Is(err, errUndecodable) {
		c.dropUndecodable(ctx, id, b)
		return v, err
	}
	c.countHit(e)
	if load != nil {
		c.rebuildIfStale(id, e, load)
	}
	// Fresh entries only: a logically expired one must go back to Redis so that its
	// rebuild is noticed; and only while events can invalidate the copy.
	if (e.expireAt.IsZero() || time.Now().Before(e.expireAt)) && c.events.live.Load() {
		c.l1.put(id, v, e.absent, since, e.expireAt)
	}
	return v, err
}

// fromLease decodes the value the lease script found cached; errUndecodable after dropping it.
func (c *Cache[V]) fromLease(ctx context.Context, id, value string) (V, error) {
	e, v, err := c.decode([]byte(value))
	if errors.Is(err, errUndecodable) {
		c.dropUndecodable(ctx, id, []byte(value))
		return v, err
	}
	c.countHit(e)
	return v, err
}

func (c *Cache[V]) countHit(e entry) {
	if e.absent {
		c.stats.absentHits.Inc()
	} else {
		c.stats.hits.Inc()
	}
}

// dropUndecodable deletes id's entry if it still holds b (a value written meanwhile stays),
// counting it. Best effort: if it fails, the next reader drops it.
func (c *Cache[V]) dropUndecodable(ctx context.Context, id string, b []byte) {
	c.stats.decodeErrors.Inc()
	_ = doErr(c.redis, context.WithoutCancel(ctx), func(ctx context.Context) error {
		_, err := lua.CacheDrop(c.Key(id), b).Run(ctx, c.rdb)
		return err
	})
}

// rejectedByFilter reports whether the Bloom filter proves id absent. It is asked only about
// ids that nothing is cached for, so a hit costs what it costs without a filter. A failing
// filter (not built, deleted, a Redis error) rejects nothing: the read goes on as if there
// were no filter, counted, and absences are cached meanwhile (see filterAnswered).
func (c *Cache[V]) rejectedByFilter(ctx context.Context, id string) bool {
	if c.opts.Filter == nil {
		return false
	}
	fctx, cancel := c.redis.bound(ctx)
	defer cancel()
	ok, err := c.opts.Filter.Test(fctx, id)
	if !c.filterAnswered(err) || ok {
		return false
	}
	c.stats.bloomRejects.Inc()
	return true
}

// filterAnswered records whether a filter check worked. While checks fail the filter is
// unusable: it lets every id through, so absences are cached as if there were no filter,
// and the same missing ids do not reach the loader on every read.
func (c *Cache[V]) filterAnswered(err error) bool {
	if err != nil {
		c.stats.filterErrors.Inc()
		c.filterDown.Store(true)
		return false
	}
	if c.filterDown.Load() {
		c.filterDown.Store(false)
	}
	return true
}

// cachesAbsences reports whether a loader's ErrNotFound is written to Redis: always without a
// working filter; with one only if AbsentWithFilter (its false positives would create keys).
func (c *Cache[V]) cachesAbsences() bool {
	return c.opts.Filter == nil || c.opts.AbsentWithFilter || c.filterDown.Load()
}

// countFalsePositive counts an id the filter let through and the loader did not find.
func (c *Cache[V]) countFalsePositive() {
	if c.opts.Filter != nil && !c.filterDown.Load() {
		c.stats.bloomFalsePositives.Inc()
	}
}
