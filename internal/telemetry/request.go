package telemetry

import (
	"context"
	"sync/atomic"
)

// Request is what the HTTP middleware records about one request for the layers below it
// (which fill in the GraphQL operation) and for the log lines written on its behalf.
type Request struct {
	ID        string // the X-Request-Id, the client's if it sent a usable one
	operation atomic.Pointer[string]
}

type requestKey struct{}

// WithRequest returns ctx carrying r.
func WithRequest(ctx context.Context, r *Request) context.Context {
	return context.WithValue(ctx, requestKey{}, r)
}

// RequestOf is the Request ctx carries, or nil.
func RequestOf(ctx context.Context) *Request {
	r, _ := ctx.Value(requestKey{}).(*Request)
	return r
}

// RequestID is the id of the request ctx belongs to, or "".
func RequestID(ctx context.Context) string {
	if r := RequestOf(ctx); r != nil {
		return r.ID
	}
	return ""
}

// SetOperation records the GraphQL operation the request ran ("query ShopPage"). The first
// one stays: a WebSocket connection is one request carrying many operations.
func (r *Request) SetOperation(op string) { r.operation.CompareAndSwap(nil, &op) }

// Operation is the GraphQL operation the request ran, or "".
func (r *Request) Operation() string {
	if op := r.operation.Load(); op != nil {
		return *op
	}
	return ""
}
