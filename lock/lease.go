package lock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// lease keeps one acquisition alive and says when it is gone. Its ctx is cancelled on
// release (cause context.Canceled) or when the lock can no longer be trusted (ErrLockLost).
//
// The lease runs out locally at its deadline: the moment the request that took or last
// renewed the lock was sent, plus the ttl it set (capped by MaxHold). That is no later than
// Redis expires the key, clock drift aside, so if renewals stall the holder learns it no later
// than Redis lets someone else in. valid reads the deadline on the monotonic clock; a timer
// cancels ctx at the deadline. With the watchdog, a goroutine renews the lease every ttl/3; a
// renewal that fails, finds the lock gone or is not answered within ttl/6 cancels ctx at once.
type lease struct {
	reg     *registry
	ctx     context.Context
	cancel  context.CancelCauseFunc
	ttl     time.Duration
	refresh func(ctx context.Context, ttl time.Duration) error
	maxAt   time.Time // zero: no MaxHold

	mu       sync.Mutex
	deadline time.Time // when the lease runs out locally (monotonic reading)
	timer    *time.Timer
	done     chan struct{} // closed when the watchdog exits; nil without a watchdog
}

// startLease starts the lease of a lock taken by a request sent at start with lease ttl.
// The lease's context keeps base's values but not its cancellation.
func (r *registry) startLease(base context.Context, start time.Time, ttl time.Duration, o LockOptions,
	refresh func(ctx context.Context, ttl time.Duration) error) *lease {
	ctx, cancelCause := context.WithCancelCause(context.WithoutCancel(base))
	var ending sync.Mutex
	cancel := func(cause error) {
		// Counted before ctx ends, so that whoever sees the lock lost sees it counted; once,
		// as only the first cause counts.
		ending.Lock()
		defer ending.Unlock()
		if ctx.Err() == nil && errors.Is(cause, ErrLockLost) {
			r.metrics.countLost()
		}
		cancelCause(cause)
	}
	l := &lease{reg: r, ctx: ctx, cancel: cancel, ttl: ttl, refresh: refresh}
	if o.MaxHold > 0 {
		l.maxAt = start.Add(o.MaxHold)
	}
	l.mu.Lock()
	l.deadline = l.capped(start.Add(ttl))
	l.timer = time.AfterFunc(time.Until(l.deadline), l.expired)
	l.mu.Unlock()
	if o.Lease <= 0 {
		l.done = make(chan struct{})
		go l.watch()
	}
	r.mu.Lock()
	closed := r.isClosed()
	r.leases[l] = struct{}{}
	r.mu.Unlock()
	if closed { // Close ran meanwhile and did not see this lease
		l.end(ErrClosed)
	}
	return l
}

// capped is at, or MaxHold if that comes first.
func (l *lease) capped(at time.Time) time.Time {
	if !l.maxAt.IsZero() && l.maxAt.Before(at) {
		return l.maxAt
	}
	return at
}

// valid reports whether the lease is live and its deadline not passed.
func (l *lease) valid() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ctx.Err() == nil && time.Now().Before(l.deadline)
}

// currentDeadline is the local deadline.
func (l *lease) currentDeadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// expired is the timer's callback. A renewal may have moved the deadline since the timer
// fired: then it is not the end.
func (l *lease) expired() {
	l.mu.Lock()
	early := time.Now().Before(l.deadline)
	l.mu.Unlock()
	if early {
		return
	}
	if !l.maxAt.IsZero() && !time.Now().Before(l.maxAt) {
		l.cancel(lost("MaxHold reached"))
		return
	}
	l.cancel(lost("lease of %v ran out without renewal", l.ttl))
}

// prolong moves the deadline to at (capped by MaxHold) and re-arms the timer, unless the
// lease has ended; with onlyLater, never earlier than it is. It reports whether the lease
// is live.
func (l *lease) prolong(at time.Time, onlyLater bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx.Err() != nil {
		return false
	}
	at = l.capped(at)
	if onlyLater && !at.After(l.deadline) {
		return true
	}
	l.deadline = at
	l.timer.Reset(time.Until(at))
	return true
}

