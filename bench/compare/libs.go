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
	// read is the library's usual read of a warm key (the hit scenario): get, or its
	// read-through call where it has no plain read.
	read(ctx context.Context, scenario, id string) (Payload, error)
	set(ctx context.Context, scenario, id string, v Payload) error
	// del is the delete of delete-after-write.
	del(ctx context.Context, scenario, id string) error
	close()
}

// setup is what a scenario asks of an instance. An instance serves one scenario.
type setup struct {
	scenario string
	addr     string        // the Redis it talks to
	filter   surge.Filter  // ours only: a Bloom filter in front of its scenario's reads
	local    bool          // keep an in-process copy where the library offers one
	ttl      time.Duration // how long values live (10 min when 0)
	// logical: ours runs in logical-expiry mode (stale served while one process rebuilds).
	logical bool
	// deadlineClient: ours gets a go-redis client with ContextTimeoutEnabled, whose calls end
	// at their context's deadline by themselves (with a default client surge runs each call
	// in a goroutine of its own to return at its bound).
	deadlineClient bool
}

func (s setup) expiry() time.Duration {
	if s.ttl > 0 {
		return s.ttl
	}
	return 10 * time.Minute
}

// library makes instances. pattern is a SCAN pattern matching every key its instances create.
type library struct {
	name    string
	version string
	pattern string
	// newInstance makes an independent instance (its own client and cache object).
	newInstance func(ctx context.Context, s setup) (instance, error)
}

// ---- go-zero core/stores/cache ---------------------------------------------------------------

type gozero struct {
	c      zcache.Cache
	prefix string
}

func newGoZero(run string) library {
	prefix := "cmp-" + run + "-gozero"
	return library{name: "go-zero", version: "go-zero v1.10.3 core/stores/cache `Take`", pattern: prefix + ":*",
		newInstance: func(ctx context.Context, s setup) (instance, error) {
			// go-zero shares one underlying go-redis client per address inside the process; the
			// cache node and its singleflight barrier are per instance, as in separate processes.
			rds, err := zredis.NewRedis(zredis.RedisConf{Host: s.addr, Type: zredis.NodeType, Protocol: 3,
				MaintNotifications: "disabled", PingTimeout: 2 * time.Second})
			if err != nil {
				return nil, err
			}
			c := zcache.NewNode(rds, syncx.NewSingleFlight(), zcache.NewStat("cmp"), errNotFound,
				zcache.WithExpiry(s.expiry()), zcache.WithNotFoundExpiry(time.Minute))
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

func (g *gozero) read(ctx context.Context, s, id string) (Payload, error) {
	return readByGet(ctx, g, s, id)
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
	ttl    time.Duration
}

func newGoRedisCache(run string) library {
	prefix := "cmp-" + run + "-goredis"
	return library{name: "go-redis/cache", version: "go-redis/cache v9.0.0 `Once` (local cache only in the outage scenario)", pattern: prefix + ":*",
		newInstance: func(ctx context.Context, s setup) (instance, error) {
			rdb := redis.NewClient(&redis.Options{Addr: s.addr})
			o := &gocache.Options{Redis: rdb}
			if s.local {
				o.LocalCache = gocache.NewTinyLFU(1000, time.Minute)
			}
			return &goredisCache{rdb: rdb, c: gocache.New(o), prefix: prefix, ttl: s.expiry()}, nil
		}}
}

func (g *goredisCache) key(s, id string) string { return g.prefix + ":" + s + ":" + id }

func (g *goredisCache) take(ctx context.Context, s, id string, load loadFunc) (Payload, error) {
	var v Payload
	err := g.c.Once(&gocache.Item{Ctx: ctx, Key: g.key(s, id), Value: &v, TTL: g.ttl,
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

func (g *goredisCache) read(ctx context.Context, s, id string) (Payload, error) {
	return readByGet(ctx, g, s, id)
}

func (g *goredisCache) set(ctx context.Context, s, id string, v Payload) error {
	return g.c.Set(&gocache.Item{Ctx: ctx, Key: g.key(s, id), Value: v, TTL: g.ttl})
}
func (g *goredisCache) del(ctx context.Context, s, id string) error {
	return g.c.Delete(ctx, g.key(s, id))
}
func (g *goredisCache) close() { _ = g.rdb.Close() }

// ---- ours ----------------------------------------------------------------------------------------

type ours struct {
	rdb *redis.Client
	c   *surge.Cache[Payload]
}

func newOurs(run string) library {
	prefix := "cmp-" + run + "-surge"
	return library{name: "surge", version: "surge cache `GetOrLoad` (mutex mode; Bloom filter, L1, logical mode where the scenario says)", pattern: prefix + ":*",
		newInstance: func(ctx context.Context, s setup) (instance, error) {
			rdb := redis.NewClient(&redis.Options{Addr: s.addr, ContextTimeoutEnabled: s.deadlineClient})
			opts := surge.Options{Prefix: prefix, Name: s.scenario, TTL: s.expiry(), Filter: s.filter}
			if s.local {
				opts.Local = &surge.LocalOptions{Size: 1000, TTL: time.Second}
			}
			if s.logical {
				opts.Mode, opts.Jitter = surge.ModeLogical, -1
			}
			c, err := surge.New[Payload](ctx, rdb, opts)
			if err != nil {
				_ = rdb.Close()
				return nil, err
			}
			return &ours{rdb: rdb, c: c}, nil
		}}
}

func (o *ours) take(ctx context.Context, s, id string, load loadFunc) (Payload, error) {
	return o.c.GetOrLoad(ctx, id, func(ctx context.Context, id string) (Payload, error) {
		v, err := load(ctx, id)
		if errors.Is(err, errNotFound) {
			err = surge.ErrNotFound
		}
		return v, err
	})
}

func (o *ours) get(ctx context.Context, s, id string) (Payload, bool, error) {
	v, err := o.c.Get(ctx, id)
	if errors.Is(err, surge.ErrMiss) || errors.Is(err, surge.ErrNotFound) {
		return v, false, nil
	}
	return v, err == nil, err
}

func (o *ours) read(ctx context.Context, s, id string) (Payload, error) {
	return readByGet(ctx, o, s, id)
}

func (o *ours) set(ctx context.Context, s, id string, v Payload) error { return o.c.Set(ctx, id, v) }
func (o *ours) del(ctx context.Context, s, id string) error            { return o.c.Delete(ctx, id) }
func (o *ours) close() {
	_ = o.c.Close()
	_ = o.rdb.Close()
}

// readByGet is read for libraries with a plain read: a miss is an error here.
func readByGet(ctx context.Context, in instance, s, id string) (Payload, error) {
	v, found, err := in.get(ctx, s, id)
	if err == nil && !found {
		err = fmt.Errorf("warm key %s missing", id)
	}
	return v, err
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
