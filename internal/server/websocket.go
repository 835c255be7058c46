package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/coder/websocket"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/surgekit/surge/internal/apperr"
	"github.com/surgekit/surge/internal/auth"
	"github.com/surgekit/surge/internal/gqlws"
	"github.com/surgekit/surge/internal/live"
)

// CodeNeedsWebsocket is the code of a subscription sent over plain HTTP (HTTP 400).
const CodeNeedsWebsocket = "SUBSCRIPTION_NEEDS_WEBSOCKET"

// CodeWebsocketLimit is the code of a WebSocket connection or subscription over the limits:
// connections per client address (HTTP 429 at the upgrade), subscriptions per connection
// (gqlws.Options.MaxSubscriptions).
const CodeWebsocketLimit = gqlws.CodeSubscriptionLimit

func init() {
	errcode.RegisterErrorType(CodeNeedsWebsocket, errcode.KindProtocol)
}

// keepAlive is how often an idle WebSocket connection is pinged: "ka" messages in the legacy
// graphql-ws protocol, ping (expecting pong) in graphql-transport-ws, where a client that
// leaves a ping unanswered for 1.5 intervals is disconnected (one goroutine for all, gqlws).
const keepAlive = 15 * time.Second

// overWebsocket marks the context of operations that arrived over a WebSocket.
type overWebsocket struct{}

// websocketTransport serves subscriptions (and, as the protocol allows, queries and
// mutations) over a WebSocket at the GraphQL endpoint, in graphql-transport-ws or the legacy
// graphql-ws protocol (gqlws). Browsers may connect from the endpoint's own origin only, or
// from opts.CORS.Origins (withCORS refuses the others first, with a GraphQL error). A
// connection keeps its upgrade request open (the per-address count, in-flight gauge and
// access log end with it), and the live Hub wakes its subscriptions when they have a value,
// so that an idle subscription holds no goroutine.
func websocketTransport(a *auth.Service, opts *Options) *gqlws.Transport {
	return gqlws.New(gqlws.Options{
		Accept:      websocket.AcceptOptions{OriginPatterns: opts.CORS.websocketPatterns()},
		Init:        websocketInit(a, opts),
		InitTimeout: 10 * time.Second,
		ReadLimit:   opts.MaxBodyBytes,
		KeepAlive:   keepAlive,
		// 5 000 subscriptions were accepted on one anonymous connection before there was a cap.
		MaxSubscriptions: opts.WebsocketSubscriptions,
		Hold:             holdRequest,
		Listen:           func(ctx context.Context, l gqlws.Listener) context.Context { return live.WithListener(ctx, l) },
		Logger:           opts.Logger,
	})
}

// websocketInit authenticates a connection: {"Authorization": "Bearer <token>"} in the
// connection_init payload, else the Authorization header of the upgrade request (resolved by
// withRequestContext before the upgrade). A missing or unknown token makes the connection
// anonymous, as over HTTP; fields that need a login answer UNAUTHENTICATED. A session store
// failure, or no answer within the request deadline, refuses the connection (closed with
// 1013, try again later).
func websocketInit(a *auth.Service, opts *Options) func(context.Context, map[string]any) (context.Context, error) {
	log := opts.Logger
	return func(ctx context.Context, payload map[string]any) (context.Context, error) {
		ctx = context.WithValue(ctx, overWebsocket{}, true)
		if h := transport.InitPayload(payload).Authorization(); h != "" {
			// The payload's credentials replace the upgrade request's.
			var err error
			if ctx, err = sessionWithin(a, auth.WithSession(ctx, "", nil), auth.ParseBearer(h), opts.RequestTimeout); err != nil {
				log.ErrorContext(ctx, "websocket init: session store failed", "err", err)
				return ctx, errors.New("session store unavailable")
			}
		}
		return ctx, nil
	}
}

