package cache

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/lua"
)

// BatchLoader fetches several ids at once (e.g. one SELECT … WHERE id IN (…)). Ids missing
// from the returned map do not exist and are cached as absent.
type BatchLoader[V any] func(ctx context.Context, ids []string) (map[string]V, error)

// GetMany reads ids from L1 and Redis only, in one pipelined round trip per Redis node (each
// id is its own hash tag, so on a Cluster the keys spread over slots; go-redis groups the
// pipeline by node). The map holds the ids that have a cached value; absences and misses are
// left out.
func (c *Cache[V]) GetMany(ctx context.Context, ids []string) (map[string]V, error) {
	r, err := c.readMany(ctx, ids, nil)
	return r.values, err
}

// LoadMany is GetOrLoad for many ids: cached values are read in one round trip per node, the
// misses are leased in one more, the leased ones are loaded with a single call to load and
// written back under their leases, and ids another caller is loading are awaited like
// GetOrLoad does. Ids that do not exist are left out of the map.
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
		return c.outageLoadMany(ctx, ids, load, err)
	}
	if len(r.missing) == 0 {
		return r.values, nil
	}
	// Lease every miss in one pipelined round trip.
	token := newToken()
	cmds := make([]*redis.Cmd, len(r.missing))
	_, err = c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range r.missing {
			cmds[i] = lua.CacheLease.Eval(ctx, p, []string{c.Key(id), c.leaseKey(id)}, token, ms(c.opts.LeaseTTL), "1")
		}
		return nil
	})
	// Errors are judged per command: a failed lease falls back to the one-by-one path.
	_ = err
	var leased, others []string
	for i, id := range r.missing {
		res, err := cmds[i].Slice()
		if err != nil {
			others = append(others, id) // handled one by one below
			continue
		}
		switch res[0].(int64) {
		case 1:
			if e, derr := decodeEntry([]byte(res[1].(string))); derr == nil {
				if v, verr := c.value(e); verr == nil {
					r.values[id] = v
				}
			}
		case 2:
			leased = append(leased, id)
		default:
			others = append(others, id)
		}
	}
	if len(leased) > 0 {
		if err := c.loadLeased(ctx, leased, token, load, r.values); err != nil {
			return nil, err
		}
	}
	// Ids leased elsewhere: wait for them (woken by events) as single loads, concurrently.
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, len(others))
	for i, id := range others {
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
			r.values[id] = v
			mu.Unlock()
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return r.values, nil
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
		_, _ = c.rdb.Pipelined(lctx, func(p redis.Pipeliner) error {
			for _, id := range ids {
				lua.CacheRelease.Eval(lctx, p, []string{c.leaseKey(id)}, token, c.channel(), "r:"+id)
			}
			return nil
		})
		return err
	}
	fills := make([]*redis.Cmd, len(ids))
	skipAbsent := c.opts.Filter != nil && !c.opts.AbsentWithFilter
	_, perr := c.rdb.Pipelined(lctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			v, ok := found[id]
			if !ok && skipAbsent {
				lua.CacheRelease.Eval(lctx, p, []string{c.leaseKey(id)}, token, c.channel(), "n:"+id)
				continue
			}
			b, px, err := c.encode(v, !ok)
			if err != nil {
				return err
			}
			fills[i] = lua.CacheFill.Eval(lctx, p, []string{c.Key(id), c.leaseKey(id)}, token, b, px, c.channel(), "f:"+id)
		}
		return nil
	})
	for i, id := range ids {
		if v, ok := found[id]; ok {
			out[id] = v
		}
		if fills[i] != nil {
			if n, err := fills[i].Int(); err == nil && n == 0 {
				c.stats.staleSetsRejected.Inc()
			}
		}
	}
	if perr != nil && !errors.Is(perr, redis.Nil) {
		return fmt.Errorf("cache: writing back %d ids: %w", len(ids), perr)
	}
	return nil
}

type readResult[V any] struct {
	values  map[string]V
	missing []string
}

// readMany answers what L1, the Bloom filter and Redis know about ids. With a loader (LoadMany),
// logically expired values are served and queued for rebuild.
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
	if c.opts.Filter != nil && len(todo) > 0 {
		if maybe, err := c.opts.Filter.TestMany(ctx, todo); err == nil {
			kept := todo[:0]
			for i, id := range todo {
				if maybe[i] {
					kept = append(kept, id)
				} else {
					c.stats.bloomRejects.Inc()
				}
			}
			todo = kept
		}
	}
	if len(todo) == 0 {
		return r, nil
	}
	since := make([]uint64, len(todo))
	cmds := make([]*redis.StringCmd, len(todo))
	_, err := c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range todo {
			since[i] = c.l1.begin(id)
			cmds[i] = p.Get(ctx, c.Key(id))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return r, fmt.Errorf("cache: reading %d ids: %w", len(todo), err)
	}
	for i, id := range todo {
		b, err := cmds[i].Bytes()
		if err != nil {
			c.stats.misses.Inc()
			r.missing = append(r.missing, id)
			continue
		}
		e, derr := decodeEntry(b)
		if derr != nil {
			c.stats.misses.Inc()
			r.missing = append(r.missing, id)
			continue
		}
		if single != nil { // GetMany only reads; LoadMany also rebuilds what is stale
			c.rebuildIfStale(id, e, single)
		}
		if v, err := c.remember(id, e, since[i]); err == nil {
			r.values[id] = v
		}
	}
	return r, nil
}

// outageLoadMany answers a batch from the loader when Redis fails, within the same bound
// as single outage loads.
func (c *Cache[V]) outageLoadMany(ctx context.Context, ids []string, load BatchLoader[V], cause error) (map[string]V, error) {
	if c.outage == nil {
		return nil, cause
	}
	if !c.outage.TryAcquire(1) {
		return nil, fmt.Errorf("%w: %v", ErrOverloaded, cause)
	}
	defer c.outage.Release(1)
	c.stats.outageLoads.Inc()
	c.stats.loads.Inc()
	return guard(func() (map[string]V, error) { return load(ctx, ids) })
}
