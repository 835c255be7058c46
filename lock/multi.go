package lock

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/lua"
	"github.com/surgekit/surge/redisctx"
)

// ObtainMulti takes several simple locks as one, all or nothing (Redisson's MultiLock). The
// names may hash to different Cluster slots: each is its own key with its own fencing token.
//
// It first tries every name in one pipelined round trip. If some are held, it gives back what
// it took and then takes the names one by one in sorted order, waiting (within o.Wait) for
// each: every caller goes in the same order, so two multi-locks cannot deadlock. If a name
// cannot be had in time, or ctx ends, or Redis fails, everything taken is given back (in the
// background: see the package documentation, "A hung Redis").
// The returned Lock has one lease over all names; losing any of them loses the lock.
func (c *Client) ObtainMulti(ctx context.Context, names []string, o LockOptions) (*Lock, error) {
	names = slices.Clone(names)
	slices.Sort(names)
	names = slices.Compact(names)
	if len(names) == 0 {
		return nil, fmt.Errorf("lock: ObtainMulti with no names")
	}
	for _, n := range names {
		if err := checkName(n); err != nil {
			return nil, err
		}
	}
	if c.reg.isClosed() {
		return nil, ErrClosed
	}
	ttl := c.leaseOf(o)
	m := &multi{c: c, names: names}
	for _, n := range names {
		m.keys = append(m.keys, c.keysOf(n))
	}
	var deadline time.Time
	if o.Wait > 0 {
		deadline = time.Now().Add(o.Wait)
	}

	// Fast path: all names in one round trip, within the wait.
	fctx := ctx
	if o.Wait > 0 {
		var cancel context.CancelFunc
		fctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	start := time.Now()
	fences, err := m.tryAll(fctx, ttl)
	if err != nil {
		return nil, attemptErr(ctx, fctx, err)
	}
	if fences == nil {
		if o.Wait == 0 {
			return nil, ErrNotObtained
		}
		// Slow path: one by one in sorted order.
		if fences, start, err = m.inOrder(ctx, ttl, o.Wait, deadline); err != nil {
			return nil, err
		}
	}
	l := &Lock{names: names, fences: fences}
	l.lease = c.reg.startLease(ctx, start, ttl, o, m.extend)
	l.ctx = l.lease.ctx
	l.release = m.release
	return l, nil
}

// multi is one multi-lock acquisition. Each round of it (the fast path, each pass of the slow
// path) takes the names with a fresh token, so that the background cancel of an earlier
// round can never release what a later round took.
type multi struct {
	c     *Client
	names []string
	keys  []keys
	token string
}

// result is one call's result among several (a pipeline, the nodes of a Redlock).
type result[T any] struct {
	v   T
	err error
}

// tryAll tries every name in one pipeline. It returns the fences if all were taken; if not,
// it gives back those it took and returns nil.
func (m *multi) tryAll(ctx context.Context, ttl time.Duration) ([]int64, error) {
	m.token = rand.Text()
	token := m.token
	obtainAll := func(ctx context.Context) ([]result[grant], error) {
		return runAll(ctx, m.c, m.lockKeys(), func(i int) lua.Call[grant] {
			return lua.LockObtain(m.keys[i].acquisition(token), token, ttl, fenceTTL(ttl))
		}, taken), nil
	}
	res, err := redisctx.DoThen(ctx, m.c.rdb, obtainAll, func(res []result[grant], _ error) {
		m.c.cancelLater(token, m.uncertain(res)...)
	})
	if err != nil { // abandoned: the late callback cancels what the pipeline took
		return nil, fmt.Errorf("lock: obtain %s: %w", m.keys[0].lock, err)
	}
	fences := make([]int64, len(m.names))
	var firstErr error
	taken := 0
	for i, r := range res {
		switch {
		case r.err != nil && firstErr == nil:
			firstErr = fmt.Errorf("lock: obtain %s: %w", m.keys[i].lock, r.err)
		case r.v.Taken:
			fences[i] = r.v.Fence
			taken++
		}
	}
	if firstErr == nil && taken == len(m.names) {
		return fences, nil
	}
	m.c.cancelLater(token, m.uncertain(res)...)
	return nil, firstErr
}

// uncertain are the names a pipeline of acquisitions took or may have taken.
func (m *multi) uncertain(res []result[grant]) []string {
	var names []string
	for i, r := range res {
		if r.err != nil || r.v.Taken {
			names = append(names, m.names[i])
		}
	}
	return names
}

// inOrder takes the names one after the other, waiting for each. When it had to wait, the
// names taken first may have run out of lease meanwhile: all are renewed once at the end,
// and if one was lost the whole acquisition starts over.
func (m *multi) inOrder(ctx context.Context, ttl, wait time.Duration, deadline time.Time) ([]int64, time.Time, error) {
	for {
		m.token = rand.Text()
		token := m.token
		fences := make([]int64, len(m.names))
		var start time.Time
		for i, k := range m.keys {
			attempt := func(ctx context.Context) (bool, time.Duration, error) {
				t := time.Now()
				g, err := m.c.acquireToken(ctx, k, token, ttl)
				if err != nil {
					return false, 0, fmt.Errorf("lock: obtain %s: %w", k.lock, err)
				}
				if g.Taken && i == 0 {
					start = t
				}
				fences[i] = g.Fence
				return g.Taken, g.RetryIn, nil
			}
			w := wait // < 0: as long as ctx
			if wait > 0 {
				w = max(time.Until(deadline), 0) // 0: one last try
			}
			if err := await(ctx, w, []watch{{m.c.subs, k.channel}}, m.c.reg.closed, attempt); err != nil {
				m.c.cancelLater(token, m.names[:i]...)
				return nil, time.Time{}, err
			}
		}
		if time.Since(start) < ttl/3 {
			return fences, start, nil
		}
		renewed := time.Now()
		err := m.extend(ctx, ttl)
		if err == nil {
			return fences, renewed, nil
		}
		m.c.cancelLater(token, m.names...)
		if ctx.Err() != nil {
			return nil, time.Time{}, ctx.Err()
		}
	}
}

// extend renews every name; an ErrLockLost if any is no longer held.
func (m *multi) extend(ctx context.Context, ttl time.Duration) error {
	renewed, err := m.runEach(ctx, func(k keys) lua.Call[bool] { return lua.LockExtend(k.lock, m.token, ttl) }, held)
	if err != nil {
		return fmt.Errorf("lock: extend %s: %w", m.keys[0].lock, err)
	}
	for i, r := range renewed {
		if r.err != nil {
			return fmt.Errorf("lock: extend %s: %w", m.keys[i].lock, r.err)
		}
		if !r.v {
			return lost("%s is no longer held by this handle", m.keys[i].lock)
		}
	}
	return nil
}

// release gives back every name (all of them, even when one was lost).
func (m *multi) release(ctx context.Context) error {
	released, err := m.runEach(ctx, func(k keys) lua.Call[bool] { return lua.LockRelease(k.lock, m.token, k.channel, nil) }, nil)
	if err != nil {
		return fmt.Errorf("lock: release %s: %w", m.keys[0].lock, err)
	}
	for i, r := range released {
		if r.err != nil {
			return fmt.Errorf("lock: release %s: %w", m.keys[i].lock, r.err)
		}
	}
	for i, r := range released {
		if !r.v {
			return lost("%s was no longer held by this handle", m.keys[i].lock)
		}
	}
	return nil
}

// runEach runs the call that call builds for each name in one round trip per node, through
// redisctx (see runAll: wrote nil for a release, which waits for no replica).
func (m *multi) runEach(ctx context.Context, call func(k keys) lua.Call[bool], wrote func(bool) bool) ([]result[bool], error) {
	return redisctx.Do(ctx, m.c.rdb, func(ctx context.Context) ([]result[bool], error) {
		return runAll(ctx, m.c, m.lockKeys(), func(i int) lua.Call[bool] { return call(m.keys[i]) }, wrote), nil
	})
}

// lockKeys are the lock keys of the names.
func (m *multi) lockKeys() []string {
	ks := make([]string, len(m.keys))
	for i, k := range m.keys {
		ks[i] = k.lock
	}
	return ks
}

// pipelineAll runs the calls call(0..n-1) in one pipeline (on a Cluster, go-redis splits it
// by node). EVALSHA first; calls that met NOSCRIPT (a Redis that has not seen the script: it
// did not run) are sent again with EVAL.
func pipelineAll[T any](ctx context.Context, rdb redis.UniversalClient, call func(i int) lua.Call[T], n int) []result[T] {
	pending := make([]*lua.Pending[T], n)
	_, _ = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range n {
			pending[i] = call(i).Queue(ctx, p)
		}
		return nil
	})
	var redo []int
	for i, c := range pending {
		if c.NoScript() {
			redo = append(redo, i)
		}
	}
	if len(redo) > 0 {
		_, _ = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, i := range redo {
				pending[i] = pending[i].Call().QueueEval(ctx, p)
			}
			return nil
		})
	}
	res := make([]result[T], n)
	for i, c := range pending {
		res[i].v, res[i].err = c.Result()
	}
	return res
}
