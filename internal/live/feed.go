package live

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// feed is one kind of stream (voucher stock, order status): a topic per key with subscribers,
// each topic with one poller goroutine.
type feed[K comparable, V comparable] struct {
	hub      *Hub
	name     string
	interval time.Duration
	throttle time.Duration // least time between two values to one subscriber (0: none)
	// poll reads a key's current value; final means the stream ends with it. Errors:
	// ErrNotFound ends the stream, errPending skips the tick, others are logged and skipped.
	poll func(ctx context.Context, key K) (v V, final bool, err error)
	// pending, if set, is asked at subscription when the first poll has no value yet: it
	// returns ErrNotFound if the key will never have one.
	pending func(ctx context.Context, key K) error

	mu     sync.Mutex
	topics map[K]*topic[V]
	polls  atomic.Int64
}

// topic is the shared state of one key: its subscribers, the last value its poller saw, and
// the poller's cancel function.
type topic[V comparable] struct {
	subs map[*slot[V]]struct{}
	last V
	have bool
	stop context.CancelFunc
}

// slot is one subscriber's mailbox. Its channel holds at most one value, always the latest
// not yet taken: offer replaces a value the subscriber has not picked up. done is closed when
// the topic ends; err (set before) says why, nil for a normal end.
type slot[V any] struct {
	ch   chan V
	done chan struct{}
	err  error
}

func newSlot[V any]() *slot[V] {
	return &slot[V]{ch: make(chan V, 1), done: make(chan struct{})}
}

// offer puts v in the slot, dropping a value still there. Callers hold the feed's lock, so
// there is one producer at a time and the loop ends by its second round.
func (s *slot[V]) offer(v V) {
	for {
		select {
		case s.ch <- v:
			return
		default:
		}
		select {
		case <-s.ch:
		default:
		}
	}
}

// subscribe adds a subscriber to key's topic, creating the topic and its poller if needed,
// and returns the subscriber's channel (see forward).
func (f *feed[K, V]) subscribe(ctx context.Context, key K) (<-chan V, error) {
	if f.hub.ctx.Err() != nil {
		return nil, ErrClosed
	}
	f.mu.Lock()
	t := f.topics[key]
	if t == nil {
		f.mu.Unlock()
		// First subscriber of this key: poll now, in the caller's goroutine, so that an
		// unknown key fails the subscription and the first value needs no wait.
		v, final, err := f.poll(ctx, key)
		f.polls.Add(1)
		have := err == nil
		if errors.Is(err, errPending) && f.pending != nil {
			err = f.pending(ctx, key)
		} else if errors.Is(err, errPending) {
			err = nil
		}
		if err != nil {
			return nil, err
		}
		if have && final {
			// Nothing will change any more: one value and the end.
			s := newSlot[V]()
			s.offer(v)
			close(s.done)
			return f.forward(ctx, key, nil, s), nil
		}
		f.mu.Lock()
		if f.hub.ctx.Err() != nil {
			f.mu.Unlock()
			return nil, ErrClosed
		}
		// Another subscriber may have created the topic meanwhile; then it is used (its value
		// is as fresh as ours).
		if t = f.topics[key]; t == nil {
			t = &topic[V]{subs: map[*slot[V]]struct{}{}, last: v, have: have}
			f.topics[key] = t
			f.start(key, t)
		}
	}
	s := newSlot[V]()
	t.subs[s] = struct{}{}
	if t.have {
		s.offer(t.last)
	}
	f.mu.Unlock()
	return f.forward(ctx, key, t, s), nil
}

// start runs t's poller. The caller holds f.mu.
func (f *feed[K, V]) start(key K, t *topic[V]) {
	ctx, stop := context.WithCancel(f.hub.ctx)
	t.stop = stop
	f.hub.wg.Add(1)
	go func() {
		defer f.hub.wg.Done()
		f.run(ctx, key, t)
	}()
}

