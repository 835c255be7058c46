package lock

import (
	"context"
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
type subscriber struct {
	rdb redis.UniversalClient

	mu     sync.Mutex
	ps     *redis.PubSub // nil until the first wait
	done   chan struct{} // closed when the reader exits
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
	return &subscriber{rdb: rdb, queues: map[string][]*waiter{}}
}

// join queues w for channel ch, subscribing to ch if w is its first waiter here.
func (s *subscriber) join(ctx context.Context, ch string, w *waiter) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.ps == nil {
		s.ps = s.rdb.Subscribe(context.WithoutCancel(ctx))
		s.done = make(chan struct{})
		go s.read(s.ps.ChannelWithSubscriptions(redis.WithChannelSize(1024)))
	}
	q, subscribed := s.queues[ch]
	s.queues[ch] = append(q, w)
	if !subscribed {
		// Done under s.mu so that SUBSCRIBE and UNSUBSCRIBE of one channel reach Redis in the
		// order of the queue changes. An error is not fatal: go-redis keeps the channel and
		// subscribes it again when it reconnects (the confirmation then wakes w), and until
		// then w retries when the holder's lease runs out.
		_ = s.ps.Subscribe(ctx, ch)
	}
	return nil
}

// leave takes w out of ch's queue. If w was first in line and leaves without the lock, the
// next waiter is woken in its place; the last waiter to leave unsubscribes.
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
		if !s.closed {
			_ = s.ps.Unsubscribe(context.Background(), ch)
		}
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
	defer close(s.done)
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
// The first attempt runs before subscribing, so an uncontended lock costs one round trip.
func await(ctx context.Context, wait time.Duration, watches []watch, closed <-chan struct{}, attempt attemptFunc) error {
	ok, _, err := attempt(ctx)
	if err != nil || ok {
		return err
	}
	if wait == 0 {
		return ErrNotObtained
	}
	var deadline <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		deadline = t.C
	}
	owner, _ := OwnerOf(ctx)
	w := newWaiter(owner)
	obtained := false
	for i, wt := range watches {
		if err := wt.s.join(ctx, wt.ch, w); err != nil {
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
		ok, retryIn, err := attempt(ctx)
		if err != nil {
			return err
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
		case <-deadline:
			return ErrNotObtained
		case <-ctx.Done():
			return ctx.Err()
		case <-closed:
			return ErrClosed
		}
	}
}
