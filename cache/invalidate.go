package cache

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// InvalidateOption changes what Invalidate does.
type InvalidateOption uint8

const (
	// Created says the write creates id. Before the write, id goes into the Bloom filter
	// (a row must never exist while the filter rejects it); after it, the id's absence
	// markers are cleared in Redis and in every process's L1, and every process adds id to
	// its own filter if that is not the shared RedisFilter (the "c" event).
	Created InvalidateOption = 1 << iota
)

func hasOption(opts []InvalidateOption, o InvalidateOption) bool {
	for _, x := range opts {
		if x&o != 0 {
			return true
		}
	}
	return false
}

// Invalidate runs write (the database update) and then deletes id's cached value: the
// delete-after-write pattern, made to survive a crash between the two. Before write runs,
// an intent naming id is appended to a Redis stream; after the delete it is removed. If the
// process dies in between, the intent stays and RunInvalidator (in any process) deletes the
// value later. If the intent cannot be recorded, write does not run. Pass Created when the
// write inserts the row.
//
// Together with the lease revocation in Delete, no reader that loaded before the write can
// put the old value back.
func (c *Cache[V]) Invalidate(ctx context.Context, id string, write func(ctx context.Context) error, opts ...InvalidateOption) error {
	created := hasOption(opts, Created)
	if created {
		if err := c.addToFilter(ctx, id); err != nil {
			return err
		}
	}
	fields := []string{"id", id}
	if created {
		fields = append(fields, "created", "1")
	}
	intent, err := do(c.redis, ctx, func(ctx context.Context) (string, error) {
		return c.rdb.XAdd(ctx, &redis.XAddArgs{Stream: c.intentKey(), Values: fields}).Result()
	})
	if err != nil {
		return fmt.Errorf("cache: recording invalidation intent: %w", c.redisErr(ctx, "xadd", err))
	}
	werr := write(ctx)
	// Delete even when write failed: it may have committed before failing, and a spurious
	// delete only costs one reload.
	dctx := context.WithoutCancel(ctx)
	if err := c.deleteAs(dctx, kindOf(created), id); err != nil {
		return errors.Join(werr, fmt.Errorf("cache: delete after write (the invalidator will retry): %w", err))
	}
	_ = doErr(c.redis, dctx, func(ctx context.Context) error { return c.rdb.XDel(ctx, c.intentKey(), intent).Err() })
	return werr
}

// kindOf is the event a delete after a write announces.
func kindOf(created bool) byte {
	if created {
		return evCreated
	}
	return evSet
}

// addToFilter puts id into the Bloom filter, if any. An unbuilt RedisFilter answers "maybe"
// to every id, so there is nothing to add to.
func (c *Cache[V]) addToFilter(ctx context.Context, id string) error {
	if c.opts.Filter == nil {
		return nil
	}
	if err := c.opts.Filter.Add(ctx, id); err != nil && !errors.Is(err, ErrNotBuilt) {
		return fmt.Errorf("cache: adding %s to the Bloom filter: %w", id, c.redisErr(ctx, "bloom add", err))
	}
	return nil
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
			if err := c.finishIntent(ctx, m); err != nil {
				return n, err
			}
			if err := doErr(c.redis, ctx, func(ctx context.Context) error { return c.rdb.XDel(ctx, c.intentKey(), m.ID).Err() }); err != nil {
				return n, c.redisErr(ctx, "xdel", err)
			}
			n++
		}
	}
}

// finishIntent does what an abandoned intent's writer did not get to: the delete, and for a
// create the filter add first.
func (c *Cache[V]) finishIntent(ctx context.Context, m redis.XMessage) error {
	id, ok := m.Values["id"].(string)
	if !ok {
		return nil
	}
	created := m.Values["created"] == "1"
	if created {
		if err := c.addToFilter(ctx, id); err != nil {
			return err
		}
	}
	return c.deleteAs(ctx, kindOf(created), id)
}
