package cache

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/semaphore"
	"golang.org/x/sync/singleflight"

	"github.com/surgekit/surge/lua"
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
// RedisTimeout.
func (c *Cache[V]) Close() error {
	if c.rebuild != nil {
		c.rebuild.close()
	}
	c.pending.close()
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.RedisTimeout)
	defer cancel()
	return c.hub.leave(ctx, c.redis, c.channel(), c.events)
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

func newToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Get reads id from L1 and Redis only: the value, ErrNotFound for a cached absence (or, when
// nothing is cached, a Bloom reject), ErrMiss when nothing is cached, or the Redis error
// (while Redis fails, an L1 copy within MaxStale is returned instead). In logical mode a stale
// value is returned as is.
func (c *Cache[V]) Get(ctx context.Context, id string) (V, error) {
	var zero V
	if v, err, ok := c.fromLocal(id); ok {
		return v, err
	}
	since := c.l1.begin(id)
	b, err := c.get(ctx, id)
	if err == nil {
		v, err := c.fromRedis(ctx, id, b, since, nil)
		if !errors.Is(err, errUndecodable) {
			return v, err
		}
	} else if !errors.Is(err, redis.Nil) {
		if v, err, ok := c.fromStaleLocal(ctx, id); ok {
			return v, err
		}
		return zero, c.redisErr(ctx, "get "+c.Key(id), err)
	}
	if c.rejectedByFilter(ctx, id) {
		return zero, ErrNotFound
	}
	c.stats.misses.Inc()
	return zero, ErrMiss
}

// fromLocal answers from L1 when it holds a live copy.
func (c *Cache[V]) fromLocal(id string) (V, error, bool) {
	e, ok := c.l1.get(id)
	if !ok {
		var zero V
		return zero, nil, false
	}
	c.stats.localHits.Inc()
	if e.absent {
		return e.v, ErrNotFound, true
	}
	return e.v, nil, true
}

// fromStaleLocal answers from an L1 copy past its TTL (within MaxStale) when Redis failed.
func (c *Cache[V]) fromStaleLocal(ctx context.Context, id string) (V, error, bool) {
	e, ok := c.l1.stale(id)
	if !ok || ctx.Err() != nil {
		var zero V
		return zero, nil, false
	}
	c.stats.staleLocalServed.Inc()
	if e.absent {
		return e.v, ErrNotFound, true
	}
	return e.v, nil, true
}

// get reads id's raw entry from Redis (redis.Nil when there is none).
func (c *Cache[V]) get(ctx context.Context, id string) ([]byte, error) {
	return do(c.redis, ctx, func(ctx context.Context) ([]byte, error) { return c.rdb.Get(ctx, c.Key(id)).Bytes() })
}

// redisErr is the error of a failed Redis call: the caller's ctx error if that is what ended
// it, else the Redis error wrapped with what failed.
func (c *Cache[V]) redisErr(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("cache: %s: %w", what, err)
}

// errUndecodable marks a cached entry this cache cannot read: foreign bytes, another
// Options.Version, or a payload the Codec rejects (V changed in a deploy). Such an entry is
// dropped and read as a miss, so that a schema change costs one reload per key instead of an
// error on every read until the TTL.
var errUndecodable = errors.New("cache: undecodable entry")

// decode turns stored bytes into their entry and value (ErrNotFound for an absence).
func (c *Cache[V]) decode(b []byte) (entry, V, error) {
	var v V
	e, err := decodeEntry(b)
	switch {
	case err != nil:
		return e, v, errUndecodable
	case e.absent:
		return e, v, ErrNotFound
	case e.version != c.opts.Version:
		return e, v, fmt.Errorf("%w: version %d, this cache reads %d", errUndecodable, e.version, c.opts.Version)
	}
	if err := c.opts.Codec.Unmarshal(e.payload, &v); err != nil {
		return e, v, fmt.Errorf("%w: %v", errUndecodable, err)
	}
	return e, v, nil
}

// fromRedis answers a read from the bytes Redis holds for id: the value (kept in L1 when
// fresh), ErrNotFound for an absence, or errUndecodable after dropping bytes it cannot
// read. With load (a loading read) a logically expired value is queued for rebuild.
func (c *Cache[V]) fromRedis(ctx context.Context, id string, b []byte, since uint64, load Loader[V]) (V, error) {
	e, v, err := c.decode(b)
	if errors.Is(err, errUndecodable) {
		c.dropUndecodable(ctx, id, b)
		return v, err
	}
	c.countHit(e)
	if load != nil {
		c.rebuildIfStale(id, e, load)
	}
	// Fresh entries only: a logically expired one must go back to Redis so that its
	// rebuild is noticed; and only while events can invalidate the copy.
	if (e.expireAt.IsZero() || time.Now().Before(e.expireAt)) && c.events.live.Load() {
		c.l1.put(id, v, e.absent, since, e.expireAt)
	}
	return v, err
}

// fromLease decodes the value the lease script found cached; errUndecodable after dropping it.
func (c *Cache[V]) fromLease(ctx context.Context, id, value string) (V, error) {
	e, v, err := c.decode([]byte(value))
	if errors.Is(err, errUndecodable) {
		c.dropUndecodable(ctx, id, []byte(value))
		return v, err
	}
	c.countHit(e)
	return v, err
}

func (c *Cache[V]) countHit(e entry) {
	if e.absent {
		c.stats.absentHits.Inc()
	} else {
		c.stats.hits.Inc()
	}
}

// dropUndecodable deletes id's entry if it still holds b (a value written meanwhile stays),
// counting it. Best effort: if it fails, the next reader drops it.
func (c *Cache[V]) dropUndecodable(ctx context.Context, id string, b []byte) {
	c.stats.decodeErrors.Inc()
	_ = doErr(c.redis, context.WithoutCancel(ctx), func(ctx context.Context) error {
		return lua.CacheDrop.Run(ctx, c.rdb, []string{c.Key(id)}, b).Err()
	})
}

// rejectedByFilter reports whether the Bloom filter proves id absent. It is asked only about
// ids that nothing is cached for, so a hit costs what it costs without a filter. A failing
// filter (not built, deleted, a Redis error) rejects nothing: the read goes on as if there
// were no filter, counted, and absences are cached meanwhile (see filterAnswered).
func (c *Cache[V]) rejectedByFilter(ctx context.Context, id string) bool {
	if c.opts.Filter == nil {
		return false
	}
	fctx, cancel := c.redis.bound(ctx)
	defer cancel()
	ok, err := c.opts.Filter.Test(fctx, id)
	if !c.filterAnswered(err) || ok {
		return false
	}
	c.stats.bloomRejects.Inc()
	return true
}

// filterAnswered records whether a filter check worked. While checks fail the filter is
// unusable: it lets every id through, so absences are cached as if there were no filter,
// and the same missing ids do not reach the loader on every read.
func (c *Cache[V]) filterAnswered(err error) bool {
	if err != nil {
		c.stats.filterErrors.Inc()
		c.filterDown.Store(true)
		return false
	}
	if c.filterDown.Load() {
		c.filterDown.Store(false)
	}
	return true
}

// cachesAbsences reports whether a loader's ErrNotFound is written to Redis: always without a
// working filter; with one only if AbsentWithFilter (its false positives would create keys).
func (c *Cache[V]) cachesAbsences() bool {
	return c.opts.Filter == nil || c.opts.AbsentWithFilter || c.filterDown.Load()
}

// countFalsePositive counts an id the filter let through and the loader did not find.
func (c *Cache[V]) countFalsePositive() {
	if c.opts.Filter != nil && !c.filterDown.Load() {
		c.stats.bloomFalsePositives.Inc()
	}
}

// encode builds the stored entry for v (or an absence) and the TTL argument of the write
// scripts: milliseconds, or 0 for no Redis expiry (logical mode).
func (c *Cache[V]) encode(v V, absent bool) ([]byte, int64, error) {
	var payload []byte
	if !absent {
		var err error
		if payload, err = c.opts.Codec.Marshal(v); err != nil {
			return nil, 0, fmt.Errorf("cache: encoding %s value: %w", c.opts.Name, err)
		}
	}
	base := c.opts.TTL
	if absent {
		base = c.opts.AbsentTTL
	}
	ttl := c.ttl(base)
	if c.opts.Mode == ModeLogical && !absent {
		// The value itself carries its expiry; Redis keeps it until replaced or deleted.
		// Absences expire in Redis as in mutex mode: ids that do not exist are unbounded.
		return encodeEntry(payload, absent, time.Now().Add(ttl), c.opts.Version), 0, nil
	}
	return encodeEntry(payload, absent, time.Time{}, c.opts.Version), ms(ttl), nil
}

// Set stores v for id (write-through) and revokes any lease, so a load that read the
// database before this write cannot overwrite it. It also adds id to the Bloom filter.
func (c *Cache[V]) Set(ctx context.Context, id string, v V) error {
	b, px, err := c.encode(v, false)
	if err != nil {
		return err
	}
	if err := c.addToFilter(ctx, id); err != nil {
		return err
	}
	c.l1.invalidate(id)
	return c.runSet(ctx, id, b, px)
}

// Delete removes the cached values of ids and revokes their leases (the delete of
// delete-after-write), in one pipelined round trip. Every process drops its L1 copies and
// wakes its waiters on the events.
func (c *Cache[V]) Delete(ctx context.Context, ids ...string) error {
	return c.deleteAs(ctx, evSet, ids...)
}

// deleteAs is Delete announcing kind (evSet, or evCreated after a create).
func (c *Cache[V]) deleteAs(ctx context.Context, kind byte, ids ...string) error {
	for _, id := range ids {
		c.l1.invalidate(id)
	}
	errs, err := do(c.redis, ctx, func(ctx context.Context) ([]error, error) {
		cmds := make([]*redis.Cmd, len(ids))
		_, _ = c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, id := range ids {
				cmds[i] = lua.CacheSet.Eval(ctx, p, []string{c.Key(id), c.leaseKey(id)}, "", 0, c.channel(), string(kind)+":"+id)
			}
			return nil
		})
		var errs []error
		for i, cmd := range cmds {
			if err := cmd.Err(); err != nil && !errors.Is(err, redis.Nil) {
				errs = append(errs, fmt.Errorf("cache: delete %s: %w", c.Key(ids[i]), err))
			}
		}
		return errs, errors.Join(errs...)
	})
	if err != nil && errs == nil { // the call itself failed: timeout, breaker, connection
		return c.redisErr(ctx, fmt.Sprintf("delete %d ids", len(ids)), err)
	}
	return err
}

// runSet runs the set script for one id: b == nil deletes, px is encode's TTL argument.
func (c *Cache[V]) runSet(ctx context.Context, id string, b []byte, px int64) error {
	err := doErr(c.redis, ctx, func(ctx context.Context) error {
		return lua.CacheSet.Run(ctx, c.rdb, []string{c.Key(id), c.leaseKey(id)}, b, px, c.channel(), "s:"+id).Err()
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return c.redisErr(ctx, "set "+c.Key(id), err)
	}
	return nil
}
