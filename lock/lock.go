package lock

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/redisctx"
)

// Errors. A Redis failure is returned as itself (wrapped), never as one of these.
var (
	// ErrNotObtained means the lock was held by someone else for the whole wait.
	ErrNotObtained = errors.New("lock: not obtained")
	// ErrNotOwner means the caller does not hold the lock it tries to release or extend:
	// another owner's reentrant lock, or a handle already released.
	ErrNotOwner = errors.New("lock: not the owner")
	// ErrLockLost means a lock this handle held is gone or can no longer be trusted: it
	// expired, was deleted or taken over, a watchdog renewal failed, or MaxHold was reached.
	// It is the Cause of a lost lock's Context, and what Release and Extend return for it.
	// errors.Is(ErrLockLost, ErrNotOwner) holds: losing a lock is one way of not owning it.
	ErrLockLost error = lostError{}
	// ErrStaleFence is returned by GuardedExec when the guarded write matched no row: a
	// holder with a greater fencing token has written since (or the row does not exist).
	ErrStaleFence = errors.New("lock: stale fencing token")
	// ErrClosed is returned by calls on a closed Client or Redlock, and is the Cause of the
	// Context of locks still held when it was closed.
	ErrClosed = errors.New("lock: client closed")
)

type lostError struct{}

func (lostError) Error() string        { return "lock: lost" }
func (lostError) Is(target error) bool { return target == ErrNotOwner }

// lost wraps a reason as ErrLockLost.
func lost(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrLockLost, fmt.Sprintf(format, args...))
}

// Options configures a Client. Zero values take the defaults noted.
type Options struct {
	// Prefix of every key and channel: a lock named n is the key <Prefix>:{n}, its fence
	// counter <Prefix>:{n}:fence and its release channel <Prefix>:{n}:released. ("lock")
	Prefix string
	// WatchdogLease is the lease of locks obtained without an explicit one; a watchdog renews
	// it every WatchdogLease/3 while the lock is held. (30 s)
	WatchdogLease time.Duration
	// Metrics counts lost locks and writes replicas did not acknowledge (NewMetrics). (none)
	Metrics *Metrics
	// ReplicaAcks turns on the replica check: every acquisition and renewal (watchdog,
	// Extend; simple, reentrant and multi locks) waits, on the connection that ran its
	// script, until this many replicas of the master acknowledged it (WAIT). An acquisition
	// not acknowledged within ReplicaTimeout is undone and fails with ErrNotReplicated; a
	// renewal not acknowledged loses the lock. With it, a lock survives the failover to any
	// replica that acknowledged it; see the package documentation, "Failover". The client
	// must be a *redis.Client (a single node, a Sentinel failover client) or a
	// *redis.ClusterClient. (0: no check)
	ReplicaAcks int
	// ReplicaTimeout bounds each WAIT, and so what an acquisition costs when fewer than
	// ReplicaAcks replicas answer. WAIT is also cut to the caller's deadline and to half the
	// client's ReadTimeout. (1 s)
	ReplicaTimeout time.Duration
}

func (o *Options) setDefaults() {
	if o.Prefix == "" {
		o.Prefix = "lock"
	}
	if o.WatchdogLease <= 0 {
		o.WatchdogLease = 30 * time.Second
	}
	if o.ReplicaTimeout <= 0 {
		o.ReplicaTimeout = time.Second
	}
}

// LockOptions configures one acquisition. The zero value waits not at all and holds the lock
// under the watchdog until Release.
type LockOptions struct {
	// Lease is how long the lock lives in Redis unless extended. 0: the Client's
	// WatchdogLease, renewed by a watchdog every Lease/3 until Release. > 0: no watchdog; the
	// lock expires Lease after it was taken unless Extend is called, and its Context is
	// cancelled at that moment (measured from before the request was sent, so never after
	// Redis expires it, clock drift aside).
	Lease time.Duration
	// Wait is how long Obtain waits while someone else holds the lock: 0 tries once, > 0
	// waits at most Wait, < 0 waits until ctx ends. Waiters are woken by the holder's release
	// (pub/sub), otherwise when the holder's lease runs out; there is no polling.
	Wait time.Duration
	// MaxHold caps the total time the lock is held: neither the watchdog nor Extend pushes
	// its expiry past MaxHold after it was taken, and its Context is cancelled (ErrLockLost)
	// when MaxHold is reached. 0: no cap.
	MaxHold time.Duration
}

// Client takes locks on one Redis deployment (a single node or a Cluster). It is safe for
// concurrent use; create one per process and Close it when done.
//
// Goroutines: one watchdog per lock held without an explicit lease (stopped by Release), and,
// from the first wait on, one shared pub/sub connection with its reader (stopped by Close).
type Client struct {
	rdb  redis.UniversalClient
	opts Options
	subs *subscriber

	reg *registry
	bg  cleanups

	mu    sync.Mutex // guards holds
	holds map[holdKey]*hold
}

