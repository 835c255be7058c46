package lock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// subscriber is a Client's one pub/sub connection, shared by all its waiters. A lock's
// release channel is subscribed while someone in this process waits for the lock, and
// unsubscribed when the last waiter leaves.
//
// Wake-ups: a release message wakes the longest-waiting waiter of that lock in this process
// (one per process, not a herd); it stays first in line until it obtains the lock or leaves,
// and leaving without the lock passes the wake to the next. A subscription confirmation wakes
// every waiter of the lock: it comes after the subscription took effect (also after go-redis
// reconnected and resubscribed), so a release published before that is never missed for good.
// A lost message costs at most the holder's remaining lease: waiters also retry then.
//
// SUBSCRIBE and UNSUBSCRIBE are sent by one goroutine (sync), in the order the queues
// changed, so a waiter never waits for them: on a hung Redis they block that goroutine only
// (until the client's own timeouts), and the waiter retries when the holder's lease runs out.
type subscriber struct {
	rdb redis.UniversalClient

	mu     sync.Mutex
	ps     *redis.PubSub // nil until the first wait
	kick   chan struct{} // the set of channels with waiters changed
	done   chan struct{} // closed when the reader and sync have exited
	queues map[string][]*waiter
	closed bool
}

type waiter struct {
	sig   chan struct{}
	owner string // reentrant owner in the waiter's context, if any
}

func newWaiter(owner string) *waiter { return &waiter{sig: make(chan struct{}, 1), owner: owner} }

// wake asks the waiter to retry; wakes coalesce (one pending retry covers several releases).
func (w *waiter) wake() {
	select {
	case w.sig <- struct{}{}:
	default:
	}
}

func newSubscriber(rdb redis.UniversalClient) *subscriber {
	return &subscriber{rdb: rdb, queues: map[string][]*waiter{}, kick: make(chan struct{}, 1)}
}

// join queues w for channel ch; sync subscribes ch if w is its first waiter here.
func (s *subscriber) join(ch string, w *waiter) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.ps == nil {
		s.ps = s.rdb.Subscribe(context.Background())
		s.done = make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() { s.read(s.ps.ChannelWithSubscriptions(redis.WithChannelSize(1024))) })
		wg.Go(s.sync)
		go func() { wg.Wait(); close(s.done) }()
	}
	q, subscribed := s.queues[ch]
	s.queues[ch] = append(q, w)
	if !subscribed {
		s.changed()
	}
	return nil
}

// changed tells sync that the set of channels with waiters changed. Called with s.mu held.
func (s *subscriber) changed() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// sync brings the subscription in line with the channels that have waiters, until close.
// go-redis keeps the channels it was asked to subscribe even when the call failed, and
// subscribes them again when it reconnects (the confirmation then wakes their waiters).
func (s *subscriber) sync() {
	subscribed := map[string]bool{}
	for range s.kick {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return
		}
		var add, drop []string
		for ch := range s.queues {
			if !subscribed[ch] {
				add = append(add, ch)
			}
		}
		for ch := range subscribed {
			if _, ok := s.queues[ch]; !ok {
				drop = append(drop, ch)
			}
		}
		s.mu.Unlock()
		if len(add) > 0 {
			_ = s.ps.Subscribe(context.Background(), add...)
		}
		if len(drop) > 0 {
			_ = s.ps.Unsubscribe(context.Background(), drop...)
		}
		for _, ch := range add {
			subscribed[ch] = true
		}
		for _, ch := range drop {
			delete(subscribed, ch)
		}
	}
}

// leave takes w out of ch's queue. If w was first in line and leaves without the lock, the
// next waiter is woken in its place; the last waiter to leave has sync unsubscribe ch.
func (s *subscriber) leave(ch string, w *waiter, obtained bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queues[ch]
	i := 0
	for i < len(q) && q[i] != w {
		i++
	}
	if i == len(q) {
		return
	}
	q = append(q[:i], q[i+1:]...)
	if len(q) == 0 {
		delete(s.queues, ch)
		s.changed()
		return
	}
	s.queues[ch] = q
	if i == 0 && !obtained {
		q[0].wake()
	}
}

