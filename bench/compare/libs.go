package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	gocache "github.com/go-redis/cache/v9"
	"github.com/redis/go-redis/v9"
	zcache "github.com/zeromicro/go-zero/core/stores/cache"
	zredis "github.com/zeromicro/go-zero/core/stores/redis"
	"github.com/zeromicro/go-zero/core/syncx"

	surge "github.com/surgekit/surge/cache"
)

// Payload is the small JSON struct every library caches.
type Payload struct {
	ID    int64    `json:"id"`
	Name  string   `json:"name"`
	Price int64    `json:"price"`
	Stock int      `json:"stock"`
	Tags  []string `json:"tags"`
}

func payloadFor(id int64) Payload {
	return Payload{ID: id, Name: fmt.Sprintf("shop %d", id), Price: 1999 + id%100, Stock: int(id % 1000), Tags: []string{"flash", "sale"}}
}

// errNotFound is what a loader returns for a row that does not exist; each adapter maps it to
// its library's convention.
var errNotFound = errors.New("row not found")

// loadFunc is the "database" read of one id.
type loadFunc func(ctx context.Context, id string) (Payload, error)

// instance is one library's cache as one process would hold it: its own cache object (own
// singleflight) on its own Redis client. Scenario names keep the keys of scenarios apart.
type instance interface {
	// take reads id through the cache, calling load on a miss (the library's read-through).
	take(ctx context.Context, scenario, id string, load loadFunc) (Payload, error)
	// get reads id from the cache only; found is false for a miss or a cached absence.
	get(ctx context.Context, scenario, id string) (v Payload, found bool, err error)
	set(ctx context.Context, scenario, id string, v Payload) error
	// del is the delete of delete-after-write.
	del(ctx context.Context, scenario, id string) error
	close()
}

// library makes instances. pattern is a SCAN pattern matching every key its instances create.
type library struct {
	name    string
	version string
	pattern string
	// newInstance makes an independent instance; filter is only for ours (penetration).
	newInstance func(ctx context.Context, withFilter surge.Filter) (instance, error)
}

// ---- go-zero core/stores/cache ---------------------------------------------------------------

type gozero struct {
	c      zcache.Cache
	prefix string
}

func newGoZero(run, addr string) library {
	prefix := "cmp-" + run + "-gozero"
	return library{name: "go-zero", version: "go-zero v1.10.3 core/stores/cache `Take`", pattern: prefix + ":*",
		newInstance: func(ctx context.Context, _ surge.Filter) (instance, error) {
			// go-zero shares one underlying go-redis client per address inside the process; the
			// cache node and its singleflight barrier are per instance, as in separate processes.
			rds, err := zredis.NewRedis(zredis.RedisConf{Host: addr, Type: zredis.NodeType, Protocol: 3,
				MaintNotifications: "disabled", PingTimeout: 2 * time.Second})
			if err != nil {
				return nil, err
			}
			c := zcache.NewNode(rds, syncx.NewSingleFlight(), zcache.NewStat("cmp"), errNotFound,
				zcache.WithExpiry(10*time.Minute), zcache.WithNotFoundExpiry(time.Minute))
			return &gozero{c: c, prefix: prefix}, nil
		}}
}

func (g *gozero) key(s, id string) string { return g.prefix + ":" + s + ":" + id }

func (g *gozero) take(ctx context.Context, s, id string, load loadFunc) (Payload, error) {
	var v Payload
	err := g.c.TakeCtx(ctx, &v, g.key(s, id), func(val any) error {
		p, err := load(ctx, id)
		if err != nil {
			return err
		}
		*val.(*Payload) = p
		return nil
	})
	return v, err
}

func (g *gozero) get(ctx context.Context, s, id string) (Payload, bool, error) {
	var v Payload
	err := g.c.GetCtx(ctx, g.key(s, id), &v)
	if err != nil {
		if g.c.IsNotFound(err) { // a miss, or go-zero's "*" placeholder for a cached absence
			return v, false, nil
		}
		return v, false, err
	}
	return v, true, nil
}

func (g *gozero) set(ctx context.Context, s, id string, v Payload) error {
	return g.c.SetCtx(ctx, g.key(s, id), v)
}
func (g *gozero) del(ctx context.Context, s, id string) error { return g.c.DelCtx(ctx, g.key(s, id)) }
func (g *gozero) close()                                      {}

// ---- github.com/go-redis/cache/v9 --------------------------------------------------------------

