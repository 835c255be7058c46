package cache

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/lua"
)

// BatchLoader fetches several ids at once (e.g. one SELECT … WHERE id IN (…)). Ids missing
// from the returned map do not exist and are cached as absent.
type BatchLoader[V any] func(ctx context.Context, ids []string) (map[string]V, error)

// GetMany reads ids from L1 and Redis only, in one pipelined round trip per Redis node (each
// id is its own hash tag, so on a Cluster the keys spread over slots; go-redis groups the
// pipeline by node). The map holds the ids that have a cached value; absences and misses are
// left out. If Redis fails, the map holds what L1 could answer (copies within MaxStale
// included) and the error says why the rest is missing.
func (c *Cache[V]) GetMany(ctx context.Context, ids []string) (map[string]V, error) {
	r, err := c.readMany(ctx, ids, nil)
	return r.values, err
}

// LoadMany is GetOrLoad for many ids: cached values are read in one round trip per node, the
// misses are leased in one more, the leased ones are loaded with a single call to load and
// written back under their leases, and ids another caller is loading are awaited like
// GetOrLoad does. Ids that do not exist are left out of the map. If loading fails, the error
// is returned with a map of the ids that were answered (those already cached included).
func (c *Cache[V]) LoadMany(ctx context.Context, ids []string, load BatchLoader[V]) (map[string]V, error) {
	single := func(ctx context.Context, id string) (V, error) {
		m, err := load(ctx, []string{id})
		v, ok := m[id]
		if err == nil && !ok {
			err = ErrNotFound
		}
		return v, err
	}
	r, err := c.readMany(ctx, ids, single)
	if err != nil {
		return c.outageLoadMany(ctx, r, load, err)
	}
	if len(r.missing) == 0 {
		return r.values, nil
	}
	token := rand.Text()
	replies, err := c.leaseMany(ctx, r.missing, token)
	if err != nil {
		return c.outageLoadMany(ctx, r, load, err)
	}
	var leased, others []string
	for i, id := range r.missing {
		res := replies[i]
		switch {
		case res.err != nil:
			others = append(others, id) // handled one by one below
		case res.reply.Outcome == lua.LeaseCached:
			v, err := c.fromLease(ctx, id, res.reply.Value)
			switch {
			case err == nil:
				r.values[id] = v
			case errors.Is(err, errUndecodable): // dropped: load it like one another caller holds
				others = append(others, id)
			}
		case res.reply.Outcome == lua.LeaseTaken:
			leased = append(leased, id)
		default:
			others = append(others, id)
		}
	}
	var lerr error
	if len(leased) > 0 {
		lerr = c.loadLeased(ctx, leased, token, load, r.values)
	}
	// On an error the map still holds every id that was answered (cached ones included).
	return r.values, errors.Join(lerr, c.awaitOthers(ctx, others, single, r.values))
}

type leaseResult struct {
	reply lua.LeaseReply
	err   error
}

// leaseMany runs the lease script for every id in one pipelined round trip; each id's reply
// is judged on its own.
func (c *Cache[V]) leaseMany(ctx context.Context, ids []string, token string) ([]leaseResult, error) {
	return do(c.redis, ctx, func(ctx context.Context) ([]leaseResult, error) {
		calls := make([]*lua.Pending[lua.LeaseReply], len(ids))
		_, _ = c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, id := range ids {
				calls[i] = lua.CacheLease(c.Key(id), c.leaseKey(id), token, c.opts.LeaseTTL).QueueEval(ctx, p)
			}
			return nil
		})
		out := make([]leaseResult, len(ids))
		failed := 0
		for i, call := range calls {
			out[i].reply, out[i].err = call.Result()
			if out[i].err != nil && isOutage(out[i].err) {
				failed++
			}
		}
		if failed == len(ids) { // Redis itself failed, not one reply
			return nil, out[0].err
		}
		return out, nil
	})
}

