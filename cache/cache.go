package cache

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/semaphore"
	"golang.org/x/sync/singleflight"
)

// Errors. A Redis failure is returned as itself (wrapped), never as ErrNotFound or ErrMiss.
var (
	// ErrNotFound means the value does not exist. A loader returns it to have the absence
	// cached (penetration defence); reads return it for cached absences and Bloom rejects.
	ErrNotFound = errors.New("cache: not found")
	// ErrMiss is returned by Get when nothing is cached for the id.
	ErrMiss = errors.New("cache: miss")
	// ErrOverloaded is returned when Redis is failing and the bounded database fallback is full.
	ErrOverloaded = errors.New("cache: redis unavailable and database fallback saturated")
	// ErrPeerLoadFailed is returned (wrapped) to callers that waited for another process's
	// load of the id when that load failed: the failure is shared across processes as it is
	// among the callers of one process, instead of each process retrying in turn.
	ErrPeerLoadFailed = errors.New("cache: another process's load of this id failed")
	// ErrUnavailable is returned (wrapped) by calls that need Redis while the breaker is open:
	// Redis failed BreakerFailures times in a row and is skipped for BreakerCooldown.
	ErrUnavailable = errors.New("cache: redis unavailable (breaker open)")
)

// Mode chooses the breakdown (hot key) defence.
type Mode int

const (
	// ModeMutex: values expire in Redis; on a miss one caller across all processes loads
	// (singleflight in-process, a Redis lease across processes) and the others wait for it.
	ModeMutex Mode = iota
	// ModeLogical: values never expire in Redis but carry their own expire-at; a stale value
	// is served at once while a bounded pool rebuilds it in the background.
	ModeLogical
)

// Options configures a cache. Zero values take the defaults noted.
type Options struct {
	Name   string // required: the entity, e.g. "shop"; keys are <Prefix>:<Name>:{<id>}
	Prefix string // "cache"
	Mode   Mode   // ModeMutex

	// Durations go to Redis in milliseconds (PX): a positive one under 1 ms is refused.
	TTL       time.Duration // how long a value is fresh (30 min)
	AbsentTTL time.Duration // how long an absence is cached (1 min)
	// Jitter lengthens each TTL by a random fraction in [0, Jitter) so keys written together
	// do not expire together (avalanche). The zero value means the default, 0.1: set a
	// negative Jitter for none (exact TTLs).
	Jitter float64

	LeaseTTL    time.Duration // how long one load may hold the lease before another may take over (5 s)
	LoadTimeout time.Duration // deadline of a shared load, detached from any caller (LeaseTTL)

	Codec Codec // JSON
	// Version is the version of V's encoding, stored with every value: a value of another
	// version is a miss (dropped and reloaded), like one the Codec cannot decode. Bump it when
	// V changes in a way that still decodes (a renamed field would read as its zero value).
	// During a rolling deploy, old and new processes then reload each other's values.
	Version uint32
	Filter  Filter // optional Bloom filter on the read path
	// AbsentWithFilter also caches absences in Redis when a Filter is set. Off by default:
	// the filter already bounds database loads for missing ids to its false-positive rate,
	// and not caching them keeps those ids from creating Redis keys.
	AbsentWithFilter bool
	Local            *LocalOptions // optional in-process L1, invalidated across processes
	Metrics          *Metrics      // optional Prometheus collectors

	// OutageLoads bounds concurrent loader calls made because Redis is failing (8); callers
	// of one id share a call. Negative disables the fallback: Redis errors are returned.
	OutageLoads int

	// RedisTimeout bounds every Redis call of the cache (1 s), together with the caller's
	// context, whatever the client's settings: go-redis itself ignores context deadlines
	// unless Options.ContextTimeoutEnabled, and waits ReadTimeout (3 s) per try on a Redis
	// that hangs.
	RedisTimeout time.Duration
	// BreakerFailures consecutive failed Redis calls (timeouts, connection errors) open the
	// breaker (5): for BreakerCooldown (1 s) the cache does not call Redis at all; reads are
	// answered by stale L1 copies (LocalOptions.MaxStale) or the bounded loader (OutageLoads),
	// writes fail with ErrUnavailable. Then one call probes Redis. Negative disables it.
	BreakerFailures int
	BreakerCooldown time.Duration

	// Logical mode: rebuild workers (4) and queue length (256). A full queue drops the
	// rebuild (the stale value is still served and the next stale read retries it).
	RebuildWorkers int
	RebuildQueue   int
}

func (o *Options) setDefaults() error {
	if o.Name == "" || strings.ContainsAny(o.Name, "{}") {
		return errors.New("cache: Options.Name is required and may not contain braces")
	}
	if o.Prefix == "" {
		o.Prefix = "cache"
	}
	for what, d := range map[string]time.Duration{"TTL": o.TTL, "AbsentTTL": o.AbsentTTL, "LeaseTTL": o.LeaseTTL} {
		if d > 0 && d < time.Millisecond {
			return fmt.Errorf("cache: Options.%s %v is under 1 ms, the resolution of Redis expiry (PX)", what, d)
		}
	}
	if o.TTL <= 0 {
		o.TTL = 30 * time.Minute
	}
	if o.AbsentTTL <= 0 {
		o.AbsentTTL = time.Minute
	}
	if o.Jitter == 0 {
		o.Jitter = 0.1
	}
	if o.Jitter < 0 {
		o.Jitter = 0
	}
	if o.Jitter > 1 {
		return fmt.Errorf("cache: Jitter %v is above 1", o.Jitter)
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = 5 * time.Second
	}
	if o.LoadTimeout <= 0 {
		o.LoadTimeout = o.LeaseTTL
	}
	if o.Codec == nil {
		o.Codec = JSON{}
	}
	if o.OutageLoads == 0 {
		o.OutageLoads = 8
	}
	if o.RedisTimeout <= 0 {
		o.RedisTimeout = time.Second
	}
	if o.BreakerFailures == 0 {
		o.BreakerFailures = 5
	}
	if o.BreakerCooldown <= 0 {
		o.BreakerCooldown = time.Second
	}
	if o.RebuildWorkers <= 0 {
		o.RebuildWorkers = 4
	}
	if o.RebuildQueue <= 0 {
		o.RebuildQueue = 256
	}
	return nil
}

