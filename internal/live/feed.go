package live

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/surgekit/surge/internal/wait"
)

// feed is one kind of stream (voucher stock, order status): a topic per key with its
// subscribers. A feed runs no goroutine of its own: the Hub sets values from events, catch-ups
// and sweeps, and each subscriber has one forwarding goroutine.
type feed[K comparable, V comparable] struct {
	hub      *Hub
	name     string
	throttle time.Duration // least time between two values to one subscriber (0: none)
	// read reads a key's current value; final means the stream ends with it; group is the
	// voucher the key belongs to (batched reads go per voucher). Errors: ErrNotFound ends the
	// stream, errPending means no value yet, others are failures.
	read func(ctx context.Context, key K) (v V, final bool, group int, err error)
	// pending, if set, is asked at subscription when the first read has no value yet: it
	// returns ErrNotFound if the key will never have one.
	pending func(ctx context.Context, key K) error

	mu     sync.Mutex
	topics map[K]*topic[V]
	reads  atomic.Int64 // reads made (subscriptions' first reads, catch-ups, sweeps)
	drops  atomic.Int64 // values replaced before their subscriber took them
}

// topic is the shared state of one key: its subscribers and the last value seen.
type topic[V comparable] struct {
	subs    map[*slot[V]]struct{}
	last    V
	have    bool
	group   int  // the voucher (0 until the first read)
	loading bool // the first read is under way
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

// offer puts v in the slot, dropping a value still there (true if it did). Callers hold the
// feed's lock, so there is one producer at a time and the loop ends by its second round.
func (s *slot[V]) offer(v V) (dropped bool) {
	for {
		select {
		case s.ch <- v:
			return dropped
		default:
		}
		select {
		case <-s.ch:
			dropped = true
		default:
		}
	}
}

// subscribe adds a subscriber to key's topic. The first subscriber of a key registers the
// topic before reading its value, so that an event arriving during the read is not lost (an
// event's final value wins over the read's); an unknown key fails the subscription.
func (f *feed[K, V]) subscribe(ctx context.Context, key K) (<-chan V, error) {
	f.mu.Lock()
	if f.hub.ctx.Err() != nil {
		f.mu.Unlock()
		return nil, ErrClosed
	}
	s := newSlot[V]()
	t := f.topics[key]
	if t != nil {
		t.subs[s] = struct{}{}
		if t.have {
			s.offer(t.last)
		}
		f.mu.Unlock()
		return f.forward(ctx, key, t, s), nil
	}
	t = &topic[V]{subs: map[*slot[V]]struct{}{s: {}}, loading: true}
	f.topics[key] = t
	f.mu.Unlock()

	v, final, group, err := f.read(ctx, key)
	f.reads.Add(1)
	have := err == nil
	if err == errPending {
		err = nil
		if f.pending != nil {
			err = f.pending(ctx, key)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	t.loading, t.group = false, group
	if _, ok := t.subs[s]; !ok {
		// Ended meanwhile (Close, or an event's final value): the slot says how.
		return f.forward(ctx, key, nil, s), nil
	}
	if err != nil {
		f.endLocked(key, t, err)
		return nil, err
	}
	if have && !t.have {
		f.setLocked(key, t, v, final)
	}
	return f.forward(ctx, key, t, s), nil
}

// set gives key's topic (if any) a new value; final ends it after that value.
func (f *feed[K, V]) set(key K, v V, final bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t := f.topics[key]; t != nil {
		f.setLocked(key, t, v, final)
	}
}

func (f *feed[K, V]) setLocked(key K, t *topic[V], v V, final bool) {
	if !t.have || t.last != v {
		t.last, t.have = v, true
		for s := range t.subs {
			if s.offer(v) {
				f.drops.Add(1)
			}
		}
	}
	if final {
		f.endLocked(key, t, nil)
	}
}

// end ends key's topic (if any) with err.
func (f *feed[K, V]) end(key K, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t := f.topics[key]; t != nil {
		f.endLocked(key, t, err)
	}
}

// endLocked ends a topic: every subscriber is told (after its last value) and the topic
// leaves the map. The caller holds f.mu.
func (f *feed[K, V]) endLocked(key K, t *topic[V], err error) {
	for s := range t.subs {
		s.err = err
		close(s.done)
	}
	t.subs = nil
	if f.topics[key] == t {
		delete(f.topics, key)
	}
}

// leave removes a subscriber; the last one out removes the topic.
func (f *feed[K, V]) leave(key K, t *topic[V], s *slot[V]) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := t.subs[s]; !ok {
		return // the topic ended already
	}
	delete(t.subs, s)
	if len(t.subs) == 0 && !t.loading && f.topics[key] == t {
		delete(f.topics, key)
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

// watched lists the keys with a value whose topic has subscribers, by group (voucher).
func (f *feed[K, V]) watched() map[int][]K {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[int][]K{}
	for k, t := range f.topics {
		if !t.loading {
			out[t.group] = append(out[t.group], k)
		}
	}
	return out
}

// has tells whether key has a topic.
func (f *feed[K, V]) has(key K) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.topics[key] != nil
}

func (f *feed[K, V]) stats() (topics, subscribers int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range f.topics {
		topics++
		subscribers += len(t.subs)
	}
	return topics, subscribers
}

// forward is a subscriber's goroutine: it moves values from the slot to the returned
// (unbuffered) channel, skipping repeats and pausing f.throttle after each value, until ctx
// ends or the topic ends; then it leaves the topic and closes the channel. The slot keeps
// only the latest value, so a slow consumer misses intermediate values, never the latest one,
// and never holds up the others. t is nil for a stream that needs no topic.
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
				if f.throttle > 0 && !wait.Sleep(ctx, f.throttle) {
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