// awaitOthers waits, as single loads woken by events, for ids leased elsewhere, concurrently.
func (c *Cache[V]) awaitOthers(ctx context.Context, ids []string, single Loader[V], out map[string]V) error {
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, len(ids))
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := c.shared(ctx, id, single)
			if errors.Is(err, ErrNotFound) {
				return
			}
			if err != nil {
				errs[i] = err
				return
			}
			mu.Lock()
			out[id] = v
			mu.Unlock()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// loadLeased loads ids this caller holds leases for with one loader call and writes them
// back in one pipelined round trip; a write revoked meanwhile is refused per id.
func (c *Cache[V]) loadLeased(ctx context.Context, ids []string, token string, load BatchLoader[V], out map[string]V) error {
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.opts.LoadTimeout)
	defer cancel()
	c.stats.loads.Inc()
	found, err := guard(func() (map[string]V, error) { return load(lctx, ids) })
	if err != nil {
		c.stats.loadErrors.Inc()
		c.releaseMany(lctx, ids, token, evFailed)
		return err
	}
	skipAbsent := !c.cachesAbsences()
	type fill struct {
		id     string
		b      []byte
		px     int64
		absent bool
	}
	var fills []fill
	var notFound []string
	for _, id := range ids {
		v, ok := found[id]
		if ok {
			out[id] = v
		} else {
			c.countFalsePositive()
		}
		if !ok && skipAbsent {
			notFound = append(notFound, id)
			continue
		}
		b, px, err := c.encode(v, !ok)
		if err != nil {
			c.releaseMany(lctx, ids, token, evReleased)
			return err
		}
		fills = append(fills, fill{id, b, px, !ok})
	}
	c.releaseMany(lctx, notFound, token, evNotFound)
	rejected, err := do(c.redis, lctx, func(ctx context.Context) (int, error) {
		calls := make([]*lua.Pending[bool], len(fills))
		_, err := c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, f := range fills {
				calls[i] = lua.CacheFill(c.Key(f.id), c.leaseKey(f.id), token, f.b, f.px, c.channel(), "f:"+f.id).QueueEval(ctx, p)
			}
			return nil
		})
		n := 0
		for _, call := range calls {
			if written, err := call.Result(); err == nil && !written {
				n++
			}
		}
		return n, err
	})
	c.stats.staleSetsRejected.Add(float64(rejected))
	// The caller gets what it loaded either way; a failed write-back only means the next
	// reader loads again.
	if err != nil && !errors.Is(err, redis.Nil) && ctx.Err() == nil && !isOutage(err) {
		return fmt.Errorf("cache: writing back %d ids: %w", len(ids), err)
	}
	return nil
}

// releaseMany hands back the leases of ids in one round trip, announcing kind.
func (c *Cache[V]) releaseMany(ctx context.Context, ids []string, token string, kind byte) {
	if len(ids) == 0 {
		return
	}
	_ = doErr(c.redis, context.WithoutCancel(ctx), func(ctx context.Context) error {
		_, err := c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, id := range ids {
				lua.CacheRelease(c.leaseKey(id), token, c.channel(), string(kind)+":"+id).QueueEval(ctx, p)
			}
			return nil
		})
		return err
	})
}

type readResult[V any] struct {
	values  map[string]V
	missing []string // ids neither L1 nor Redis answered and the filter did not reject
}

// rawEntry is one GET of a pipelined read.
type rawEntry struct {
	b     []byte
	found bool
}

