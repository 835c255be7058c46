package cache

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/lua"
)

// encode builds the stored entry for v (or an absence) and the TTL argument of the write
// scripts: milliseconds, or 0 for no Redis expiry (logical mode).
func (c *Cache[V]) encode(v V, absent bool) ([]byte, int64, error) {
	var payload []byte
	if !absent {
		var err error
		if payload, err = c.opts.Codec.Marshal(v); err != nil {
			return nil, 0, fmt.Errorf("cache: encoding %s value: %w", c.opts.Name, err)
		}
	}
	base := c.opts.TTL
	if absent {
		base = c.opts.AbsentTTL
	}
	ttl := c.ttl(base)
	if c.opts.Mode == ModeLogical && !absent {
		// The value itself carries its expiry; Redis keeps it until replaced or deleted.
		// Absences expire in Redis as in mutex mode: ids that do not exist are unbounded.
		return encodeEntry(payload, absent, time.Now().Add(ttl), c.opts.Version), 0, nil
	}
	return encodeEntry(payload, absent, time.Time{}, c.opts.Version), ms(ttl), nil
}

// Set stores v for id (write-through) and revokes any lease, so a load that read the
// database before this write cannot overwrite it. It also adds id to the Bloom filter.
func (c *Cache[V]) Set(ctx context.Context, id string, v V) error {
	b, px, err := c.encode(v, false)
	if err != nil {
		return err
	}
	if err := c.addToFilter(ctx, id); err != nil {
		return err
	}
	c.l1.invalidate(id)
	return c.runSet(ctx, id, b, px)
}

// Delete removes the cached values of ids and revokes their leases (the delete of
// delete-after-write), in one pipelined round trip. Every process drops its L1 copies and
// wakes its waiters on the events.
func (c *Cache[V]) Delete(ctx context.Context, ids ...string) error {
	return c.deleteAs(ctx, evSet, ids...)
}

// deleteAs is Delete announcing kind (evSet, or evCreated after a create).
func (c *Cache[V]) deleteAs(ctx context.Context, kind byte, ids ...string) error {
	for _, id := range ids {
		c.l1.invalidate(id)
	}
	errs, err := do(c.redis, ctx, func(ctx context.Context) ([]error, error) {
		calls := make([]*lua.Pending[struct{}], len(ids))
		_, _ = c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, id := range ids {
				calls[i] = lua.CacheSet(c.Key(id), c.leaseKey(id), nil, 0, c.channel(), string(kind)+":"+id).QueueEval(ctx, p)
			}
			return nil
		})
		var errs []error
		for i, call := range calls {
			if _, err := call.Result(); err != nil {
				errs = append(errs, fmt.Errorf("cache: delete %s: %w", c.Key(ids[i]), err))
			}
		}
		return errs, errors.Join(errs...)
	})
	if err != nil && errs == nil { // the call itself failed: timeout, breaker, connection
		return c.redisErr(ctx, fmt.Sprintf("delete %d ids", len(ids)), err)
	}
	return err
}

// runSet runs the set script for one id: b == nil deletes, px is encode's TTL argument.
func (c *Cache[V]) runSet(ctx context.Context, id string, b []byte, px int64) error {
	err := doErr(c.redis, ctx, func(ctx context.Context) error {
		_, err := lua.CacheSet(c.Key(id), c.leaseKey(id), b, px, c.channel(), "s:"+id).Run(ctx, c.rdb)
		return err
	})
	if err != nil {
		return c.redisErr(ctx, "set "+c.Key(id), err)
	}
	return nil
}
