package server

import (
	"context"
	"net/http"
	"slices"
	"sync"
)

// requestLife is the span of one request for the wrappers that account for it (the
// per-address WebSocket connection count, the in-flight gauge, the access log, the span):
// until its handler returns, or, when the handler holds the request (a WebSocket connection
// that outlives its upgrade's handler), until the hold is released as well. Work registered
// with onEnd runs once, at that end, last registered first.
type requestLife struct {
	mu   sync.Mutex
	refs int      // the handler, and each hold
	ends []func() // onEnd's
	last ender    // runs after ends: the owner's report (the observer's exchange)
}

// ender is what a request's owner does at its end.
type ender interface{ end() }

type requestLifeKey struct{}

// lifeOf returns the request's life, or a new one (own true) that the caller puts in the
// context it passes on and ends with handlerDone.
func lifeOf(ctx context.Context) (l *requestLife, own bool) {
	if l, ok := ctx.Value(requestLifeKey{}).(*requestLife); ok {
		return l, false
	}
	return &requestLife{refs: 1}, true
}

func withLife(ctx context.Context, l *requestLife) context.Context {
	return context.WithValue(ctx, requestLifeKey{}, l)
}

// onEnd registers fn to run when the request ends.
func (l *requestLife) onEnd(fn func()) {
	l.mu.Lock()
	l.ends = append(l.ends, fn)
	l.mu.Unlock()
}

// handlerDone is called when the outermost handler that owns l returns.
func (l *requestLife) handlerDone() { l.release() }

// hold keeps the request open past its handler's return, until the function it returns is
// called (once).
func (l *requestLife) hold() (release func()) {
	l.mu.Lock()
	l.refs++
	l.mu.Unlock()
	return sync.OnceFunc(l.release)
}

func (l *requestLife) release() {
	l.mu.Lock()
	l.refs--
	var ends []func()
	var last ender
	if l.refs == 0 {
		ends, l.ends = l.ends, nil
		last, l.last = l.last, nil
	}
	l.mu.Unlock()
	for _, fn := range slices.Backward(ends) {
		fn()
	}
	if last != nil {
		last.end()
	}
}

// holdRequest is gqlws.Options.Hold: the WebSocket connection keeps its upgrade request open
// until it ends. Without a requestLife (a handler used without the wrappers) there is
// nothing to hold.
func holdRequest(r *http.Request) func() {
	if l, ok := r.Context().Value(requestLifeKey{}).(*requestLife); ok {
		return l.hold()
	}
	return func() {}
}