// New returns a Client on rdb. It opens no connection of its own until a caller has to wait.
func New(rdb redis.UniversalClient, opts Options) *Client {
	if rdb == nil {
		panic("lock: New with a nil redis client")
	}
	checkReplicaClient(rdb, opts)
	opts.setDefaults()
	return &Client{
		rdb:   rdb,
		opts:  opts,
		subs:  newSubscriber(rdb),
		reg:   newRegistry(opts.Metrics),
		holds: map[holdKey]*hold{},
	}
}

// Close stops the pub/sub connection and every watchdog, makes waiting calls return
// ErrClosed, and waits for the background cancels of abandoned acquisitions under way (each
// bounded by 1 s). It releases nothing: locks still held expire when their lease runs out,
// and their Context is cancelled with the cause ErrClosed. Release locks before closing.
func (c *Client) Close() error {
	if !c.reg.close() {
		return nil
	}
	c.bg.close()
	return c.subs.close()
}

// Key is the Redis key of the lock name. The name is the hash tag, so the lock and its fence
// counter share a Cluster slot.
func (c *Client) Key(name string) string { return c.opts.Prefix + ":{" + name + "}" }

func checkName(name string) error {
	if name == "" || strings.ContainsAny(name, "{}") {
		return fmt.Errorf("lock: invalid name %q (must be non-empty, without braces)", name)
	}
	return nil
}

func ms(d time.Duration) int64 {
	if n := d.Milliseconds(); n > 0 {
		return n
	}
	return 1
}

// leaseOf returns the lease in Redis for o: the explicit one, or the watchdog's.
func (c *Client) leaseOf(o LockOptions) time.Duration {
	if o.Lease > 0 {
		return o.Lease
	}
	return c.opts.WatchdogLease
}

// Obtain takes the simple (non-reentrant) lock name: SET NX PX with a random owner token and,
// in the same script, the next fencing token. With o.Wait it waits for the holder to release.
// It returns ErrNotObtained when the wait ends first, ctx.Err() when ctx does; every Redis
// call returns at ctx's deadline and at the end of the wait, whatever the client's options.
func (c *Client) Obtain(ctx context.Context, name string, o LockOptions) (*Lock, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	if c.reg.isClosed() {
		return nil, ErrClosed
	}
	token := rand.Text()
	k := c.keysOf(name)
	ttl := c.leaseOf(o)
	var fence int64
	var start time.Time
	attempt := func(ctx context.Context) (bool, time.Duration, error) {
		start = time.Now()
		g, err := c.acquireToken(ctx, k, token, ttl)
		if err != nil {
			return false, 0, fmt.Errorf("lock: obtain %s: %w", k.lock, err)
		}
		fence = g.Fence
		return g.Taken, g.RetryIn, nil
	}
	if err := await(ctx, o.Wait, []watch{{c.subs, k.channel}}, c.reg.closed, attempt); err != nil {
		return nil, err
	}
	l := &Lock{names: []string{name}, fences: []int64{fence}}
	l.lease = c.reg.startLease(ctx, start, ttl, o, func(ctx context.Context, ttl time.Duration) error {
		held, err := redisctx.Do(ctx, c.rdb, func(ctx context.Context) (bool, error) { return c.extendToken(ctx, k, token, ttl) })
		if err != nil {
			return fmt.Errorf("lock: extend %s: %w", k.lock, err)
		}
		if !held {
			return lost("%s is no longer held by this handle", k.lock)
		}
		return nil
	})
	l.ctx = l.lease.ctx
	l.release = func(ctx context.Context) error {
		held, err := redisctx.Do(ctx, c.rdb, func(ctx context.Context) (bool, error) { return releaseToken(ctx, c.rdb, k, token, false) })
		if err != nil {
			return fmt.Errorf("lock: release %s: %w", k.lock, err)
		}
		if !held {
			return lost("%s was no longer held by this handle", k.lock)
		}
		return nil
	}
	return l, nil
}

// Mutex is a lock name with its options, for the Lock/TryLock shape.
type Mutex struct {
	c    *Client
	name string
	o    LockOptions
}

// NewMutex returns the simple lock name with options o (o.Wait is set by each call).
func (c *Client) NewMutex(name string, o LockOptions) *Mutex { return &Mutex{c, name, o} }

// Lock waits until the lock is obtained or ctx ends (then it returns ctx.Err()).
func (m *Mutex) Lock(ctx context.Context) (*Lock, error) {
	o := m.o
	o.Wait = -1
	return m.c.Obtain(ctx, m.name, o)
}

// TryLock waits at most wait (0: tries once) and returns ErrNotObtained if the lock stayed held.
func (m *Mutex) TryLock(ctx context.Context, wait time.Duration) (*Lock, error) {
	o := m.o
	o.Wait = max(wait, 0)
	return m.c.Obtain(ctx, m.name, o)
}

