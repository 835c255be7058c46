package main

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/dtm-labs/rockscache"
	"github.com/redis/go-redis/v9"
)

// ---- github.com/dtm-labs/rockscache --------------------------------------------------------------

// rocks stores each key as a hash {value, lockUntil, lockOwner}; Fetch reads or locks in one
// script, TagAsDeleted is its delete (the value stays, marked, for Delay, and the next Fetch
// rebuilds it while serving it). An empty string is its "not found" (cached EmptyExpire).
type rocks struct {
	rdb    *redis.Client
	c      *rockscache.Client
	prefix string
	ttl    time.Duration
}

// rocksDelay is rockscache's Delay (how long a deleted key's value is kept for readers): its
// expiry is Fetch's expire minus Delay, so the scenarios add it to the TTL they want.
const rocksDelay = time.Second

func newRocks(run string) library {
	prefix := "cmp-" + run + "-rocks"
	return library{name: "rockscache", version: "rockscache v0.1.1 `Fetch` (weak consistency, the default)", pattern: prefix + ":*",
		newInstance: func(ctx context.Context, s setup) (instance, error) {
			rdb := redis.NewClient(&redis.Options{Addr: s.addr})
			o := rockscache.NewDefaultOptions()
			o.Delay = rocksDelay
			o.RandomExpireAdjustment = 0
			o.Context = ctx
			return &rocks{rdb: rdb, c: rockscache.NewClient(rdb, o), prefix: prefix, ttl: s.expiry() + rocksDelay}, nil
		}}
}

func (r *rocks) key(s, id string) string { return r.prefix + ":" + s + ":" + id }

func (r *rocks) take(ctx context.Context, s, id string, load loadFunc) (Payload, error) {
	var v Payload
	raw, err := r.c.Fetch2(ctx, r.key(s, id), r.ttl, func() (string, error) {
		p, err := load(ctx, id)
		if errors.Is(err, errNotFound) {
			return "", nil
		}
		if err != nil {
			return "", err
		}
		b, err := json.Marshal(p)
		return string(b), err
	})
	if err != nil {
		return v, err
	}
	if raw == "" {
		return v, errNotFound
	}
	return v, json.Unmarshal([]byte(raw), &v)
}

// get reads the stored value; one marked deleted or being rebuilt (lockUntil set) is not
// current, so it counts as absent.
func (r *rocks) get(ctx context.Context, s, id string) (Payload, bool, error) {
	var v Payload
	f, err := r.rdb.HMGet(ctx, r.key(s, id), "value", "lockUntil").Result()
	if err != nil {
		return v, false, err
	}
	raw, _ := f[0].(string)
	if raw == "" || f[1] != nil {
		return v, false, nil
	}
	return v, true, json.Unmarshal([]byte(raw), &v)
}

// read is Fetch: rockscache has no plain read (RawGet ignores its delete marks).
func (r *rocks) read(ctx context.Context, s, id string) (Payload, error) {
	return r.take(ctx, s, id, func(context.Context, string) (Payload, error) {
		return Payload{}, errors.New("warm key missing")
	})
}

func (r *rocks) set(ctx context.Context, s, id string, v Payload) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return r.c.RawSet(ctx, r.key(s, id), string(b), r.ttl)
}

func (r *rocks) del(ctx context.Context, s, id string) error {
	return r.c.TagAsDeleted2(ctx, r.key(s, id))
}
func (r *rocks) close() { _ = r.rdb.Close() }
