// Package gqlws serves GraphQL over WebSocket for gqlgen: the graphql-transport-ws protocol
// of the graphql-ws library, and the legacy graphql-ws protocol of Apollo's
// subscriptions-transport-ws. It replaces gqlgen's transport.Websocket to make an idle
// connection cheap, because in a flash sale every buyer holds one:
//
//   - the upgrade's handler returns once the connection is initialised; one goroutine per
//     connection reads it, from a 4 KB stack (messages are parsed token by token, writes go
//     from other goroutines), with 512-byte buffers instead of net/http's 4 KB (Options.Hold
//     keeps the HTTP request's bookkeeping open until the connection ends);
//   - every operation starts on a goroutine of its own, which ends when the operation has
//     nothing to send: a subscription whose resolver hands its channel's wake-ups to a
//     [Listener] (Options.Listen) keeps no goroutine while it waits, one is started when a
//     value is ready; other subscriptions keep gqlgen's model, a goroutine waiting on the
//     channel;
//   - one goroutine pings all connections (keeper), and writes are bounded by
//     Options.WriteTimeout, after which the connection is closed; Options.MaxSubscriptions
//     caps the subscriptions of one connection.
//
// Protocol (graphql-transport-ws): connection_init within Options.InitTimeout (else close
// 4408), once (4429); subscribe before connection_ack 4401; a subscribe whose id is running
// 4409; a message that is not one of the protocol's (strict JSON) 4400; Options.Init's
// refusal 1013. An operation refused before it runs (parse, validation, limits) gets an
// "error" message; one that ran ends with "complete", unless the client completed it first.
package gqlws

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/coder/websocket"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// Options configures a Transport. Zero values take the defaults noted.
type Options struct {
	// Accept configures the upgrade (OriginPatterns: browser origins allowed besides the
	// endpoint's own). Subprotocols are the transport's.
	Accept websocket.AcceptOptions
	// Init runs on connection_init with its payload (nil if none); the context it returns is
	// the connection's (operations derive theirs from it). An error refuses the connection:
	// it is closed with 1013 (try again later) and the error's text; a panic, recovered, closes
	// it with 1011.
	Init func(ctx context.Context, payload map[string]any) (context.Context, error)
	// InitTimeout is how long a client has to send connection_init (10 s).
	InitTimeout time.Duration
	// ReadLimit bounds one message from the client (1 MiB); a larger one closes the connection
	// (1009).
	ReadLimit int64
	// KeepAlive is how often each connection is pinged (15 s); negative: never.
	KeepAlive time.Duration
	// MaxSubscriptions caps the subscriptions one connection runs at once (0: no cap); one
	// more ends at once with an "error" of code CodeSubscriptionLimit. A subscription's slot
	// is free again when it ends or the client completes it.
	MaxSubscriptions int
	// MaxRunning caps the operations one connection executes at once (8): parsing,
	// validation and execution, and for a subscription until its resolver has run. The reader
	// waits for one to finish before it starts the next, so a client that sends operations
	// faster than they are answered is held back (by TCP, as over HTTP/1.1) instead of running
	// without bound; idle subscriptions do not count.
	MaxRunning int
	// WriteTimeout bounds one message to the client (10 s): a client that does not take it in
	// time is not reading, and its connection is closed.
	WriteTimeout time.Duration
	// Hold, if set, is called with the upgrade request once the connection is accepted; the
	// function it returns is called when the connection has ended. The HTTP handler returns
	// before that, so wrappers that account for a request (a connection count, an in-flight
	// gauge, an access log) use it to end with the connection. Without it, Do serves the
	// connection to its end.
	Hold func(r *http.Request) (release func())
	// Listen, if set, gives each subscription's context a Listener, through which the
	// subscription's resolver can say when its channel has something to read (see Listener).
	Listen func(ctx context.Context, l Listener) context.Context
	Logger *slog.Logger
}

func (o *Options) setDefaults() {
	if o.InitTimeout <= 0 {
		o.InitTimeout = 10 * time.Second
	}
	if o.ReadLimit <= 0 {
		o.ReadLimit = 1 << 20
	}
	if o.KeepAlive == 0 {
		o.KeepAlive = 15 * time.Second
	}
	if o.MaxRunning <= 0 {
		o.MaxRunning = 8
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	o.Accept.Subprotocols = subprotocols
}

// Listener hears, for one subscription, when its channel has something to read, so that the
// transport need not keep a goroutine blocked on it.
type Listener interface {
	// Attached says the resolver's channel will be announced: each Ready, those before
	// Attached included, stands for one value put into the channel or for its close.
	Attached()
	// Ready says one more value is in the channel, or that it was closed. It does not block.
	Ready()
}

// Transport is gqlgen's graphql.Transport for WebSocket upgrades.
type Transport struct {
	opts   Options
	keeper *keeper
}

var _ graphql.Transport = (*Transport)(nil)

// New returns a Transport.
func New(opts Options) *Transport {
	opts.setDefaults()
	return &Transport{opts: opts, keeper: &keeper{interval: max(opts.KeepAlive, 0)}}
}

// Supports takes WebSocket upgrades.
func (t *Transport) Supports(r *http.Request) bool {
	return r.Method == http.MethodGet && r.Header.Get("Upgrade") != ""
}

// Do accepts the upgrade, runs connection_init, and serves the connection from a goroutine
// of its own (or to its end here, without Options.Hold).
func (t *Transport) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	ws, err := websocket.Accept(smallBuffers{w}, r, &t.opts.Accept)
	if err != nil {
		return // Accept answered the request (400, 403)
	}
	c := newConn(t, ws, r, exec)
	if !c.init() {
		return
	}
	if t.opts.Hold == nil {
		c.serve()
		return
	}
	release := t.opts.Hold(r)
	go func() {
		defer release()
		c.serve()
	}()
}

// CodeSubscriptionLimit is the code of a subscription beyond Options.MaxSubscriptions.
const CodeSubscriptionLimit = "WEBSOCKET_LIMIT_EXCEEDED"

type errorsKey struct{}

// AddError gives a running subscription an error to end with: once its channel is closed,
// the client gets an "error" message with the errors added instead of "complete". Outside
// a subscription of this transport it does nothing.
func AddError(ctx context.Context, err *gqlerror.Error) {
	if op, ok := ctx.Value(errorsKey{}).(*operation); ok {
		op.addError(err)
	}
}
