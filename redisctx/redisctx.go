// Package redisctx makes a Redis call return when its context ends, whatever the client's
// settings.
//
// go-redis bounds a call by the client's ReadTimeout and WriteTimeout and retries it, unless
// Options.ContextTimeoutEnabled is set: with a default client, a call on a Redis that hangs
// (SIGSTOP, CLIENT PAUSE, a stalled network) waits ReadTimeout (3 s) per try whatever the
// caller's deadline. A library that is handed a client cannot change its options, so it runs
// each call through Do: when the client would not honour ctx, the call runs in a goroutine and
// Do returns ctx's error as soon as ctx is done. The abandoned call finishes in the background
// (its connection times out; go-redis stops retrying once ctx is done), and DoThen lets the
// caller undo what it may still do (release a lock obtained after the caller gave up).
//
// Abandoned calls are bounded per client (MaxAbandoned): past that, Do fails at once with
// ErrUnresponsive instead of piling up goroutines on a Redis that answers nothing.
//
// With a client that honours deadlines (ContextTimeoutEnabled) and a ctx that has one, or a
// ctx that can never end, Do is a plain call: no goroutine, no allocation.
package redisctx

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// MaxAbandoned is how many calls per client may still be running after their callers gave up
// before Do refuses new ones with ErrUnresponsive.
const MaxAbandoned = 512

// ErrUnresponsive is returned (wrapping the ctx error when there is one) when MaxAbandoned
// calls on the client are still waiting for a Redis that does not answer.
var ErrUnresponsive = errors.New("redisctx: Redis is not answering (too many abandoned calls)")

// HonoursDeadlines reports whether rdb's own options make its calls end at a ctx deadline
// (Options.ContextTimeoutEnabled on a Client, ClusterClient or Ring).
func HonoursDeadlines(rdb redis.UniversalClient) bool {
	switch c := rdb.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return false
}

// Do runs call(ctx) and returns what it returns, or, as soon as ctx is done, the zero T and
// ctx's error (context.Cause when set). See the package comment.
func Do[T any](ctx context.Context, rdb redis.UniversalClient, call func(context.Context) (T, error)) (T, error) {
	return DoThen(ctx, rdb, call, nil)
}

// Err is Do for a call that returns only an error.
func Err(ctx context.Context, rdb redis.UniversalClient, call func(context.Context) error) error {
	_, err := DoThen(ctx, rdb, func(ctx context.Context) (struct{}, error) { return struct{}{}, call(ctx) }, nil)
	return err
}

// DoThen is Do; if the caller is answered ctx's error while the call still runs, late (if not
// nil) receives the call's result when it ends, in the call's goroutine.
func DoThen[T any](ctx context.Context, rdb redis.UniversalClient, call func(context.Context) (T, error), late func(T, error)) (T, error) {
	var zero T
	if ctx.Done() == nil {
		return call(ctx)
	}
	if err := ctx.Err(); err != nil {
		return zero, cause(ctx)
	}
	if _, ok := ctx.Deadline(); ok && HonoursDeadlines(rdb) {
		return call(ctx)
	}
	n := counter(rdb)
	if n.Load() >= MaxAbandoned {
		return zero, ErrUnresponsive
	}
	type result struct {
		v   T
		err error
	}
	const running, delivered, abandoned = 0, 1, 2
	var state atomic.Int32
	done := make(chan result, 1)
	go func() {
		v, err := call(ctx)
		if state.CompareAndSwap(running, delivered) {
			done <- result{v, err}
			return
		}
		// The caller gave up; it counted this call as abandoned. The call is over: it no longer
		// counts, also while late runs (a reader woken by late sees the count down).
		n.Add(-1)
		if late != nil {
			late(v, err)
		}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		n.Add(1)
		if state.CompareAndSwap(running, abandoned) {
			return zero, cause(ctx)
		}
		// The call finished as ctx ended: its result is (about to be) in done.
		n.Add(-1)
		r := <-done
		return r.v, r.err
	}
}

func cause(ctx context.Context) error {
	if c := context.Cause(ctx); c != nil {
		return c
	}
	return ctx.Err()
}

var abandonedCalls sync.Map // redis.UniversalClient -> *atomic.Int64

func counter(rdb redis.UniversalClient) *atomic.Int64 {
	if v, ok := abandonedCalls.Load(rdb); ok {
		return v.(*atomic.Int64)
	}
	v, _ := abandonedCalls.LoadOrStore(rdb, new(atomic.Int64))
	return v.(*atomic.Int64)
}

// Abandoned reports how many calls on rdb are still running after their callers gave up.
func Abandoned(rdb redis.UniversalClient) int64 { return counter(rdb).Load() }
