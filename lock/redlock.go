package lock

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/lua"
)

// RedlockOptions configures a Redlock. Zero values take the defaults noted.
type RedlockOptions struct {
	Prefix        string        // key prefix on every node ("lock")
	WatchdogLease time.Duration // lease when LockOptions.Lease is 0, renewed every third (30 s)
	// Quorum is how many nodes must grant the lock. (a majority: len(clients)/2+1)
	Quorum int
	// DriftFactor is the clock drift allowed for, as a fraction of the lease; 2 ms are added
	// to it (the Redlock paper's allowance for Redis' expiry precision). (0.01)
	DriftFactor float64
	// NodeTimeout bounds each call to one node, so a node that is down costs little of the
	// lease. (Lease/20, at least 10 ms)
	NodeTimeout time.Duration
}

// Redlock is the Redlock algorithm over independent Redis nodes (not replicas of each other,
// not one Cluster): a lock is held when a majority of the nodes granted it within its lease,
// less the time the acquisition took and a clock-drift allowance. A failed acquisition, or a
// failure part way, releases on every node.
//
// Fencing: each node draws a token as a simple lock does; the lock's token is the greatest of
// those of the granting nodes, written back to them (LockFenceFloor) before Obtain returns.
// Any later majority shares a node with this one, so it draws a greater token: tokens
// increase across holders as long as the nodes keep their data (persistence, or a restarted
// node kept out for a lease, as the Redlock paper requires).
type Redlock struct {
	nodes []*Client
	opts  RedlockOptions
	reg   *registry
}

// NewRedlock returns a Redlock over clients, one per independent Redis node. Each node gets
// a Client of its own (for its release channel); Close closes them.
func NewRedlock(clients []redis.UniversalClient, opts RedlockOptions) *Redlock {
	if len(clients) == 0 {
		panic("lock: NewRedlock with no clients")
	}
	if opts.Quorum <= 0 {
		opts.Quorum = len(clients)/2 + 1
	}
	if opts.Quorum > len(clients) {
		panic("lock: Redlock quorum above the number of nodes")
	}
	if opts.DriftFactor <= 0 {
		opts.DriftFactor = 0.01
	}
	r := &Redlock{opts: opts, reg: newRegistry()}
	for _, c := range clients {
		r.nodes = append(r.nodes, New(c, Options{Prefix: opts.Prefix, WatchdogLease: opts.WatchdogLease}))
	}
	return r
}

// Close closes the node Clients and ends the watchdogs of the locks still held (see
// Client.Close). It releases nothing.
func (r *Redlock) Close() error {
	if !r.reg.close() {
		return nil
	}
	var errs []error
	for _, n := range r.nodes {
		errs = append(errs, n.Close())
	}
	return errors.Join(errs...)
}

func (r *Redlock) drift(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl)*r.opts.DriftFactor) + 2*time.Millisecond
}

func (r *Redlock) nodeTimeout(ttl time.Duration) time.Duration {
	if r.opts.NodeTimeout > 0 {
		return r.opts.NodeTimeout
	}
	return max(ttl/20, 10*time.Millisecond)
}

// each runs fn on every node in parallel, each call bounded by timeout, and returns the
// results in node order.
func (r *Redlock) each(ctx context.Context, timeout time.Duration, nodes []int, fn func(ctx context.Context, c *Client) *redis.Cmd) []*redis.Cmd {
	cmds := make([]*redis.Cmd, len(r.nodes))
	var wg sync.WaitGroup
	for _, i := range nodes {
		wg.Go(func() {
			nctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			cmds[i] = fn(nctx, r.nodes[i])
		})
	}
	wg.Wait()
	return cmds
}

func (r *Redlock) all() []int {
	idx := make([]int, len(r.nodes))
	for i := range idx {
		idx[i] = i
	}
	return idx
}

