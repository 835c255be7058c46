package cache

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/redisctx"
)

// breaker stops sending calls to a Redis that keeps failing. After threshold consecutive
// outage errors it opens for cooldown: calls fail at once with ErrUnavailable, so readers go
// straight to their fallbacks (stale L1 copies, the bounded loader) instead of each waiting
// out a timeout. After the cool-down one call probes Redis; its success closes the breaker,
// its failure opens it for another cool-down. A nil breaker never opens.
type breaker struct {
	threshold int64
	cooldown  time.Duration
	failures  atomic.Int64
	openUntil atomic.Int64 // unix ns; 0 while closed
	probing   atomic.Bool  // a probe is in flight after the cool-down
	stats     *stats
}

func newBreaker(threshold int, cooldown time.Duration, s *stats) *breaker {
	if threshold <= 0 {
		return nil
	}
	return &breaker{threshold: int64(threshold), cooldown: cooldown, stats: s}
}

// allow reports whether a call may go to Redis, and whether it is the probe of an open breaker.
func (b *breaker) allow() (ok, probe bool) {
	if b == nil {
		return true, false
	}
	until := b.openUntil.Load()
	if until == 0 {
		return true, false
	}
	if time.Now().UnixNano() < until || !b.probing.CompareAndSwap(false, true) {
		return false, false
	}
	return true, true
}

// succeeded records a call Redis answered.
func (b *breaker) succeeded() {
	if b == nil {
		return
	}
	if b.failures.Load() != 0 { // read first: the hot path then writes nothing shared
		b.failures.Store(0)
	}
	if b.openUntil.Load() != 0 {
		b.openUntil.Store(0)
		b.probing.Store(false)
	}
}

// failed records an outage error; the threshold-th in a row (or a failed probe) opens.
func (b *breaker) failed() {
	if b == nil {
		return
	}
	if b.failures.Add(1) < b.threshold && !b.probing.Load() {
		return
	}
	if b.openUntil.Swap(time.Now().Add(b.cooldown).UnixNano()) == 0 {
		b.stats.breakerOpens.Inc()
	}
	b.probing.Store(false)
}

// abandoned records a call whose caller gave up before Redis answered: it says nothing about
// Redis, but a probe must hand its turn on.
func (b *breaker) abandoned(probe bool) {
	if b != nil && probe {
		b.probing.Store(false)
	}
}

// errRedisTimeout is the cause of a call cut at Options.RedisTimeout.
var errRedisTimeout = errors.New("cache: Redis did not answer within Options.RedisTimeout")

// redisGate runs the cache's Redis calls: each is bounded by RedisTimeout and the caller's
// ctx whatever the client's settings (redisctx: go-redis ignores deadlines unless
// ContextTimeoutEnabled), and feeds the breaker.
type redisGate struct {
	rdb     redis.UniversalClient
	timeout time.Duration
	breaker *breaker
	stats   *stats
}

// do runs call through the gate. It returns ErrUnavailable at once while the breaker is open,
// errRedisTimeout (or the caller's ctx error) when Redis did not answer in time.
func do[T any](g *redisGate, ctx context.Context, call func(ctx context.Context) (T, error)) (T, error) {
	return doThen(g, ctx, call, nil)
}

// doThen is do; late, if not nil, gets the result of a call abandoned at the bound, to undo a
// side effect that landed after the caller was answered.
func doThen[T any](g *redisGate, ctx context.Context, call func(ctx context.Context) (T, error), late func(T, error)) (T, error) {
	ok, probe := g.breaker.allow()
	if !ok {
		var zero T
		return zero, ErrUnavailable
	}
	cctx, cancel := g.bound(ctx)
	v, err := redisctx.DoThen(cctx, g.rdb, call, late)
	cancel()
	switch {
	case err == nil || errors.Is(err, redis.Nil) || !isOutage(err):
		g.breaker.succeeded()
	case ctx.Err() != nil:
		g.breaker.abandoned(probe)
	default:
		g.stats.redisErrors.Inc()
		g.breaker.failed()
	}
	return v, err
}

// doErr is do for a call that returns only an error.
func doErr(g *redisGate, ctx context.Context, call func(ctx context.Context) error) error {
	_, err := do(g, ctx, func(ctx context.Context) (struct{}, error) { return struct{}{}, call(ctx) })
	return err
}

// bound returns ctx limited to the gate's timeout (unchanged when its own deadline is sooner).
func (g *redisGate) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= g.timeout {
		return ctx, func() {}
	}
	return context.WithTimeoutCause(ctx, g.timeout, errRedisTimeout)
}

// isOutage reports whether err means Redis could not serve the call (no answer, a broken
// connection, or a reply saying it cannot serve now), as opposed to an answer.
func isOutage(err error) bool {
	var reply redis.Error
	if !errors.As(err, &reply) {
		return true
	}
	for _, p := range []string{"LOADING", "CLUSTERDOWN", "TRYAGAIN", "MASTERDOWN", "BUSY "} {
		if strings.HasPrefix(reply.Error(), p) {
			return true
		}
	}
	return false
}
