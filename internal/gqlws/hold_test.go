package gqlws_test

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/surgekit/surge/internal/gqlws"
)

// TestHold: with Options.Hold the upgrade's handler returns once the connection is
// initialised, the connection is served on from a goroutine of its own, and release is
// called once, after the connection ended.
func TestHold(t *testing.T) {
	var held, released atomic.Int64
	var returnedAt, releasedAt atomic.Pointer[time.Time]
	returned := make(chan struct{}, 1)
	f := newFixture(t, gqlws.Options{
		Hold: func(r *http.Request) func() {
			held.Add(1)
			return func() {
				now := time.Now()
				releasedAt.Store(&now)
				released.Add(1)
			}
		},
	}, recordReturn(&returnedAt, returned))
	c := f.dial(transportWS)
	c.init(transportWS)
	select {
	case <-returned:
	case <-time.After(within):
		t.Fatal("the handler did not return after connection_init")
	}
	if held.Load() != 1 || released.Load() != 0 {
		t.Fatalf("held %d, released %d: want 1, 0 while the connection is open", held.Load(), released.Load())
	}
	if n := goroutines("gqlws.(*Transport).Do("); n != 0 {
		t.Fatalf("%d goroutines in Do, want none", n)
	}
	// Served on after the handler returned.
	c.subscribe("subscribe", "q", "{ hello }")
	c.expect("next", "q")
	c.expect("complete", "q")
	if released.Load() != 0 {
		t.Fatal("released while the connection is open")
	}

	_ = c.ws.CloseNow()
	waitFor(t, "release", func() bool { return released.Load() > 0 })
	waitFor(t, "the connection's end", func() bool { return goroutines("gqlws.(*conn).serve") == 0 })
	if n := released.Load(); n != 1 {
		t.Fatalf("release called %d times, want once", n)
	}
	if r, rel := returnedAt.Load(), releasedAt.Load(); !r.Before(*rel) {
		t.Fatalf("the handler returned at %v, after release at %v", r, rel)
	}
}

// TestNoHold: without Options.Hold, Do serves the connection to its end.
func TestNoHold(t *testing.T) {
	var returnedAt atomic.Pointer[time.Time]
	returned := make(chan struct{}, 1)
	f := newFixture(t, gqlws.Options{}, recordReturn(&returnedAt, returned))
	c := f.dial(transportWS)
	c.init(transportWS)
	c.subscribe("subscribe", "q", "{ hello }")
	c.expect("next", "q")
	c.expect("complete", "q")
	// The connection is served by the handler's goroutine, inside Do.
	if n := goroutines("gqlws.(*Transport).Do("); n != 1 {
		t.Fatalf("%d goroutines in Do, want 1", n)
	}
	select {
	case <-returned:
		t.Fatal("the handler returned while the connection is open")
	default:
	}
	closed := time.Now()
	_ = c.ws.CloseNow()
	select {
	case <-returned:
	case <-time.After(within):
		t.Fatal("the handler did not return after the connection ended")
	}
	if r := returnedAt.Load(); r.Before(closed) {
		t.Fatalf("returned at %v, before the close at %v", r, closed)
	}
}

// recordReturn wraps the GraphQL handler to record when ServeHTTP returned.
func recordReturn(at *atomic.Pointer[time.Time], returned chan<- struct{}) func(http.Handler) http.Handler {
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h.ServeHTTP(w, r)
			now := time.Now()
			at.Store(&now)
			returned <- struct{}{}
		})
	}
}