type goredisCache struct {
	rdb    *redis.Client
	c      *gocache.Cache
	prefix string
}

func newGoRedisCache(run, addr string) library {
	prefix := "cmp-" + run + "-goredis"
	return library{name: "go-redis/cache", version: "go-redis/cache v9.0.0 `Once` (no local cache)", pattern: prefix + ":*",
		newInstance: func(ctx context.Context, _ surge.Filter) (instance, error) {
			rdb := redis.NewClient(&redis.Options{Addr: addr})
			return &goredisCache{rdb: rdb, c: gocache.New(&gocache.Options{Redis: rdb}), prefix: prefix}, nil
		}}
}

func (g *goredisCache) key(s, id string) string { return g.prefix + ":" + s + ":" + id }

func (g *goredisCache) take(ctx context.Context, s, id string, load loadFunc) (Payload, error) {
	var v Payload
	err := g.c.Once(&gocache.Item{Ctx: ctx, Key: g.key(s, id), Value: &v, TTL: 10 * time.Minute,
		Do: func(*gocache.Item) (any, error) { return load(ctx, id) }})
	return v, err
}

func (g *goredisCache) get(ctx context.Context, s, id string) (Payload, bool, error) {
	var v Payload
	err := g.c.Get(ctx, g.key(s, id), &v)
	if errors.Is(err, gocache.ErrCacheMiss) {
		return v, false, nil
	}
	return v, err == nil, err
}

func (g *goredisCache) set(ctx context.Context, s, id string, v Payload) error {
	return g.c.Set(&gocache.Item{Ctx: ctx, Key: g.key(s, id), Value: v, TTL: 10 * time.Minute})
}
func (g *goredisCache) del(ctx context.Context, s, id string) error {
	return g.c.Delete(ctx, g.key(s, id))
}
func (g *goredisCache) close() { _ = g.rdb.Close() }

// ---- ours ---------------------------------------------------------------------------------------

type ours struct {
	rdb    *redis.Client
	caches map[string]*surge.Cache[Payload]
}

func newOurs(run, addr string) library {
	prefix := "cmp-" + run + "-surge"
	return library{name: "surge", version: "surge cache `GetOrLoad` (mutex mode; + Bloom filter for penetration)", pattern: prefix + ":*",
		newInstance: func(ctx context.Context, filter surge.Filter) (instance, error) {
			rdb := redis.NewClient(&redis.Options{Addr: addr})
			o := &ours{rdb: rdb, caches: map[string]*surge.Cache[Payload]{}}
			for _, s := range scenarioNames {
				opts := surge.Options{Prefix: prefix, Name: s, TTL: 10 * time.Minute}
				if s == "penetration" {
					opts.Filter = filter
				}
				c, err := surge.New[Payload](ctx, rdb, opts)
				if err != nil {
					o.close()
					return nil, err
				}
				o.caches[s] = c
			}
			return o, nil
		}}
}

func (o *ours) take(ctx context.Context, s, id string, load loadFunc) (Payload, error) {
	return o.caches[s].GetOrLoad(ctx, id, func(ctx context.Context, id string) (Payload, error) {
		v, err := load(ctx, id)
		if errors.Is(err, errNotFound) {
			err = surge.ErrNotFound
		}
		return v, err
	})
}

func (o *ours) get(ctx context.Context, s, id string) (Payload, bool, error) {
	v, err := o.caches[s].Get(ctx, id)
	if errors.Is(err, surge.ErrMiss) || errors.Is(err, surge.ErrNotFound) {
		return v, false, nil
	}
	return v, err == nil, err
}

func (o *ours) set(ctx context.Context, s, id string, v Payload) error {
	return o.caches[s].Set(ctx, id, v)
}
func (o *ours) del(ctx context.Context, s, id string) error { return o.caches[s].Delete(ctx, id) }
func (o *ours) close() {
	for _, c := range o.caches {
		_ = c.Close()
	}
	_ = o.rdb.Close()
}

// isNotFound reports whether err is any library's "does not exist".
func isNotFound(err error) bool {
	return errors.Is(err, errNotFound) || errors.Is(err, surge.ErrNotFound)
}

// rawGet is the baseline: GET and json.Unmarshal, no library.
func rawGet(ctx context.Context, rdb *redis.Client, key string) (Payload, error) {
	var v Payload
	b, err := rdb.Get(ctx, key).Bytes()
	if err != nil {
		return v, err
	}
	return v, json.Unmarshal(b, &v)
}
