package lock

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/lua"
)

// ObtainMulti takes several simple locks as one, all or nothing (Redisson's MultiLock). The
// names may hash to different Cluster slots: each is its own key with its own fencing token.
//
// It first tries every name in one pipelined round trip. If some are held, it gives back what
// it took and then takes the names one by one in sorted order, waiting (within o.Wait) for
// each: every caller goes in the same order, so two multi-locks cannot deadlock. If a name
// cannot be had in time, or ctx ends, or Redis fails, everything taken is released.
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
	token := newToken()
	ttl := c.leaseOf(o)
	m := &multi{c: c, names: names, token: token}
	var deadline time.Time
	if o.Wait > 0 {
		deadline = time.Now().Add(o.Wait)
	}

	// Fast path: all names in one round trip.
	start := time.Now()
	fences, err := m.tryAll(ctx, ttl)
	if err != nil {
		return nil, err
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

type multi struct {
	c     *Client
	names []string
	token string
}

// tryAll tries every name in one pipeline. It returns the fences if all were taken; if not,
// it gives back those it took and returns nil.
func (m *multi) tryAll(ctx context.Context, ttl time.Duration) ([]int64, error) {
	keys := make([][]string, len(m.names))
	for i, n := range m.names {
		keys[i] = []string{m.c.Key(n), m.c.fenceKey(n)}
	}
	cmds := runAll(ctx, m.c.rdb, lua.LockObtain, keys, m.token, ms(ttl))
	fences := make([]int64, len(m.names))
	var taken []string
	var firstErr error
	for i, cmd := range cmds {
		res, err := cmd.Int64Slice()
		switch {
		case err != nil:
			if firstErr == nil {
				firstErr = fmt.Errorf("lock: obtain %s: %w", keys[i][0], err)
			}
			taken = append(taken, m.names[i]) // it may have run
		case res[0] == 1:
			fences[i] = res[1]
			taken = append(taken, m.names[i])
		}
	}
	if firstErr == nil && len(taken) == len(m.names) {
		return fences, nil
	}
	m.releaseDetached(taken)
	if firstErr != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, firstErr
}

// inOrder takes the names one after the other, waiting for each. When it had to wait, the
// names taken first may have run out of lease meanwhile: all are renewed once at the end,
// and if one was lost the whole acquisition starts over.
func (m *multi) inOrder(ctx context.Context, ttl, wait time.Duration, deadline time.Time) ([]int64, time.Time, error) {
	for {
		fences := make([]int64, len(m.names))
		var start time.Time
		for i, name := range m.names {
			keys := []string{m.c.Key(name), m.c.fenceKey(name)}
			attempt := func(ctx context.Context) (bool, time.Duration, error) {
				t := time.Now()
				res, err := lua.LockObtain.Run(ctx, m.c.rdb, keys, m.token, ms(ttl)).Int64Slice()
				if err != nil {
					m.releaseDetached(m.names[i : i+1]) // it may have run
					if ctx.Err() != nil {
						return false, 0, ctx.Err()
					}
					return false, 0, fmt.Errorf("lock: obtain %s: %w", keys[0], err)
				}
				if res[0] == 1 {
					if i == 0 {
						start = t
					}
					fences[i] = res[1]
					return true, 0, nil
				}
				return false, time.Duration(res[1]) * time.Millisecond, nil
			}
			w := wait // < 0: as long as ctx
			if wait > 0 {
				w = max(time.Until(deadline), 0) // 0: one last try
			}
			if err := await(ctx, w, []watch{{m.c.subs, m.c.channel(name)}}, m.c.reg.closed, attempt); err != nil {
				m.releaseDetached(m.names[:i])
				return nil, time.Time{}, err
			}
		}
		if time.Since(start) < ttl/3 {
			return fences, start, nil
		}
		renewed := time.Now()
		if err := m.extend(ctx, ttl); err == nil {
			return fences, renewed, nil
		} else if ctx.Err() != nil {
			m.releaseDetached(m.names)
			return nil, time.Time{}, ctx.Err()
		}
		m.releaseDetached(m.names)
	}
}

// extend renews every name; an ErrLockLost if any is no longer held.
func (m *multi) extend(ctx context.Context, ttl time.Duration) error {
	cmds := runAll(ctx, m.c.rdb, lua.LockExtend, m.keys(), m.token, ms(ttl))
	for i, cmd := range cmds {
		n, err := cmd.Int()
		if err != nil {
			return fmt.Errorf("lock: extend %s: %w", m.c.Key(m.names[i]), err)
		}
		if n == 0 {
			return lost("%s is no longer held by this handle", m.c.Key(m.names[i]))
		}
	}
	return nil
}

// release gives back every name (all of them, even when one was lost).
func (m *multi) release(ctx context.Context) error {
	return m.releaseNames(ctx, m.names)
}

func (m *multi) releaseNames(ctx context.Context, names []string) error {
	keys := make([][]string, len(names))
	chans := make([]any, len(names))
	for i, n := range names {
		keys[i] = []string{m.c.Key(n)}
		chans[i] = m.c.channel(n)
	}
	cmds := runAllArgs(ctx, m.c.rdb, lua.LockRelease, keys, func(i int) []any { return []any{m.token, chans[i]} })
	var firstErr error
	for i, cmd := range cmds {
		n, err := cmd.Int()
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("lock: release %s: %w", keys[i][0], err)
		} else if err == nil && n == 0 && firstErr == nil {
			firstErr = lost("%s was no longer held by this handle", keys[i][0])
		}
	}
	return firstErr
}

func (m *multi) releaseDetached(names []string) {
	if len(names) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = m.releaseNames(ctx, names)
}

func (m *multi) keys() [][]string {
	keys := make([][]string, len(m.names))
	for i, n := range m.names {
		keys[i] = []string{m.c.Key(n)}
	}
	return keys
}

// runAll runs script once per key set in one pipeline (on a Cluster, go-redis splits it by
// node), with the same args for each.
func runAll(ctx context.Context, rdb redis.UniversalClient, s *redis.Script, keys [][]string, args ...any) []*redis.Cmd {
	return runAllArgs(ctx, rdb, s, keys, func(int) []any { return args })
}

// runAllArgs is runAll with per-call args. EVALSHA first; calls that met NOSCRIPT (a Redis
// that has not seen the script: it did not run) are sent again with EVAL.
func runAllArgs(ctx context.Context, rdb redis.UniversalClient, s *redis.Script, keys [][]string, args func(i int) []any) []*redis.Cmd {
	cmds := make([]*redis.Cmd, len(keys))
	_, _ = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range keys {
			cmds[i] = s.EvalSha(ctx, p, keys[i], args(i)...)
		}
		return nil
	})
	var redo []int
	for i, cmd := range cmds {
		if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			redo = append(redo, i)
		}
	}
	if len(redo) > 0 {
		_, _ = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, i := range redo {
				cmds[i] = s.Eval(ctx, p, keys[i], args(i)...)
			}
			return nil
		})
	}
	return cmds
}
