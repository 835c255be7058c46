package live

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// feed is one kind of stream (voucher stock, order status): a topic per key with its
// subscribers. A feed runs no goroutine of its own and none per subscriber: the Hub sets
// values from events, catch-ups and sweeps, straight into each subscriber's one-value channel,
// which the subscriber reads when its Listener hears of a value (or from a goroutine of its
// own, without a Listener); a throttled topic holds a value back on a timer, and a subscriber
// whose context ends leaves through context.AfterFunc. An idle subscription is a map entry and
// a buffered channel.
type feed[K comparable, V comparable] struct {
	hub      *Hub
	name     string
	throttle time.Duration // least time between two values of one topic (0: none)
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

// topic is the shared state of one key: its subscribers and the last value sent to them.
type topic[V comparable] struct {
	subs    map[*slot[V]]struct{} // nil once ended
	last    V
	have    bool
	sentAt  time.Time   // when last went out (throttled feeds)
	pending V           // a value held back by the throttle
	held    bool        // pending is set
	timer   *time.Timer // sends pending when the throttle allows
	group   int         // the voucher (0 until the first read)
	loading bool        // the first read is under way
}

// slot is one subscriber: a channel holding at most one value, always the latest not yet
// taken (offer replaces a value the subscriber has not picked up), closed when the stream
// ends. Only the feed, under its lock, sends to it or closes it.
type slot[V any] struct {
	ch   chan V
	ctx  context.Context
	stop func() bool // unregisters the leave on ctx's end
	l    Listener    // told of each value put in and of the close (nil: none)
}

func newSlot[V any](ctx context.Context) *slot[V] {
	l, _ := ctx.Value(listenerKey{}).(Listener)
	return &slot[V]{ch: make(chan V, 1), ctx: ctx, l: l}
}

// offer puts v in the slot, dropping a value still there (true if it did). Callers hold the
// feed's lock, so there is one producer at a time and the loop ends by its second round. The
// Listener hears of a value put into an empty channel; a value that replaces one does not
// add to what there is to read.
func (s *slot[V]) offer(v V) (dropped bool) {
	for {
		select {
		case s.ch <- v:
			if !dropped && s.l != nil {
				s.l.Ready()
			}
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

// close ends the slot's channel (under the feed's lock) and tells its Listener.
func (s *slot[V]) close() {
	close(s.ch)
	if s.l != nil {
		s.l.Ready()
	}
}

// finish ends the subscriber's stream: OnError first if err is set (the GraphQL layer turns
// it into an error message), then the channel is closed, after the value it may still hold.
// The caller holds the feed's lock and has taken s out of its topic.
func (f *feed[K, V]) finish(s *slot[V], err error) {
	if s.stop != nil {
		s.stop()
	}
	if err != nil && f.hub.opts.OnError != nil {
		f.hub.opts.OnError(s.ctx, err)
	}
	s.close()
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
	s := newSlot[V](ctx)
	t := f.topics[key]
	if t != nil {
		t.subs[s] = struct{}{}
		if t.have {
			s.offer(t.last)
		}
		f.leaveOnDone(key, t, s)
		f.mu.Unlock()
		return s.ch, nil
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
		return s.ch, nil // ended meanwhile (Close, or an event's final value): closed already
	}
	if err != nil {
		// The call fails: this subscriber gets the error as the call's result, not OnError.
		delete(t.subs, s)
		s.close()
		f.endLocked(key, t, err)
		return nil, err
	}
	if have && !t.have {
		f.setLocked(key, t, v, final)
		if final {
			return s.ch, nil
		}
	}
	f.leaveOnDone(key, t, s)
	return s.ch, nil
}

// leaveOnDone makes the subscriber leave when its context ends. The caller holds f.mu.
func (f *feed[K, V]) leaveOnDone(key K, t *topic[V], s *slot[V]) {
	s.stop = context.AfterFunc(s.ctx, func() { f.leave(key, t, s) })
}

// set gives key's topic (if any) a new value; final ends it after that value.
func (f *feed[K, V]) set(key K, v V, final bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t := f.topics[key]; t != nil {
		f.setLocked(key, t, v, final)
	}
}

// setLocked sends v to the topic's subscribers, or, on a throttled feed within the throttle
// of the last value, holds it back (the latest held value wins) until the throttle allows.
func (f *feed[K, V]) setLocked(key K, t *topic[V], v V, final bool) {
	if f.throttle > 0 && !final && t.have {
		if wait := f.throttle - time.Since(t.sentAt); wait > 0 {
			t.pending, t.held = v, true
			if t.timer == nil {
				t.timer = time.AfterFunc(wait, func() { f.release(t) })
			}
			return
		}
	}
	t.held = false
	f.sendLocked(t, v)
	if final {
		f.endLocked(key, t, nil)
	}
}

// release sends a topic's held-back value.
func (f *feed[K, V]) release(t *topic[V]) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t.timer = nil
	if t.held && t.subs != nil {
		t.held = false
		f.sendLocked(t, t.pending)
	}
}

func (f *feed[K, V]) sendLocked(t *topic[V], v V) {
	if t.have && t.last == v {
		return
	}
	t.last, t.have, t.sentAt = v, true, time.Now()
	for s := range t.subs {
		if s.offer(v) {
			f.drops.Add(1)
		}
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

// endLocked ends a topic: every subscriber's stream ends (after its last value) and the topic
// leaves the map. The caller holds f.mu.
func (f *feed[K, V]) endLocked(key K, t *topic[V], err error) {
	for s := range t.subs {
		f.finish(s, err)
	}
	t.subs = nil
	if t.timer != nil {
		t.timer.Stop()
		t.timer = nil
	}
	if f.topics[key] == t {
		delete(f.topics, key)
	}
}

// leave removes a subscriber whose context ended and closes its channel; the last one out
// removes the topic.
func (f *feed[K, V]) leave(key K, t *topic[V], s *slot[V]) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := t.subs[s]; !ok {
		return // the topic ended already
	}
	delete(t.subs, s)
	s.close()
	if len(t.subs) == 0 && !t.loading && f.topics[key] == t {
		if t.timer != nil {
			t.timer.Stop()
			t.timer = nil
		}
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
