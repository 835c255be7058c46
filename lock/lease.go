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
// A local timer cancels ctx when the lease would run out in Redis, measured from before the
// request that set it was sent: if renewals stall, the holder learns it no later than Redis
// lets someone else in. With the watchdog, a goroutine renews the lease every ttl/3; a
// renewal that fails or finds the lock gone cancels ctx at once and stops.
type lease struct {
	reg     *registry
	ctx     context.Context
	cancel  context.CancelCauseFunc
	ttl     time.Duration
	refresh func(ctx context.Context, ttl time.Duration) error
	maxAt   time.Time // zero: no MaxHold

	mu    sync.Mutex
	timer *time.Timer
	done  chan struct{} // closed when the watchdog exits; nil without a watchdog
}

// startLease starts the lease of a lock taken by a request sent at start with lease ttl.
// The lease's context keeps base's values but not its cancellation.
func (r *registry) startLease(base context.Context, start time.Time, ttl time.Duration, o LockOptions,
	refresh func(ctx context.Context, ttl time.Duration) error) *lease {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(base))
	l := &lease{reg: r, ctx: ctx, cancel: cancel, ttl: ttl, refresh: refresh}
	if o.MaxHold > 0 {
		l.maxAt = start.Add(o.MaxHold)
	}
	l.mu.Lock()
	l.timer = time.AfterFunc(l.until(start.Add(ttl)), l.expired)
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

// until is how long from now until at, or until MaxHold if that comes first.
func (l *lease) until(at time.Time) time.Duration {
	if !l.maxAt.IsZero() && l.maxAt.Before(at) {
		at = l.maxAt
	}
	return time.Until(at)
}

func (l *lease) expired() {
	if !l.maxAt.IsZero() && !time.Now().Before(l.maxAt) {
		l.cancel(lost("MaxHold reached"))
		return
	}
	l.cancel(lost("lease of %v ran out without renewal", l.ttl))
}

// extend sets the lease to ttl in Redis (capped by MaxHold) and re-arms the local timer.
func (l *lease) extend(ctx context.Context, ttl time.Duration) error {
	if l.ctx.Err() != nil {
		if cause := context.Cause(l.ctx); errors.Is(cause, ErrLockLost) || errors.Is(cause, ErrClosed) {
			return cause
		}
		return ErrNotOwner
	}
	start := time.Now()
	if !l.maxAt.IsZero() {
		ttl = min(ttl, l.maxAt.Sub(start))
		if ttl <= 0 {
			return lost("MaxHold reached")
		}
	}
	if err := l.refresh(ctx, ttl); err != nil {
		if errors.Is(err, ErrLockLost) {
			l.cancel(err)
		}
		return err
	}
	l.mu.Lock()
	if l.ctx.Err() == nil {
		l.timer.Reset(l.until(start.Add(ttl)))
	}
	l.mu.Unlock()
	return nil
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
	mu     sync.Mutex
	leases map[*lease]struct{}
	closed chan struct{}
	once   sync.Once
}

func newRegistry() *registry {
	return &registry{leases: map[*lease]struct{}{}, closed: make(chan struct{})}
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