// readMany answers what L1, Redis and (about misses) the Bloom filter know about ids. With a loader (LoadMany),
// logically expired values are served and queued for rebuild. If Redis fails, L1 copies within
// MaxStale answer what they can, and the error is returned with the rest in missing.
func (c *Cache[V]) readMany(ctx context.Context, ids []string, single Loader[V]) (readResult[V], error) {
	r := readResult[V]{values: make(map[string]V, len(ids))}
	seen := make(map[string]bool, len(ids))
	var todo []string
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		if v, err, ok := c.fromLocal(id); ok {
			if err == nil {
				r.values[id] = v
			}
			continue
		}
		todo = append(todo, id)
	}
	if len(todo) == 0 {
		return r, nil
	}
	since := make([]uint64, len(todo))
	for i, id := range todo {
		since[i] = c.l1.begin(id)
	}
	raws, err := c.getMany(ctx, todo)
	if err != nil {
		return c.staleMany(ctx, r, todo), c.redisErr(ctx, fmt.Sprintf("reading %d ids", len(todo)), err)
	}
	for i, id := range todo {
		var v V
		var err error = redis.Nil
		if raws[i].found { // GetMany only reads; LoadMany also rebuilds what is stale
			v, err = c.fromRedis(ctx, id, raws[i].b, since[i], single)
		}
		switch {
		case err == nil:
			r.values[id] = v
		case errors.Is(err, redis.Nil) || errors.Is(err, errUndecodable):
			c.stats.misses.Inc()
			r.missing = append(r.missing, id)
		}
	}
	if single != nil { // GetMany leaves misses out anyway: no need to ask the filter
		r.missing = c.filterMisses(ctx, r.missing)
	}
	return r, nil
}

// filterMisses drops the ids the Bloom filter proves absent (asked only about misses).
func (c *Cache[V]) filterMisses(ctx context.Context, ids []string) []string {
	if c.opts.Filter == nil || len(ids) == 0 {
		return ids
	}
	fctx, cancel := c.redis.bound(ctx)
	defer cancel()
	maybe, err := c.opts.Filter.TestMany(fctx, ids)
	if !c.filterAnswered(err) {
		return ids
	}
	kept := ids[:0]
	for i, id := range ids {
		if maybe[i] {
			kept = append(kept, id)
		} else {
			c.stats.bloomRejects.Inc()
		}
	}
	return kept
}

// getMany GETs ids in one pipelined round trip per node.
func (c *Cache[V]) getMany(ctx context.Context, ids []string) ([]rawEntry, error) {
	return do(c.redis, ctx, func(ctx context.Context) ([]rawEntry, error) {
		cmds := make([]*redis.StringCmd, len(ids))
		_, err := c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, id := range ids {
				cmds[i] = p.Get(ctx, c.Key(id))
			}
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, err
		}
		out := make([]rawEntry, len(ids))
		for i, cmd := range cmds {
			b, err := cmd.Bytes()
			out[i] = rawEntry{b: b, found: err == nil}
		}
		return out, nil
	})
}

// staleMany answers ids from L1 copies within MaxStale (Redis failed); the others are missing.
func (c *Cache[V]) staleMany(ctx context.Context, r readResult[V], ids []string) readResult[V] {
	for _, id := range ids {
		v, err, ok := c.fromStaleLocal(ctx, id)
		switch {
		case !ok:
			r.missing = append(r.missing, id)
		case err == nil:
			r.values[id] = v
		}
	}
	return r
}

// outageLoadMany answers the ids of r that are still missing from the loader when Redis
// fails, within the same bound as single outage loads; what it loads is kept in L1.
func (c *Cache[V]) outageLoadMany(ctx context.Context, r readResult[V], load BatchLoader[V], cause error) (map[string]V, error) {
	if len(r.missing) == 0 {
		return r.values, nil
	}
	if c.outage == nil {
		return r.values, c.redisErr(ctx, fmt.Sprintf("reading %d ids", len(r.missing)), cause)
	}
	if !c.outage.TryAcquire(1) {
		return r.values, fmt.Errorf("%w: %w", ErrOverloaded, cause)
	}
	defer c.outage.Release(1)
	c.stats.outageLoads.Inc()
	c.stats.loads.Inc()
	since := make([]uint64, len(r.missing))
	for i, id := range r.missing {
		since[i] = c.l1.begin(id)
	}
	found, err := guard(func() (map[string]V, error) { return load(ctx, r.missing) })
	if err != nil {
		c.stats.loadErrors.Inc()
		return r.values, err
	}
	for i, id := range r.missing {
		v, ok := found[id]
		c.l1.put(id, v, !ok, since[i], time.Time{})
		if ok {
			r.values[id] = v
		}
	}
	return r.values, nil
}
