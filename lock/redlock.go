package lock

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/redisctx"
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
	// Metrics counts lost locks (NewMetrics). (none)
	Metrics *Metrics
	// ReplicaAcks and ReplicaTimeout are the replica check of each node (see Options), for
	// nodes that are masters with replicas of their own: a node's grant or renewal counts
	// toward the quorum only once ReplicaAcks of its replicas acknowledged it, so a node that
	// fails over to a lagging replica cannot forget a grant the quorum relied on. Independent
	// masters without replicas, as the Redlock algorithm describes them, leave it 0. (0, 1 s)
	ReplicaAcks    int
	ReplicaTimeout time.Duration
}

// Redlock is the Redlock algorithm over independent Redis nodes (not replicas of each other,
// not one Cluster): a lock is held when a majority of the nodes granted it within its lease,
// less the time the acquisition took and a clock-drift allowance. A failed acquisition, or a
// failure part way, releases on every node.
//
// Fencing: each node draws a token as a simple lock does (a hybrid logical clock, see the
// package documentation); the lock's token is the greatest of those of the granting nodes,
// written back to them (LockFenceFloor) before Obtain returns. Any later majority shares a
// node with this one, so it draws a greater token while that node keeps its counter; a node
// that lost it draws its clock's time, later than the earlier token unless the nodes' clocks
// differ by more than the time between the two acquisitions. Mutual exclusion itself still
// needs nodes that keep their data (persistence, or a restarted node kept out for a lease, as
// the Redlock paper requires).
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
	r := &Redlock{opts: opts, reg: newRegistry(opts.Metrics)}
	for _, c := range clients {
		r.nodes = append(r.nodes, New(c, Options{Prefix: opts.Prefix, WatchdogLease: opts.WatchdogLease,
			ReplicaAcks: opts.ReplicaAcks, ReplicaTimeout: opts.ReplicaTimeout, Metrics: opts.Metrics}))
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

// eachNode runs call on the nodes (indexes into r.nodes) in parallel, each through redisctx
// under its own timeout, so a hung node costs the timeout and no more. late (if not nil)
// receives the result of a call that ends after its node's timeout. Results are in node
// order; nodes not asked have the zero result with ErrNotObtained.
func eachNode[T any](ctx context.Context, r *Redlock, timeout time.Duration, nodes []int,
	call func(ctx context.Context, c *Client) (T, error), late func(i int, v T, err error)) []result[T] {
	res := make([]result[T], len(r.nodes))
	for i := range res {
		res[i].err = ErrNotObtained
	}
	var wg sync.WaitGroup
	for _, i := range nodes {
		wg.Go(func() {
			nctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			c := r.nodes[i]
			var lateFn func(T, error)
			if late != nil {
				lateFn = func(v T, err error) { late(i, v, err) }
			}
			v, err := redisctx.DoThen(nctx, c.rdb, func(ctx context.Context) (T, error) { return call(ctx, c) }, lateFn)
			res[i] = result[T]{v, err}
		})
	}
	wg.Wait()
	return res
}

func (r *Redlock) all() []int {
	idx := make([]int, len(r.nodes))
	for i := range idx {
		idx[i] = i
	}
	return idx
}

// Obtain takes the lock name on a quorum of the nodes (see LockOptions; Wait works as for
// Client.Obtain, woken by any node's release message). Each node call is bounded by the node
// timeout, so a hung node does not keep a majority from granting it. When not obtained, the
// error wraps ErrNotObtained and, if nodes failed, the last node error.
func (r *Redlock) Obtain(ctx context.Context, name string, o LockOptions) (*Lock, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	if r.reg.isClosed() {
		return nil, ErrClosed
	}
	ttl := o.Lease
	if ttl <= 0 {
		ttl = r.nodes[0].opts.WatchdogLease
	}
	drift, timeout := r.drift(ttl), r.nodeTimeout(ttl)
	k := r.nodes[0].keysOf(name)
	var fence int64
	var token string
	var start time.Time
	var lastErr error
	attempt := func(ctx context.Context) (bool, time.Duration, error) {
		// A fresh token per attempt: the background cancel of a failed attempt must not
		// release what a later one took.
		tok := rand.Text()
		start = time.Now()
		grants := eachNode(ctx, r, timeout, r.all(), func(ctx context.Context, c *Client) (grant, error) {
			return c.obtainToken(ctx, k, tok, ttl)
		}, func(i int, g grant, err error) { // answered after its timeout: not counted
			if err != nil || g.Taken {
				r.nodes[i].cancelLater(tok, name)
			}
		})
		var got []int
		var best int64
		retryIn := time.Duration(-1)
		for i, res := range grants {
			switch g := res.v; {
			case res.err != nil:
				lastErr = fmt.Errorf("lock: redlock node %d: %w", i, res.err)
			case g.Taken:
				got = append(got, i)
				best = max(best, g.Fence)
			case g.RetryIn >= 0 && (retryIn < 0 || g.RetryIn < retryIn):
				retryIn = g.RetryIn
			}
		}
		if len(got) >= r.opts.Quorum {
			raised := 0
			for _, res := range eachNode(ctx, r, timeout, got, func(ctx context.Context, c *Client) (struct{}, error) {
				return struct{}{}, raiseFence(ctx, c.rdb, k, best, ttl)
			}, nil) {
				if res.err == nil {
					raised++
				}
			}
			if raised >= r.opts.Quorum && time.Since(start) < ttl-drift {
				fence, token = best, tok
				return true, 0, nil
			}
		}
		// Not obtained: cancel everywhere (a node that timed out may have granted it).
		for _, n := range r.nodes {
			n.cancelLater(tok, name)
		}
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
		watches[i] = watch{n.subs, k.channel}
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
		for i, res := range eachNode(ctx, r, timeout, r.all(), func(ctx context.Context, c *Client) (bool, error) {
			return c.extendToken(ctx, k, token, t+drift)
		}, nil) {
			if res.err != nil {
				nodeErr = fmt.Errorf("node %d: %w", i, res.err)
			} else if res.v {
				ok++
			}
		}
		if ok >= r.opts.Quorum && time.Since(begin) < t {
			return nil
		}
		if nodeErr != nil {
			return lost("%s extended on %d of %d nodes (quorum %d; %v)", k.lock, ok, len(r.nodes), r.opts.Quorum, nodeErr)
		}
		return lost("%s extended on %d of %d nodes (quorum %d)", k.lock, ok, len(r.nodes), r.opts.Quorum)
	})
	l.ctx = l.lease.ctx
	l.release = func(ctx context.Context) error {
		released, err := r.releaseAll(ctx, k, token, timeout)
		switch {
		case released >= r.opts.Quorum:
			return nil
		case err != nil:
			return err
		default:
			return lost("%s was held on %d of %d nodes at release", k.lock, released, len(r.nodes))
		}
	}
	return l, nil
}

// releaseAll releases the lock on every node, each call bounded by ctx and the node timeout:
// how many still held it, and a node error.
func (r *Redlock) releaseAll(ctx context.Context, k keys, token string, timeout time.Duration) (int, error) {
	released := 0
	var firstErr error
	for i, res := range eachNode(ctx, r, timeout, r.all(), func(ctx context.Context, c *Client) (bool, error) {
		return releaseToken(ctx, c.rdb, k, token, false)
	}, nil) {
		if res.err != nil && firstErr == nil {
			firstErr = fmt.Errorf("lock: redlock release on node %d: %w", i, res.err)
		} else if res.v {
			released++
		}
	}
	return released, firstErr
}