// Loader fetches the value of id from the source of truth. Return ErrNotFound (possibly
// wrapped) when it does not exist, so that the absence is cached.
type Loader[V any] func(ctx context.Context, id string) (V, error)

// Cache is a typed Redis cache for one kind of value. It is safe for concurrent use; create
// one per entity and process, and Close it when done.
type Cache[V any] struct {
	rdb         redis.UniversalClient
	redis       *redisGate
	opts        Options
	stats       *stats
	group       singleflight.Group
	outageGroup singleflight.Group
	outage      *semaphore.Weighted
	events      *events
	hub         *hub
	rebuild     *rebuildPool
	pending     *pendingInvalidations
	filterDown  atomic.Bool // the last filter check failed
	closeOnce   sync.Once
	closeErr    error
	l1          *local[V]
}

// New returns a cache on rdb (a single node or a Cluster client). It subscribes to the
// cache's event channel (one pub/sub connection per client, shared by its caches) so that
// waiters are woken the moment a value lands. It waits for the subscription at most until
// ctx ends or RedisTimeout passes: with Redis down, New succeeds and the subscription comes up
// with Redis (until then no L1 copy is kept, and waiters fall back to their timers).
func New[V any](ctx context.Context, rdb redis.UniversalClient, opts Options) (*Cache[V], error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	c := &Cache[V]{rdb: rdb, opts: opts, stats: opts.Metrics.bind(opts.Name), l1: newLocal[V](opts.Local)}
	c.redis = &redisGate{rdb: rdb, timeout: opts.RedisTimeout, stats: c.stats,
		breaker: newBreaker(opts.BreakerFailures, opts.BreakerCooldown, c.stats)}
	if opts.OutageLoads > 0 {
		c.outage = semaphore.NewWeighted(int64(opts.OutageLoads))
	}
	c.pending = newPendingInvalidations(c.finish, opts.RedisTimeout, c.stats)
	c.events = newEvents(c.onEvent, c.l1.reset)
	c.hub = join(ctx, c.redis, c.channel(), c.events, opts.RedisTimeout)
	if opts.Mode == ModeLogical {
		c.rebuild = newRebuildPool(opts.RebuildWorkers, opts.RebuildQueue, c.stats)
	}
	return c, nil
}

// onEvent applies another process's write (or this one's) to this process's state: its L1
// copy goes, and a created id goes into this process's own filter (a shared RedisFilter
// already has it).
func (c *Cache[V]) onEvent(kind byte, id string) {
	c.l1.invalidate(id)
	if kind == evCreated && c.opts.Filter != nil {
		if _, shared := c.opts.Filter.(*RedisFilter); !shared {
			ctx, cancel := context.WithTimeout(context.Background(), c.opts.RedisTimeout)
			defer cancel()
			_ = c.opts.Filter.Add(ctx, id)
		}
	}
}

// Close stops the rebuild pool (waiting for running rebuilds) and the retries of pending
// invalidations (left to RunInvalidator through their intents), and leaves the event channel
// (the client's shared connection closes with its last cache). It waits for Redis at most
// RedisTimeout. Closing again does nothing.
func (c *Cache[V]) Close() error {
	c.closeOnce.Do(func() {
		if c.rebuild != nil {
			c.rebuild.close()
		}
		c.pending.close()
		ctx, cancel := context.WithTimeout(context.Background(), c.opts.RedisTimeout)
		defer cancel()
		c.closeErr = c.hub.leave(ctx, c.redis, c.channel(), c.events)
	})
	return c.closeErr
}

// Key is the Redis key of id's value. The id is the hash tag, so a value and its lease
// always share a Cluster slot.
func (c *Cache[V]) Key(id string) string { return c.opts.Prefix + ":" + c.opts.Name + ":{" + id + "}" }

func (c *Cache[V]) leaseKey(id string) string { return c.Key(id) + ":lease" }
func (c *Cache[V]) channel() string           { return c.opts.Prefix + ":" + c.opts.Name + ":events" }

// ttl returns base lengthened by the jitter fraction. Millisecond precision (PX), so
// sub-second TTLs are kept exactly rather than rounded up.
func (c *Cache[V]) ttl(base time.Duration) time.Duration {
	if c.opts.Jitter == 0 {
		return base
	}
	extra := int64(float64(base) * c.opts.Jitter)
	if extra <= 0 {
		return base
	}
	return base + time.Duration(mrand.Int64N(extra))
}

func ms(d time.Duration) int64 {
	if n := d.Milliseconds(); n > 0 {
		return n
	}
	return 1
}