// wakeOwner wakes the waiters of ch whose owner is owner: it has just taken the reentrant
// lock, which they can now re-enter without a release.
func (s *subscriber) wakeOwner(ch, owner string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.queues[ch] {
		if w.owner == owner {
			w.wake()
		}
	}
}

func (s *subscriber) read(msgs <-chan any) {
	for m := range msgs {
		switch m := m.(type) {
		case *redis.Message:
			s.mu.Lock()
			if q := s.queues[m.Channel]; len(q) > 0 {
				q[0].wake()
			}
			s.mu.Unlock()
		case *redis.Subscription:
			if m.Kind != "subscribe" {
				continue
			}
			s.mu.Lock()
			for _, w := range s.queues[m.Channel] {
				w.wake()
			}
			s.mu.Unlock()
		}
	}
}

func (s *subscriber) close() error {
	s.mu.Lock()
	s.closed = true
	ps, done := s.ps, s.done
	s.changed() // sync sees closed and exits
	s.mu.Unlock()
	if ps == nil {
		return nil
	}
	err := ps.Close()
	<-done
	return err
}

// watch is a release channel to wait on, on a subscriber.
type watch struct {
	s  *subscriber
	ch string
}

// attemptFunc tries to take a lock once. It reports success, or how long until the holder's
// lease runs out (< 0: unknown).
type attemptFunc func(ctx context.Context) (ok bool, retryIn time.Duration, err error)

// fallbackWait bounds a wait whose holder's lease is unknown (a key without expiry).
const fallbackWait = time.Second

// await runs attempt until it succeeds. Between attempts it waits for a wake-up on one of the
// watches, for the holder's lease to run out, for the wait to end (ErrNotObtained), for ctx
// (ctx.Err()) or for closed (ErrClosed). wait 0 tries once; < 0 waits as long as ctx.
// Attempts run under ctx bounded by the wait, so an attempt that Redis does not answer ends
// with the wait, with its error. The first attempt runs before subscribing, so an uncontended
// lock costs one round trip.
func await(ctx context.Context, wait time.Duration, watches []watch, closed <-chan struct{}, attempt attemptFunc) error {
	actx := ctx
	if wait > 0 {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
	}
	ok, _, err := attempt(actx)
	if err != nil || ok {
		return attemptErr(ctx, actx, err)
	}
	if wait == 0 {
		return ErrNotObtained
	}
	owner, _ := OwnerOf(ctx)
	w := newWaiter(owner)
	obtained := false
	for i, wt := range watches {
		if err := wt.s.join(wt.ch, w); err != nil {
			for _, joined := range watches[:i] {
				joined.s.leave(joined.ch, w, false)
			}
			return err
		}
	}
	defer func() {
		for _, wt := range watches {
			wt.s.leave(wt.ch, w, obtained)
		}
	}()
	retry := time.NewTimer(time.Hour)
	defer retry.Stop()
	for {
		// Retry at once after joining: the lock may have been released in between.
		ok, retryIn, err := attempt(actx)
		if err != nil {
			return attemptErr(ctx, actx, err)
		}
		if ok {
			obtained = true
			return nil
		}
		if retryIn < 0 {
			retryIn = fallbackWait
		}
		retry.Reset(retryIn + time.Millisecond)
		select {
		case <-w.sig:
		case <-retry.C:
		case <-actx.Done():
			return attemptErr(ctx, actx, ErrNotObtained)
		case <-closed:
			return ErrClosed
		}
	}
}

// attemptErr is what a failed attempt under actx (ctx bounded by the wait) makes the caller
// see: ctx.Err() once ctx has ended (what a caller whose ctx ended expects); ErrNotObtained if
// the wait ended, wrapping the attempt's error if Redis had not answered by then; else err.
func attemptErr(ctx, actx context.Context, err error) error {
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case actx.Err() != nil && !errors.Is(err, ErrNotObtained):
		return fmt.Errorf("%w: the wait ended before Redis answered: %w", ErrNotObtained, err)
	}
	return err
}
