package cache

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Event kinds, the first byte of a message "<kind>:<id>" on a cache's channel.
const (
	evFilled   = 'f' // a load wrote the value back
	evSet      = 's' // Set, Delete or Invalidate wrote or removed the value
	evReleased = 'r' // a lease was handed back without a result: waiters try again
	evFailed   = 'e' // the load failed: waiters share the failure instead of loading again
	evNotFound = 'n' // the loader found no such id and, with a filter, cached nothing
	evCreated  = 'c' // the id was created: every process adds it to its own filter
)

// events is one cache's view of its event channel: it wakes the goroutines waiting for an
// id's load in another process and tells the cache about every write (to drop L1 copies).
type events struct {
	mu      sync.Mutex
	waiters map[string]*signal
	ready   chan struct{} // closed at the subscription's first confirmation
	live    atomic.Bool   // the subscription has been confirmed at least once
	onEvent func(kind byte, id string)
	onReset func() // the subscription came back after a break: events may have been lost
}

// signal is closed at the next event for an id; kind is that event's kind.
type signal struct {
	ch   chan struct{}
	kind byte
	refs int // goroutines waiting on it; the last one to leave unregisters it
}

func newEvents(onEvent func(kind byte, id string), onReset func()) *events {
	return &events{waiters: map[string]*signal{}, ready: make(chan struct{}), onEvent: onEvent, onReset: onReset}
}

// deliver handles one message of the channel.
func (e *events) deliver(payload string) {
	if len(payload) < 2 || payload[1] != ':' {
		return
	}
	id := payload[2:]
	e.mu.Lock()
	sig, ok := e.waiters[id]
	delete(e.waiters, id)
	e.mu.Unlock()
	if ok {
		sig.kind = payload[0]
		close(sig.ch) // publishes kind to the waiters (happens-before their receive)
	}
	e.onEvent(payload[0], id)
}

// confirmed handles a confirmation of the subscription: the first makes the cache's events
// live; a later one follows a reconnection, across which events may have been lost, so every
// waiter is woken to look again and the cache resets what events keep valid.
func (e *events) confirmed() {
	if !e.live.Swap(true) {
		close(e.ready)
		return
	}
	e.mu.Lock()
	waiters := e.waiters
	e.waiters = map[string]*signal{}
	e.mu.Unlock()
	for _, sig := range waiters {
		sig.kind = evReleased
		close(sig.ch)
	}
	e.onReset()
}

// wait returns the signal of the next event for id; call forget when done with it. Register
// before checking state, so that an event between the check and the wait is not lost.
func (e *events) wait(id string) *signal {
	e.mu.Lock()
	defer e.mu.Unlock()
	sig, ok := e.waiters[id]
	if !ok {
		sig = &signal{ch: make(chan struct{})}
		e.waiters[id] = sig
	}
	sig.refs++
	return sig
}

// forget unregisters a waiter; the signal goes when its last waiter leaves unwoken.
func (e *events) forget(id string, sig *signal) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if sig.refs--; sig.refs == 0 && e.waiters[id] == sig {
		delete(e.waiters, id)
	}
}

// pending is how many ids have registered waiters (for tests).
func (e *events) pending() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.waiters)
}

// hub is the one pub/sub connection of a Redis client, shared by every cache on that client:
// it subscribes to each cache's channel and hands each message to the caches on it. go-redis
// keeps the subscriptions across reconnections; a cache created while Redis is down is
// subscribed once Redis is back.
type hub struct {
	rdb    redis.UniversalClient
	ps     *redis.PubSub
	netMu  sync.Mutex // orders SUBSCRIBE and UNSUBSCRIBE of one channel
	mu     sync.Mutex
	topics map[string]*topic
	done   chan struct{}
}

type topic struct {
	evs       []*events
	confirmed bool
}

var hubs = struct {
	sync.Mutex
	m map[redis.UniversalClient]*hub
}{m: map[redis.UniversalClient]*hub{}}

// join subscribes ev to channel on rdb's hub, waiting at most until ctx ends or wait passes
// for the confirmation (New must not fail or hang because Redis is down).
func join(ctx context.Context, g *redisGate, channel string, ev *events, wait time.Duration) *hub {
	hubs.Lock()
	h := hubs.m[g.rdb]
	if h == nil {
		// Subscribe with no channel sends nothing: the connection is made by the reader.
		h = &hub{rdb: g.rdb, ps: g.rdb.Subscribe(context.Background()), topics: map[string]*topic{}, done: make(chan struct{})}
		hubs.m[g.rdb] = h
		go h.run()
	}
	h.mu.Lock()
	t := h.topics[channel]
	first := t == nil
	if first {
		t = &topic{}
		h.topics[channel] = t
	}
	t.evs = append(t.evs, ev)
	if t.confirmed {
		ev.confirmed()
	}
	h.mu.Unlock()
	hubs.Unlock()
	if first {
		// An error leaves the channel recorded: go-redis subscribes it when it reconnects.
		_ = doErr(g, ctx, func(ctx context.Context) error {
			h.netMu.Lock()
			defer h.netMu.Unlock()
			return h.ps.Subscribe(ctx, channel)
		})
	}
	t0 := time.NewTimer(wait)
	defer t0.Stop()
	select {
	case <-ev.ready:
	case <-t0.C:
	case <-ctx.Done():
	}
	return h
}

// leave unsubscribes ev; the last cache to leave a channel unsubscribes it, the last to leave
// the hub closes its connection.
func (h *hub) leave(ctx context.Context, g *redisGate, channel string, ev *events) error {
	hubs.Lock()
	h.mu.Lock()
	t := h.topics[channel]
	if t != nil {
		for i, x := range t.evs {
			if x == ev {
				t.evs = append(t.evs[:i], t.evs[i+1:]...)
				break
			}
		}
	}
	lastOfChannel := t != nil && len(t.evs) == 0
	if lastOfChannel {
		delete(h.topics, channel)
	}
	lastOfHub := len(h.topics) == 0
	h.mu.Unlock()
	if lastOfHub {
		delete(hubs.m, h.rdb)
	}
	hubs.Unlock()
	if lastOfHub {
		// Close waits for a subscribe call still stuck on a hung Redis: bounded by ctx.
		closed := make(chan error, 1)
		go func() {
			err := h.ps.Close()
			<-h.done
			closed <- err
		}()
		select {
		case err := <-closed:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if lastOfChannel {
		return doErr(g, ctx, func(ctx context.Context) error {
			h.netMu.Lock()
			defer h.netMu.Unlock()
			return h.ps.Unsubscribe(ctx, channel)
		})
	}
	return nil
}

func (h *hub) run() {
	defer close(h.done)
	for msg := range h.ps.ChannelWithSubscriptions() {
		switch m := msg.(type) {
		case *redis.Message:
			for _, ev := range h.listeners(m.Channel, false) {
				ev.deliver(m.Payload)
			}
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				for _, ev := range h.listeners(m.Channel, true) {
					ev.confirmed()
				}
			}
		}
	}
}

// listeners returns the caches on channel; confirm marks the channel subscribed.
func (h *hub) listeners(channel string, confirm bool) []*events {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.topics[channel]
	if t == nil {
		return nil
	}
	if confirm {
		t.confirmed = true
	}
	return append([]*events(nil), t.evs...)
}