// Lock is one held lock. Its methods are safe for concurrent use. The nil *Lock (what a
// failed Obtain returns) is a lock not held: Release and Extend return ErrNotOwner, Valid
// false.
type Lock struct {
	names  []string
	fences []int64
	lease  *lease
	ctx    context.Context
	// release gives the lock back in Redis: nil, an ErrLockLost, or a Redis error.
	release func(ctx context.Context) error
	// unlink ends a handle's own Context when the lease is shared (reentrant holds); nil
	// when the handle owns its lease.
	unlink func()
	// cancelOwn cancels a reentrant handle's own Context.
	cancelOwn context.CancelCauseFunc
	// owner is a reentrant handle's owner id.
	owner string

	mu       sync.Mutex
	released bool
}

// Name is the lock's name (the first, in sorted order, of a multi-lock).
func (l *Lock) Name() string { return l.names[0] }

// Names are the names a multi-lock holds, sorted; one name for other locks.
func (l *Lock) Names() []string { return append([]string(nil), l.names...) }

// Fence is the lock's fencing token: greater than that of every earlier holder of the name,
// across all clients, also after Redis lost its counter (see the package documentation,
// "Fencing"). Pass it to GuardedExec (or use Lock.GuardedExec, or store it next to what the
// lock protects) so that a holder that lost the lock without noticing cannot overwrite a
// newer holder's work. For a multi-lock it is the first name's token; see Fences.
func (l *Lock) Fence() int64 { return l.fences[0] }

// Fences are a multi-lock's fencing tokens, in the order of Names.
func (l *Lock) Fences() []int64 { return append([]int64(nil), l.fences...) }

// Context carries the values of the context the lock was obtained with and is cancelled when
// the lock is released or can no longer be trusted: context.Cause is context.Canceled after
// Release, an ErrLockLost when the lock was found gone, a renewal failed, the lease ran out
// or MaxHold was reached, ErrClosed when the Client was closed. Do the protected work under
// it. For a reentrant lock it also carries the owner (see WithOwner) and the handle (see
// Reentrant.Unlock).
//
// The cancellation runs on a timer: a process that was paused (SIGSTOP, a stalled VM, a long
// GC) past the end of the lease may find the Context not yet cancelled for a moment after it
// resumes. Valid does not have that delay.
func (l *Lock) Context() context.Context { return l.ctx }

// Done is Context().Done().
func (l *Lock) Done() <-chan struct{} { return l.ctx.Done() }

// Valid reports whether the lock can still be trusted right now: not released or lost, and
// its lease not run out on the monotonic clock. The local lease runs from the moment the
// request that took or last renewed the lock was sent (so it ends no later than the key in
// Redis, clock drift aside) and is capped by MaxHold. Check it right before a protected
// write; Lock.GuardedExec does.
func (l *Lock) Valid() bool {
	if l == nil {
		return false
	}
	l.mu.Lock()
	released := l.released
	l.mu.Unlock()
	return !released && l.ctx.Err() == nil && l.lease.valid()
}

// Extend sets the lock's remaining lease to ttl (capped by MaxHold), if it is still held.
// For a reentrant lock the lease in Redis is set to at least ttl (never shortened: other
// holds of the owner count on it) and the local lease to ttl. The call returns at ctx's
// deadline and at the end of the current lease (a renewal that lands later cannot save the
// lock). It returns ErrNotOwner after Release, an ErrLockLost if the lock is gone (a lost
// handle stays lost: obtain the lock anew), or a Redis error.
func (l *Lock) Extend(ctx context.Context, ttl time.Duration) error {
	if l == nil {
		return ErrNotOwner
	}
	l.mu.Lock()
	released := l.released
	l.mu.Unlock()
	if released {
		return ErrNotOwner
	}
	if ttl <= 0 {
		return errors.New("lock: Extend with a non-positive ttl")
	}
	return l.lease.extend(ctx, ttl)
}

// releaseTimeout bounds Release's Redis call when its ctx has no deadline.
const releaseTimeout = 2 * time.Second

// Release gives the lock back and wakes the waiters. It stops the watchdog and cancels the
// Context first, then deletes the lock in Redis. Being clean-up, the call runs even if ctx is
// already cancelled; it returns at ctx's deadline, or after 2 s if ctx has none (the lock
// then expires when its lease runs out). It returns nil, ErrNotOwner if the handle was
// already released (or is nil), an ErrLockLost if the lock was no longer held by this handle,
// or a Redis error.
func (l *Lock) Release(ctx context.Context) error {
	if l == nil {
		return ErrNotOwner
	}
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		return ErrNotOwner
	}
	l.released = true
	l.mu.Unlock()
	if l.unlink != nil {
		l.unlink()
	} else {
		l.lease.end(nil)
	}
	ctx, cancel := cleanupContext(ctx)
	defer cancel()
	err := l.release(ctx)
	if errors.Is(err, ErrLockLost) && !errors.Is(context.Cause(l.lease.ctx), ErrLockLost) {
		l.lease.reg.metrics.countLost() // gone before its holder noticed
	}
	return err
}

// cleanupContext keeps ctx's values and deadline but not its cancellation (so that a lock
// can be given back under the context it was cancelled with, its own Context included), and
// bounds a ctx without deadline by releaseTimeout.
func cleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(releaseTimeout)
	}
	return context.WithDeadline(context.WithoutCancel(ctx), deadline)
}
