package cache

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	// ErrInvalidationPending is returned by Invalidate when the write succeeded (it
	// committed: do not run it again) but the cached value could not be deleted yet (Redis
	// down or hung). The cache retries the delete in the background with backoff until Redis
	// answers; if this process dies first, the recorded intent lets RunInvalidator finish it.
	ErrInvalidationPending = errors.New("cache: write committed, invalidation pending")
	// ErrIntentNotRecorded is returned by Invalidate when it did not run the write because the
	// intent (or, for a create, the id in the Bloom filter) could not be recorded: Redis down
	// or hung. Retry later, or pass WriteUnrecorded.
	ErrIntentNotRecorded = errors.New("cache: invalidation not recorded (Redis unavailable), write not run")
)

// InvalidateOption changes what Invalidate does.
type InvalidateOption uint8

const (
	// Created says the write creates id. Before the write, id goes into the Bloom filter
	// (a row must never exist while the filter rejects it); after it, the id's absence
	// markers are cleared in Redis and in every process's L1, and every process adds id to
	// its own filter if that is not the shared RedisFilter (the "c" event).
	Created InvalidateOption = 1 << iota
	// WriteUnrecorded runs the write even when the intent cannot be recorded (Redis down):
	// the write matters more than the cache. The delete is then retried in-process only, so
	// if this process dies before Redis is back, the old value stays until its TTL.
	WriteUnrecorded
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
// delete-after-write pattern, made to survive a crash between the two and a Redis outage
// around it. Before write runs, an intent naming id is appended to a Redis stream; after the
// delete it is removed. If the process dies in between, the intent stays and RunInvalidator
// (in any process) deletes the value later.
//
// If the intent cannot be recorded, write does not run (ErrIntentNotRecorded) unless
// WriteUnrecorded is passed. If write succeeds but the delete fails, Invalidate returns
// ErrInvalidationPending: the write committed, and the delete is retried in the background
// until Redis answers. If write fails, its error is returned (the delete runs anyway: the
// write may have committed before failing). Pass Created when the write inserts the row.
//
// Together with the lease revocation in Delete, no reader that loaded before the write can
// put the old value back.
func (c *Cache[V]) Invalidate(ctx context.Context, id string, write func(ctx context.Context) error, opts ...InvalidateOption) error {
	created, unrecorded := hasOption(opts, Created), hasOption(opts, WriteUnrecorded)
	var filtered error
	if created {
		filtered = c.addToFilter(ctx, id)
	}
	intent, err := c.recordIntent(ctx, id, created)
	if err == nil {
		err = filtered // a create must not run while the filter may still reject its id
	}
	if err != nil && !unrecorded {
		return fmt.Errorf("%w: %w", ErrIntentNotRecorded, err)
	}
	werr := write(ctx)
	// Delete even when write failed: it may have committed before failing, and a spurious
	// delete only costs one reload.
	job := invalidation{id: id, created: created, intent: intent, filtered: filtered == nil}
	if err := c.finish(context.WithoutCancel(ctx), job); err != nil {
		c.pending.add(job)
		if werr == nil {
			return fmt.Errorf("%w: %w", ErrInvalidationPending, err)
		}
	}
	return werr
}

// recordIntent appends an intent naming id to the stream and returns its stream id.
func (c *Cache[V]) recordIntent(ctx context.Context, id string, created bool) (string, error) {
	fields := []string{"id", id}
	if created {
		fields = append(fields, "created", "1")
	}
	intent, err := do(c.redis, ctx, func(ctx context.Context) (string, error) {
		return c.rdb.XAdd(ctx, &redis.XAddArgs{Stream: c.intentKey(), Values: fields}).Result()
	})
	if err != nil {
		return "", c.redisErr(ctx, "recording invalidation intent", err)
	}
	return intent, nil
}

// invalidation is the part of an Invalidate that follows the write.
type invalidation struct {
	id       string
	created  bool
	filtered bool   // a create's id is in the filter
	intent   string // its intent's stream id, "" if none was recorded
}

// finish does the work of an invalidation after the write: for a create the filter add (if
// it failed before), the delete, then the intent's removal.
func (c *Cache[V]) finish(ctx context.Context, job invalidation) error {
	if job.created && !job.filtered {
		if err := c.addToFilter(ctx, job.id); err != nil {
			return err
		}
	}
	if err := c.deleteAs(ctx, kindOf(job.created), job.id); err != nil {
		return err
	}
	if job.intent != "" {
		// Best effort: an intent left behind only costs one more delete, after its grace.
		_ = doErr(c.redis, ctx, func(ctx context.Context) error { return c.rdb.XDel(ctx, c.intentKey(), job.intent).Err() })
	}
	return nil
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
	fctx, cancel := c.redis.bound(ctx)
	defer cancel()
	if err := c.opts.Filter.Add(fctx, id); err != nil && !errors.Is(err, ErrNotBuilt) {
		return fmt.Errorf("cache: adding %s to the Bloom filter: %w", id, c.redisErr(ctx, "bloom add", err))
	}
	return nil
}

func (c *Cache[V]) intentKey() string { return c.opts.Prefix + ":" + c.opts.Name + ":intents" }

// InvalidatorOptions tunes RunInvalidator.
type InvalidatorOptions struct {
	// Grace is the age after which an intent counts as abandoned (5 s). It should exceed the
	// longest write: an intent younger than that may belong to a write still running, and
	// deleting before that write commits lets a reader cache the old row again (its writer's
	// own delete, after the commit, still removes it). Writers whose delete fails retry it
	// themselves, so the grace only matters when a writer died.
	Grace time.Duration
	// Every is how often the stream is scanned (1 s).
	Every time.Duration
	// OnError, if set, gets each failed pass's error (they are counted in
	// invalidator_errors_total either way); the intents stay for the next pass.
	OnError func(error)
}

// RunInvalidator deletes the values named by abandoned intents (left by a crash between a
// database write and its cache delete) until ctx ends, reporting failed passes through
// OnError and invalidator_errors_total. Run it in one or more processes; repeated deletes
// are harmless.
func (c *Cache[V]) RunInvalidator(ctx context.Context, o InvalidatorOptions) error {
	if o.Grace <= 0 {
		o.Grace = 5 * time.Second
	}
	if o.Every <= 0 {
		o.Every = time.Second
	}
	t := time.NewTicker(o.Every)
	defer t.Stop()
	for {
		if _, err := c.DrainIntents(ctx, o.Grace); err != nil && ctx.Err() == nil {
			// Redis trouble: the intents are still there for the next tick.
			c.stats.invalidatorErrors.Inc()
			if o.OnError != nil {
				o.OnError(err)
			}
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