// websocketSessions re-resolves the connection's token at each operation over a WebSocket, so
// that a session ended (logout, expiry) since connection_init no longer counts and an active
// connection keeps its session alive, as every HTTP request does; and it keeps each
// subscription that runs with a session only while the session lasts (watchSession).
func websocketSessions(a *auth.Service, log *slog.Logger, timeout time.Duration) graphql.OperationMiddleware {
	return func(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
		token := auth.TokenFromContext(ctx)
		if ctx.Value(overWebsocket{}) == nil || token == "" {
			return next(ctx)
		}
		ctx, err := sessionWithin(a, ctx, token, timeout)
		if err != nil {
			log.ErrorContext(ctx, "websocket operation: session store failed", "err", err)
			return graphql.OneShot(&graphql.Response{Errors: gqlerror.List{unavailableError(sessionStoreMessage)}})
		}
		if op := graphql.GetOperationContext(ctx).Operation; op != nil && op.Operation == ast.Subscription && auth.FromContext(ctx) != nil {
			ctx = watchSession(a, ctx)
		}
		return next(ctx)
	}
}

// watchSession ends the subscription that runs with ctx when its session ends (a logout or a
// revocation on any server of the deployment, its expiry) or, for an admin-only one, loses
// the role (auth.Service.Watch): the client gets an "error" message, UNAUTHENTICATED (or
// FORBIDDEN), and the subscription's context is cancelled, which ends its stream.
func watchSession(a *auth.Service, ctx context.Context) context.Context {
	ctx, cancel := context.WithCancel(ctx)
	watched, stop := a.Watch(ctx, func(err error) {
		gqlErr := gqlerror.Errorf("%s", err.Error())
		errcode.Set(gqlErr, string(apperr.CodeOf(err)))
		gqlws.AddError(ctx, gqlErr)
		cancel()
	})
	context.AfterFunc(ctx, stop) // the subscription ended: forget it
	return watched
}

// sessionWithin resolves token into ctx's session (auth.Service.WithToken), the lookup
// bounded by timeout: the context it returns has no deadline of its own (it is a connection's
// or a subscription's, which last as long as they are wanted), yet with Redis frozen the
// lookup must not wait for the client's own timeouts and retries (8 s was measured).
func sessionWithin(a *auth.Service, ctx context.Context, token string, timeout time.Duration) (context.Context, error) {
	if token == "" {
		return ctx, nil
	}
	lookup, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	sess, err := a.Authenticate(lookup, token)
	if err != nil {
		return ctx, err
	}
	return auth.WithSession(ctx, token, sess), nil
}

// subscriptionsOverWebsocket refuses subscriptions sent over plain HTTP, which would answer
// only the first value.
type subscriptionsOverWebsocket struct{}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationContextMutator
} = subscriptionsOverWebsocket{}

func (subscriptionsOverWebsocket) ExtensionName() string                          { return "SubscriptionsOverWebsocket" }
func (subscriptionsOverWebsocket) Validate(schema graphql.ExecutableSchema) error { return nil }

func (subscriptionsOverWebsocket) MutateOperationContext(ctx context.Context, op *graphql.OperationContext) *gqlerror.Error {
	if op.Operation == nil || op.Operation.Operation != ast.Subscription || ctx.Value(overWebsocket{}) != nil {
		return nil
	}
	err := gqlerror.Errorf("subscriptions need a WebSocket connection (graphql-transport-ws) to this endpoint")
	errcode.Set(err, CodeNeedsWebsocket)
	return err
}

// clientConnections counts open WebSocket connections per client address.
type clientConnections struct {
	mu   sync.Mutex
	open map[string]int
	max  int
}

func (c *clientConnections) take(addr string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open[addr] >= c.max {
		return false
	}
	c.open[addr]++
	return true
}

func (c *clientConnections) give(addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open[addr]--; c.open[addr] <= 0 {
		delete(c.open, addr)
	}
}

// refuseConnection answers an upgrade from a client address that holds max WebSocket
// connections already: 429 (see withRequestContext).
func refuseConnection(w http.ResponseWriter, max int) {
	err := gqlerror.Errorf("too many WebSocket connections from this address (at most %d)", max)
	errcode.Set(err, CodeWebsocketLimit)
	writeResponse(w, mediaJSON, http.StatusTooManyRequests, struct {
		Errors gqlerror.List `json:"errors"`
	}{gqlerror.List{err}})
}
