package gqlws

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// operation is one subscribe message's operation. Its goroutine parses, validates and
// dispatches it, then sends what it answers. A subscription whose resolver attached a
// Listener is then driven by the Listener: a goroutine runs only while values are ready.
type operation struct {
	c      *conn
	id     string
	readAt time.Time
	ctx    context.Context
	cancel context.CancelFunc

	slot      bool        // it counts against Options.MaxSubscriptions (guarded by c.mu)
	executing atomic.Bool // it holds a token of c.running
	stopped   atomic.Bool // the client completed it: nothing more is sent
	over      atomic.Bool // its last message went (or would have): nothing more is read or sent
	attached  atomic.Bool // a Listener announces the subscription's values
	// ready counts the values (and the close) announced and not yet read, plus one while the
	// operation is being dispatched. A goroutine reads them while it is above zero: started
	// by the Ready that raises it from zero, ended by the read that brings it back to zero.
	ready     atomic.Int64
	responses graphql.ResponseHandler
	rctx      context.Context // the context the responses are read with
	oc        *graphql.OperationContext

	mu   sync.Mutex
	errs gqlerror.List // errors to end with (AddError)
}

func (op *operation) Attached() { op.attached.Store(true) }

// executed gives the operation's token of c.running back (once): its expensive part is over.
func (op *operation) executed() {
	if op.executing.CompareAndSwap(true, false) {
		<-op.c.running
	}
}

func (op *operation) Ready() {
	if op.ready.Add(1) == 1 {
		go op.drain()
	}
}

func (op *operation) addError(err *gqlerror.Error) {
	op.mu.Lock()
	op.errs = append(op.errs, err)
	op.mu.Unlock()
}

// run parses, validates and dispatches the operation and sends its first answers. A
// subscription with a Listener leaves the rest to Ready; any other operation is read here
// to its end.
func (op *operation) run(payload json.RawMessage) {
	defer op.recover()
	defer op.executed()
	exec := op.c.exec
	ctx := graphql.StartOperationTrace(op.ctx)
	params, err := decodeParams(payload)
	if err != nil {
		op.end(gqlerror.List{{Message: err.Error(), Extensions: map[string]any{"code": "BAD_REQUEST"}}})
		return
	}
	// No params.Headers: the upgrade request's are not kept for the connection's life (what
	// they say, the token and the client's address, is in the connection's context).
	params.ReadTime = graphql.TraceTiming{Start: op.readAt, End: graphql.Now()}
	rc, errs := exec.CreateOperationContext(ctx, params)
	if errs != nil {
		resp := exec.DispatchError(graphql.WithOperationContext(ctx, rc), errs)
		if errcode.GetErrorKind(errs) == errcode.KindProtocol {
			op.end(resp.Errors)
		} else {
			op.send(&graphql.Response{Errors: resp.Errors})
			op.finish()
		}
		return
	}
	op.oc = rc
	subscription := rc.Operation != nil && rc.Operation.Operation == ast.Subscription
	if subscription && !op.c.takeSlot(op) {
		err := gqlerror.Errorf("too many subscriptions on this connection (at most %d): complete one first", op.c.t.opts.MaxSubscriptions)
		err.Extensions = map[string]any{"code": CodeSubscriptionLimit}
		op.end(gqlerror.List{err})
		return
	}
	ctx = graphql.WithOperationContext(ctx, rc)
	ctx = context.WithValue(ctx, errorsKey{}, op)
	if listen := op.c.t.opts.Listen; listen != nil {
		ctx = listen(ctx, op)
	}
	op.responses, op.rctx = exec.DispatchOperation(ctx, rc)
	if subscription {
		op.executed() // its resolver has run; waiting for values is not executing
	}
	if !op.attached.Load() {
		for op.next() {
		}
		return
	}
	if op.ready.Add(-1) > 0 {
		op.readReady()
	}
}

// drain is a Listener-driven goroutine: it reads what is ready.
func (op *operation) drain() {
	defer op.recover()
	op.readReady()
}

// readReady reads one value per announced Ready until none is left (or the stream ends).
func (op *operation) readReady() {
	for op.next() {
		if op.ready.Add(-1) == 0 {
			return
		}
	}
}

// next reads and sends one response; false when the operation has ended.
func (op *operation) next() bool {
	if op.over.Load() {
		return false
	}
	resp := op.responses(op.rctx)
	if resp == nil {
		op.finish()
		return false
	}
	op.send(resp)
	return true
}

func (op *operation) send(resp *graphql.Response) {
	if op.stopped.Load() || op.over.Load() {
		return
	}
	b, err := json.Marshal(resp)
	if err != nil {
		panic(err) // recovered: a resolver produced a value JSON cannot hold
	}
	op.c.write(kindNext, op.id, b)
}

// finish ends the operation: "error" with the errors added by AddError, else "complete".
func (op *operation) finish() {
	op.mu.Lock()
	errs := op.errs
	op.mu.Unlock()
	op.end(errs)
}

// end sends the operation's last message, once: "error" with errs (no "complete" follows),
// else "complete"; nothing if the client completed it or the connection is gone.
func (op *operation) end(errs gqlerror.List) {
	if !op.over.CompareAndSwap(false, true) {
		return
	}
	// Its id and slot are free before the client hears of the end: a client may reuse them
	// as soon as it reads "complete".
	op.c.done(op)
	if op.stopped.Load() || op.c.ctx.Err() != nil {
		return
	}
	if len(errs) == 0 {
		op.c.write(kindComplete, op.id, nil)
		return
	}
	b, err := json.Marshal(errs)
	if err != nil {
		b = []byte(`[{"message":"internal error","extensions":{"code":"INTERNAL"}}]`)
	}
	op.c.write(kindError, op.id, b)
}

// recover turns a panic of the operation's goroutine into an "error" message.
func (op *operation) recover() {
	r := recover()
	if r == nil {
		return
	}
	var err error = errors.New("internal error")
	if op.oc != nil {
		err = op.oc.Recover(op.ctx, r)
	}
	var gqlErr *gqlerror.Error
	if !errors.As(err, &gqlErr) {
		gqlErr = &gqlerror.Error{Message: "internal error", Extensions: map[string]any{"code": "INTERNAL"}}
	}
	op.end(gqlerror.List{gqlErr})
}