// Obtain takes the lock name on a quorum of the nodes (see LockOptions; Wait works as for
// Client.Obtain, woken by any node's release message). When not obtained, the error wraps
// ErrNotObtained and, if nodes failed, the last node error.
func (r *Redlock) Obtain(ctx context.Context, name string, o LockOptions) (*Lock, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	if r.reg.isClosed() {
		return nil, ErrClosed
	}
	token := newToken()
	ttl := o.Lease
	if ttl <= 0 {
		ttl = r.nodes[0].opts.WatchdogLease
	}
	drift, timeout := r.drift(ttl), r.nodeTimeout(ttl)
	key, fenceKey := r.nodes[0].Key(name), r.nodes[0].fenceKey(name)
	var fence int64
	var start time.Time
	var lastErr error
	attempt := func(ctx context.Context) (bool, time.Duration, error) {
		start = time.Now()
		cmds := r.each(ctx, timeout, r.all(), func(ctx context.Context, c *Client) *redis.Cmd {
			return lua.LockObtain.Run(ctx, c.rdb, []string{key, fenceKey}, token, ms(ttl))
		})
		var got []int
		var best int64
		retryIn := time.Duration(-1)
		for i, cmd := range cmds {
			res, err := cmd.Int64Slice()
			switch {
			case err != nil:
				lastErr = fmt.Errorf("lock: redlock node %d: %w", i, err)
			case res[0] == 1:
				got = append(got, i)
				best = max(best, res[1])
			case res[1] >= 0 && (retryIn < 0 || time.Duration(res[1])*time.Millisecond < retryIn):
				retryIn = time.Duration(res[1]) * time.Millisecond
			}
		}
		if len(got) >= r.opts.Quorum {
			raised := 0
			for _, cmd := range r.each(ctx, timeout, got, func(ctx context.Context, c *Client) *redis.Cmd {
				return lua.LockFenceFloor.Run(ctx, c.rdb, []string{fenceKey}, best)
			}) {
				if cmd != nil && cmd.Err() == nil {
					raised++
				}
			}
			if raised >= r.opts.Quorum && time.Since(start) < ttl-drift {
				fence = best
				return true, 0, nil
			}
		}
		// Not obtained: release everywhere (a node that timed out may have granted it).
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		r.releaseAll(rctx, name, token)
		cancel()
		if ctx.Err() != nil {
			return false, 0, ctx.Err()
		}
		if len(got) > 0 || retryIn < 0 {
			// A split vote or failing nodes: retry after a random delay, so that competing
			// clients do not split the vote again in lockstep.
			retryIn = time.Duration(mrand.Int64N(int64(50*time.Millisecond))) + 10*time.Millisecond
		}
		return false, retryIn, nil
	}
	watches := make([]watch, len(r.nodes))
	for i, n := range r.nodes {
		watches[i] = watch{n.subs, n.channel(name)}
	}
	if err := await(ctx, o.Wait, watches, r.reg.closed, attempt); err != nil {
		if errors.Is(err, ErrNotObtained) && lastErr != nil {
			return nil, fmt.Errorf("%w (%v)", ErrNotObtained, lastErr)
		}
		return nil, err
	}
	l := &Lock{names: []string{name}, fences: []int64{fence}}
	// The local lease ends drift earlier than the nodes' keys; renewals add the drift back.
	l.lease = r.reg.startLease(ctx, start, ttl-drift, o, func(ctx context.Context, t time.Duration) error {
		begin := time.Now()
		ok := 0
		var nodeErr error
		for i, cmd := range r.each(ctx, timeout, r.all(), func(ctx context.Context, c *Client) *redis.Cmd {
			return lua.LockExtend.Run(ctx, c.rdb, []string{key}, token, ms(t+drift))
		}) {
			n, err := cmd.Int()
			if err != nil {
				nodeErr = fmt.Errorf("node %d: %w", i, err)
			} else if n == 1 {
				ok++
			}
		}
		if ok >= r.opts.Quorum && time.Since(begin) < t {
			return nil
		}
		if nodeErr != nil {
			return lost("%s extended on %d of %d nodes (quorum %d; %v)", key, ok, len(r.nodes), r.opts.Quorum, nodeErr)
		}
		return lost("%s extended on %d of %d nodes (quorum %d)", key, ok, len(r.nodes), r.opts.Quorum)
	})
	l.ctx = l.lease.ctx
	l.release = func(ctx context.Context) error {
		released, err := r.releaseAll(ctx, name, token)
		switch {
		case released >= r.opts.Quorum:
			return nil
		case err != nil:
			return err
		default:
			return lost("%s was held on %d of %d nodes at release", key, released, len(r.nodes))
		}
	}
	return l, nil
}

// releaseAll releases the lock on every node: how many still held it, and a node error.
func (r *Redlock) releaseAll(ctx context.Context, name, token string) (int, error) {
	timeout := r.nodeTimeout(r.nodes[0].opts.WatchdogLease)
	if d, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(d), time.Millisecond)
	}
	released := 0
	var firstErr error
	for i, cmd := range r.each(ctx, timeout, r.all(), func(ctx context.Context, c *Client) *redis.Cmd {
		return lua.LockRelease.Run(ctx, c.rdb, []string{c.Key(name)}, token, c.channel(name))
	}) {
		n, err := cmd.Int()
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("lock: redlock release on node %d: %w", i, err)
		} else if n == 1 {
			released++
		}
	}
	return released, firstErr
}