// lostErr is nil while the lease is live, else what Extend reports for it.
func (l *lease) lostErr() error {
	if l.ctx.Err() == nil {
		return nil
	}
	if cause := context.Cause(l.ctx); errors.Is(cause, ErrLockLost) || errors.Is(cause, ErrClosed) {
		return cause
	}
	return ErrNotOwner
}

// extend sets the lease to ttl in Redis (capped by MaxHold) and moves the local deadline.
// The request is given up at the current deadline: a renewal answered later cannot save
// the lock. A renewal the replicas did not acknowledge (ErrNotReplicated) loses the lock.
func (l *lease) extend(ctx context.Context, ttl time.Duration) error {
	if err := l.lostErr(); err != nil {
		return err
	}
	start := time.Now()
	if !l.maxAt.IsZero() {
		ttl = min(ttl, l.maxAt.Sub(start))
		if ttl <= 0 {
			return lost("MaxHold reached")
		}
	}
	rctx, cancel := context.WithDeadline(ctx, l.currentDeadline())
	err := l.refresh(rctx, ttl)
	cancel()
	if errors.Is(err, ErrNotReplicated) && !errors.Is(err, ErrLockLost) {
		// The master has the new lease, its replicas an older one: after a failover the lock
		// may expire before the deadline this renewal would set. Not to be trusted.
		err = fmt.Errorf("%w: %w", ErrLockLost, err)
	}
	switch {
	case err == nil:
		if !l.prolong(start.Add(ttl), false) {
			return l.lostErr()
		}
		return nil
	case errors.Is(err, ErrLockLost):
		l.cancel(err)
		return err
	case !l.valid():
		return lost("lease ran out while renewing (%v)", err)
	}
	return err
}

// watch renews the lease every ttl/3 until the lease ends. A renewal that errors cancels ctx
// at once; one that hangs is given up after ttl/6, so a stalled Redis is noticed at most half
// the lease after the last renewal, well before the lock expires.
func (l *lease) watch() {
	defer close(l.done)
	period := l.ttl / 3
	t := time.NewTimer(period)
	defer t.Stop()
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-t.C:
		}
		if !l.maxAt.IsZero() && !time.Now().Before(l.maxAt) {
			return // the timer cancels ctx with the MaxHold cause
		}
		rctx, cancel := context.WithTimeout(l.ctx, period/2)
		err := l.extend(rctx, l.ttl)
		cancel()
		if err != nil {
			if l.ctx.Err() == nil {
				l.cancel(fmt.Errorf("%w: watchdog renewal failed: %v", ErrLockLost, err))
			}
			return
		}
		t.Reset(period)
	}
}

// end cancels the lease with cause (nil: released), stops the timer and the watchdog and
// waits for it. A lease already lost keeps its first cause.
func (l *lease) end(cause error) {
	l.cancel(cause)
	l.mu.Lock()
	l.timer.Stop()
	l.mu.Unlock()
	if l.done != nil {
		<-l.done
	}
	l.reg.mu.Lock()
	delete(l.reg.leases, l)
	l.reg.mu.Unlock()
}

// registry tracks the leases of a Client or Redlock so that Close can end them.
type registry struct {
	mu      sync.Mutex
	leases  map[*lease]struct{}
	closed  chan struct{}
	once    sync.Once
	metrics *Metrics // nil: not counted
}

func newRegistry(m *Metrics) *registry {
	return &registry{leases: map[*lease]struct{}{}, closed: make(chan struct{}), metrics: m}
}

func (r *registry) isClosed() bool {
	select {
	case <-r.closed:
		return true
	default:
		return false
	}
}

// close makes waits return ErrClosed and ends every lease with the cause ErrClosed.
// It reports whether this call closed the registry.
func (r *registry) close() bool {
	first := false
	r.once.Do(func() {
		first = true
		r.mu.Lock()
		close(r.closed)
		leases := make([]*lease, 0, len(r.leases))
		for l := range r.leases {
			leases = append(leases, l)
		}
		r.mu.Unlock()
		for _, l := range leases {
			l.end(ErrClosed)
		}
	})
	return first
}
