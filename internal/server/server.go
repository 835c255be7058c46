// Package server assembles the HTTP surface: the GraphQL endpoint with its protections, the
// playground, health and metrics. Besides GraphQL over HTTP (transport.go) and WebSocket
// (websocket.go), the endpoint serves web apps on other origins (CORS, cors.go), operations
// sent by id (automatic persisted queries stored in Redis, apqstore.go, or a trusted-documents
// manifest, trusted.go; persisted.go) and, opt-in, batches of operations (batch.go).
// The probes are /livez and /readyz; /metrics and the playground can go on an admin listener
// (Build). Every request gets an id (X-Request-Id), HTTP metrics, an access-log line and, with a
// tracer, a server span (observe.go).
package server

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/vektah/gqlparser/v2/ast"

	gql "github.com/surgekit/surge/graph"
)

// Options configures the HTTP surface. Zero values take the defaults noted.
type Options struct {
	// Introspection allows __schema and __type (on in dev, off in production); an operation
	// may then introspect at most twice what GraphiQL's full schema query does.
	Introspection bool
	Suggestions   bool  // "did you mean" hints in validation errors, bounded (on in dev)
	MaxComplexity int   // per-operation complexity budget (3000)
	MaxDepth      int   // maximum field nesting, introspection excluded (10)
	MaxBodyBytes  int64 // request body limit (1 MiB)
	// MaxBatch is the most operations one batched request (a JSON array body, as Apollo's
	// BatchHttpLink sends) may hold; they share the request's complexity budget, side effect
	// and deadline. 0 refuses batches (BAD_REQUEST).
	MaxBatch int
	// Limits bound documents and variables before they are parsed and validated (2000
	// tokens, nesting 32, 500 fields).
	Limits DocumentLimits
	// RequestTimeout is the deadline of each request (and of each query or mutation over a
	// WebSocket): its work is cancelled then (5 s).
	RequestTimeout time.Duration
	// DBBudget is the database time the statements of one request's queries may take
	// together, for callers other than admins (dbbudget.go); the database stops them there,
	// with QUERY_TOO_EXPENSIVE. 0: none, the request's deadline alone.
	DBBudget time.Duration
	// TrustedProxyHeader names the header a reverse proxy sets to the client's address (e.g.
	// X-Forwarded-For, X-Real-IP): its last address counts as the client's for per-client
	// limits. Empty: the peer's address. Set it only when every request comes through that
	// proxy, or clients pick their own address.
	TrustedProxyHeader string
	Playground         http.Handler // served at "/"; nil serves nothing there
	Logger             *slog.Logger
	Registry           *prometheus.Registry // metrics registry (a fresh one if nil)
	// Health checks each dependency; /readyz (and /healthz) answers 200 only when all return
	// nil.
	Health map[string]healthCheck
	// Halted, when it returns true, makes /query answer every request 503 UNAVAILABLE: the
	// server has stopped serving (its namespace went to another deployment) and is about to
	// exit. Health should say so too.
	Halted func() bool
	// Persisted configures operations sent by id: automatic persisted queries (Apollo) and
	// trusted documents.
	Persisted PersistedQueries
	// CORS lists the browser origins, besides the endpoint's own, that may call the endpoint
	// over HTTP and open its WebSocket. MaxBodyBytes also bounds WebSocket messages.
	CORS CORS
	// AllowedHosts lists the host names (Host header, any port) the server answers for at the
	// endpoint, the playground and /metrics; others get 421 HOST_NOT_ALLOWED there (the probes
	// answer any, see apiRoutes). Nil: any host.
	AllowedHosts []string
	// WebsocketSubscriptions caps the subscriptions running on one WebSocket connection (10);
	// WebsocketConnections caps the open connections of one client address (50).
	WebsocketSubscriptions, WebsocketConnections int
	Observability
}

// healthCheck reports whether one dependency answers.
type healthCheck = func(context.Context) error

func (o *Options) setDefaults() {
	if o.MaxComplexity <= 0 {
		o.MaxComplexity = 3000
	}
	if o.MaxDepth <= 0 {
		o.MaxDepth = 10
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 1 << 20
	}
	o.Limits.setDefaults()
	if o.WebsocketSubscriptions <= 0 {
		o.WebsocketSubscriptions = 10
	}
	if o.WebsocketConnections <= 0 {
		o.WebsocketConnections = 50
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
	}
}

