package cache

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Invalidate runs write (the database update) and then deletes id's cached value: the
// delete-after-write pattern, made to survive a crash between the two. Before write runs,
// an intent naming id is appended to a Redis stream; after the delete it is removed. If the
// process dies in between, the intent stays and RunInvalidator (in any process) deletes the
// value later. If the intent cannot be recorded, write does not run.
//
// Together with the lease revocation in Delete, no reader that loaded before the write can
// put the old value back.
func (c *Cache[V]) Invalidate(ctx context.Context, id string, write func(ctx context.Context) error) error {
	intent, err := do(c.redis, ctx, func(ctx context.Context) (string, error) {
		return c.rdb.XAdd(ctx, &redis.XAddArgs{Stream: c.intentKey(), Values: []string{"id", id}}).Result()
	})
	if err != nil {
		return fmt.Errorf("cache: recording invalidation intent: %w", c.redisErr(ctx, "xadd", err))
	}
	werr := write(ctx)
	// Delete even when write failed: it may have committed before failing, and a spurious
	// delete only costs one reload.
	dctx := context.WithoutCancel(ctx)
	if err := c.Delete(dctx, id); err != nil {
		return errors.Join(werr, fmt.Errorf("cache: delete after write (the invalidator will retry): %w", err))
	}
	_ = doErr(c.redis, dctx, func(ctx context.Context) error { return c.rdb.XDel(ctx, c.intentKey(), intent).Err() })
	return werr
}

func (c *Cache[V]) intentKey() string { return c.opts.Prefix + ":" + c.opts.Name + ":intents" }

// InvalidatorOptions tunes RunInvalidator.
type InvalidatorOptions struct {
	// Grace is the age after which an intent counts as abandoned (30 s). It must exceed the
	// longest write: an intent younger than that may belong to a write still running.
	Grace time.Duration
	// Every is how often the stream is scanned (1 s).
	Every time.Duration
}

// RunInvalidator deletes the values named by abandoned intents (left by a crash between a
// database write and its cache delete) until ctx ends. Run it in one or more processes;
// repeated deletes are harmless.
func (c *Cache[V]) RunInvalidator(ctx context.Context, o InvalidatorOptions) error {
	if o.Grace <= 0 {
		o.Grace = 30 * time.Second
	}
	if o.Every <= 0 {
		o.Every = time.Second
	}
	t := time.NewTicker(o.Every)
	defer t.Stop()
	for {
		if _, err := c.DrainIntents(ctx, o.Grace); err != nil && ctx.Err() == nil {
			// Redis trouble: try again next tick; the intents are still there.
			_ = err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// DrainIntents deletes the values of intents older than grace and removes those intents.
// It returns how many it handled.
func (c *Cache[V]) DrainIntents(ctx context.Context, grace time.Duration) (int, error) {
	now, err := do(c.redis, ctx, func(ctx context.Context) (time.Time, error) { return c.rdb.Time(ctx).Result() })
	if err != nil {
		return 0, c.redisErr(ctx, "time", err)
	}
	// Stream ids start with the Redis server's ms clock, so the range selects by age.
	end := strconv.FormatInt(now.Add(-grace).UnixMilli(), 10)
	n := 0
	for {
		msgs, err := do(c.redis, ctx, func(ctx context.Context) ([]redis.XMessage, error) {
			return c.rdb.XRangeN(ctx, c.intentKey(), "-", end, 100).Result()
		})
		if err != nil {
			return n, c.redisErr(ctx, "xrange", err)
		}
		if len(msgs) == 0 {
			return n, nil
		}
		for _, m := range msgs {
			if id, ok := m.Values["id"].(string); ok {
				if err := c.Delete(ctx, id); err != nil {
					return n, err
				}
			}
			if err := doErr(c.redis, ctx, func(ctx context.Context) error { return c.rdb.XDel(ctx, c.intentKey(), m.ID).Err() }); err != nil {
				return n, c.redisErr(ctx, "xdel", err)
			}
			n++
		}
	}
}
