package cache

import (
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// LocalOptions configures the optional in-process L1 in front of Redis.
type LocalOptions struct {
	Size int           // entries kept (LRU beyond that); required
	TTL  time.Duration // how long an L1 copy may be served (5 s)
	// MaxStale is how long past TTL a copy may still be served while Redis fails (a call
	// failed or the breaker is open), counted as stale_local_served (1 min). The copy was
	// valid when read, but writes made meanwhile cannot reach this process: MaxStale bounds
	// that staleness. Negative: never serve past TTL.
	MaxStale time.Duration
}

// local is a size-bounded in-process copy of recent values. Every process drops its copy of
// an id when any process sets, fills or deletes it (the cache's pub/sub events), and copies
// also age out after TTL, which bounds staleness if an event is lost. A Redis outage is
// absorbed by L1 hits for as long as the copies last.
type local[V any] struct {
	lru      *lru.Cache[string, localEntry[V]]
	ttl      time.Duration
	maxStale time.Duration
	// epochs count invalidation events per bucket of ids. A read stores its result in L1
	// only if no event for its bucket arrived since it started, so a value read from Redis
	// just before a delete cannot be put back after the delete's event removed the old copy.
	epochs [256]atomic.Uint64
}

func bucket(id string) uint8 {
	h := uint32(2166136261) // FNV-1a
	for i := 0; i < len(id); i++ {
		h = (h ^ uint32(id[i])) * 16777619
	}
	return uint8(h)
}

type localEntry[V any] struct {
	v        V
	absent   bool
	expireAt time.Time
}

func newLocal[V any](o *LocalOptions) *local[V] {
	if o == nil || o.Size <= 0 {
		return nil
	}
	ttl, maxStale := o.TTL, o.MaxStale
	if ttl <= 0 {
		ttl = 5 * time.Second
	}
	if maxStale == 0 {
		maxStale = time.Minute
	}
	l, _ := lru.New[string, localEntry[V]](o.Size) // errors only for size <= 0
	return &local[V]{lru: l, ttl: ttl, maxStale: max(maxStale, 0)}
}

func (l *local[V]) get(id string) (localEntry[V], bool) {
	if l == nil {
		return localEntry[V]{}, false
	}
	e, ok := l.lru.Get(id)
	if !ok || time.Now().After(e.expireAt) {
		return localEntry[V]{}, false
	}
	return e, true
}

// stale returns a copy past its TTL but within MaxStale, for when Redis fails. Copies that an
// event invalidated are gone: only ones that aged out are served.
func (l *local[V]) stale(id string) (localEntry[V], bool) {
	if l == nil || l.maxStale == 0 {
		return localEntry[V]{}, false
	}
	e, ok := l.lru.Peek(id)
	if !ok || time.Now().After(e.expireAt.Add(l.maxStale)) {
		return localEntry[V]{}, false
	}
	return e, true
}

func (l *local[V]) begin(id string) uint64 {
	if l == nil {
		return 0
	}
	return l.epochs[bucket(id)].Load()
}

// put stores a copy unless an invalidation arrived since begin returned since. The copy
// lives TTL, and no later than until if that is set (a logical value's own expire-at: after
// it, reads must reach Redis to see the rebuild).
func (l *local[V]) put(id string, v V, absent bool, since uint64, until time.Time) {
	if l == nil || l.epochs[bucket(id)].Load() != since {
		return
	}
	expireAt := time.Now().Add(l.ttl)
	if !until.IsZero() && until.Before(expireAt) {
		expireAt = until
	}
	l.lru.Add(id, localEntry[V]{v: v, absent: absent, expireAt: expireAt})
}

func (l *local[V]) invalidate(id string) {
	if l == nil {
		return
	}
	l.epochs[bucket(id)].Add(1)
	l.lru.Remove(id)
}

// reset drops every copy, as if each had been invalidated (events were lost).
func (l *local[V]) reset() {
	if l == nil {
		return
	}
	for i := range l.epochs {
		l.epochs[i].Add(1)
	}
	l.lru.Purge()
}