// New returns the server's root handler (Build's Public one).
func New(res *gql.Resolver, opts Options) http.Handler { return Build(res, opts).Public }

// GraphQL returns the /query handler: a deadline set, the bearer token resolved, then gqlgen
// with this package's HTTP transport (GET, POST) and the WebSocket one (subscriptions), under
// the same limits.
func GraphQL(res *gql.Resolver, opts *Options) http.Handler {
	opts.setDefaults()
	cfg := gql.Config{Resolvers: res}
	setComplexity(&cfg.Complexity)
	schema := gql.NewExecutableSchema(cfg)
	srv := handler.New(schema)
	srv.AddTransport(websocketTransport(res.Auth, opts))
	srv.AddTransport(httpTransport{maxBody: opts.MaxBodyBytes, limits: opts.Limits, maxBatch: opts.MaxBatch})
	queries := lru.New[*ast.QueryDocument](1000)
	srv.SetQueryCache(queries)
	srv.Use(persistedLookup{opts.Persisted}) // first: the limits apply to the document it finds
	srv.Use(documentLimits{DocumentLimits: opts.Limits, accepted: queries})
	srv.Use(&intVariables{parsed: queries})
	// gqlparser's own hints are off in both modes: with suggestions on, validationRules adds
	// bounded ones (gqlgen's switch, on, would bring back gqlparser's FieldsOnCorrectType and
	// its unbounded comparisons).
	srv.SetDisableSuggestion(true)
	srv.SetValidationRulesFn(validationRules(schema.Schema(), opts.Introspection, opts.Suggestions))
	if opts.Introspection {
		srv.Use(extension.Introspection{})
		srv.Use(newIntrospectionLimit(schema.Schema()))
	}
	srv.Use(depthLimit{Max: opts.MaxDepth})
	srv.Use(extension.FixedComplexityLimit(opts.MaxComplexity))
	srv.Use(&fullReads{max: opts.MaxComplexity}) // adds to the complexity just computed
	srv.Use(subscriptionsOverWebsocket{})
	srv.Use(sideEffectLimit{})
	srv.Use(batchLimits{maxComplexity: opts.MaxComplexity})                 // after the per-operation limits
	srv.Use(persistedRegister{store: opts.Persisted.APQ, log: opts.Logger}) // last: only documents every check accepted
	if opts.Tracer != nil {
		srv.AroundOperations(traceOperations(opts.Tracer))
	}
	srv.AroundOperations(recordOperation)
	srv.AroundOperations(operationDeadline(opts.RequestTimeout))
	srv.AroundOperations(func(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
		if op := graphql.GetOperationContext(ctx).Operation; op != nil && op.Operation == ast.Subscription {
			return next(ctx) // no lookups to batch, and it would live as long as the subscription
		}
		return next(res.WithLoaders(ctx)) // batch shop(id:) and voucher(id:) lookups per operation
	})
	srv.AroundOperations(websocketSessions(res.Auth, opts.Logger, opts.RequestTimeout))
	srv.AroundOperations(dbBudget(opts.DBBudget)) // after the session: admins have none
	srv.AroundFields(classifyResolverErrors(opts.Logger))
	srv.SetErrorPresenter(presenter(opts.Suggestions))
	srv.SetRecoverFunc(recoverPanic(opts.Logger))
	srv.AroundResponses(newMetrics(opts.Registry).aroundResponses)
	srv.AroundResponses(capErrors)

	var h http.Handler = srv
	h = withRequestContext(h, res.Auth, opts.Logger, opts)
	return withCORS(h, opts.CORS, opts.TrustedProxyHeader != "") // outermost: refusals (429, 503) must reach the page too
}

// healthHandler answers 200 when every check passes within 2 s, else 503; the body names each
// dependency's state either way: "ok", "down", or the HealthState of a check's error that has
// one (e.g. "not this deployment").
func healthHandler(checks map[string]healthCheck) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		status, body := http.StatusOK, map[string]string{}
		for name, check := range checks {
			err := check(ctx)
			if err == nil {
				body[name] = "ok"
				continue
			}
			status, body[name] = http.StatusServiceUnavailable, "down"
			var s interface{ HealthState() string }
			if errors.As(err, &s) {
				body[name] = s.HealthState()
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(body)
	})
}