// run polls key every interval until its context ends (the last subscriber left, or Close)
// or the stream ends (final value, ErrNotFound).
func (f *feed[K, V]) run(ctx context.Context, key K, t *topic[V]) {
	tick := time.NewTicker(f.interval)
	defer tick.Stop()
	var failing time.Time // when the current run of failed polls began
	var logged time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		v, final, err := f.poll(ctx, key)
		f.polls.Add(1)
		if ctx.Err() != nil {
			return
		}
		switch {
		case errors.Is(err, errPending):
			continue
		case errors.Is(err, ErrNotFound):
			f.mu.Lock()
			f.endLocked(key, t, ErrNotFound)
			f.mu.Unlock()
			return
		case err != nil:
			// Redis or the database failing: keep the stream, keep trying, log now and then.
			now := time.Now()
			if failing.IsZero() {
				failing = now
			}
			if now.Sub(logged) >= 30*time.Second {
				logged = now
				f.hub.log.Warn("live poll failing", "feed", f.name, "key", key, "since", failing, "err", err)
			}
			continue
		}
		if !failing.IsZero() {
			f.hub.log.Info("live poll recovered", "feed", f.name, "key", key, "failed_for", time.Since(failing))
			failing, logged = time.Time{}, time.Time{}
		}
		f.mu.Lock()
		if !t.have || t.last != v || final {
			t.last, t.have = v, true
			for s := range t.subs {
				s.offer(v)
			}
		}
		if final {
			f.endLocked(key, t, nil)
		}
		f.mu.Unlock()
		if final {
			return
		}
	}
}

// endLocked ends a topic: every subscriber is told (after its last value), the topic leaves
// the map and its poller is stopped. The caller holds f.mu.
func (f *feed[K, V]) endLocked(key K, t *topic[V], err error) {
	for s := range t.subs {
		s.err = err
		close(s.done)
	}
	t.subs = nil
	if f.topics[key] == t {
		delete(f.topics, key)
	}
	t.stop()
}

// leave removes a subscriber; the last one out stops the poller.
func (f *feed[K, V]) leave(key K, t *topic[V], s *slot[V]) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := t.subs[s]; !ok {
		return // the topic ended already
	}
	delete(t.subs, s)
	if len(t.subs) == 0 {
		if f.topics[key] == t {
			delete(f.topics, key)
		}
		t.stop()
	}
}

// endAll ends every topic without error (Close).
func (f *feed[K, V]) endAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for key, t := range f.topics {
		f.endLocked(key, t, nil)
	}
}

func (f *feed[K, V]) stats() (pollers, subscribers int, polls int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range f.topics {
		pollers++
		subscribers += len(t.subs)
	}
	return pollers, subscribers, f.polls.Load()
}

// forward is a subscriber's goroutine: it moves values from the slot to the returned
// (unbuffered) channel, skipping repeats and pausing f.throttle after each value, until ctx
// ends or the topic ends; then it leaves the topic and closes the channel. The slot keeps
// only the latest value, so a consumer slower than the poller misses intermediate values,
// never the latest one, and never holds up the poller. t is nil for a stream that needs no
// topic (one final value).
func (f *feed[K, V]) forward(ctx context.Context, key K, t *topic[V], s *slot[V]) <-chan V {
	out := make(chan V)
	go func() {
		defer close(out)
		if t != nil {
			defer f.leave(key, t, s)
		}
		var last V
		sent := false
		send := func(v V) bool {
			if sent && v == last {
				return true
			}
			select {
			case out <- v:
				last, sent = v, true
				return true
			case <-ctx.Done():
				return false
			}
		}
		for {
			select {
			case <-ctx.Done():
				return
			case v := <-s.ch:
				if !send(v) {
					return
				}
				if f.throttle > 0 && !sleep(ctx, f.throttle) {
					return
				}
			case <-s.done:
				// The final value, if the slot still holds one, goes out first.
				select {
				case v := <-s.ch:
					if !send(v) {
						return
					}
				default:
				}
				if s.err != nil && f.hub.opts.OnError != nil {
					f.hub.opts.OnError(ctx, s.err)
				}
				return
			}
		}
	}()
	return out
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
