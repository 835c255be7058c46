// Package server assembles the HTTP surface: the GraphQL endpoint with its protections, the
// playground, health and metrics.
package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"

	gql "github.com/surgekit/surge/graph"
)

// Options configures the HTTP surface. Zero values take the defaults noted.
type Options struct {
	Introspection bool         // schema introspection (on in dev, off in production)
	Suggestions   bool         // "did you mean" hints in validation errors (same)
	MaxComplexity int          // per-operation complexity budget (3000)
	MaxDepth      int          // maximum field nesting, introspection excluded (10)
	MaxBodyBytes  int64        // request body limit (1 MiB)
	Playground    http.Handler // served at "/"; nil serves nothing there
	Logger        *slog.Logger
	Registry      *prometheus.Registry // metrics registry (a fresh one if nil)
	// Health checks each dependency; /healthz answers 200 only when all return nil.
	Health map[string]func(context.Context) error
	// WebsocketOrigins lists the origins, besides the endpoint's own, from which browsers may
	// open a WebSocket (host patterns of github.com/coder/websocket's
	// AcceptOptions.OriginPatterns, e.g. "app.example.com" or "*.example.com"). MaxBodyBytes
	// also bounds WebSocket messages.
	WebsocketOrigins []string
}

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
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
	}
}

// New returns the server's root handler.
func New(res *gql.Resolver, opts Options) http.Handler {
	opts.setDefaults()
	mux := http.NewServeMux()
	mux.Handle("/query", GraphQL(res, &opts))
	mux.Handle("GET /healthz", healthHandler(opts.Health))
	mux.Handle("GET /metrics", promhttp.HandlerFor(opts.Registry, promhttp.HandlerOpts{Registry: opts.Registry}))
	if opts.Playground != nil {
		mux.Handle("/", opts.Playground)
	}
	return mux
}

// GraphQL returns the /query handler: methods and body size checked first, then the bearer
// token resolved, then gqlgen, which serves GET, POST and WebSocket (subscriptions) with the
// same limits.
func GraphQL(res *gql.Resolver, opts *Options) http.Handler {
	opts.setDefaults()
	cfg := gql.Config{Resolvers: res}
	setComplexity(&cfg.Complexity)
	srv := handler.New(gql.NewExecutableSchema(cfg))
	srv.AddTransport(websocketTransport(res.Auth, opts))
	// application/graphql-response+json unless the client asks for application/json: with it,
	// request errors get 4xx status codes as the GraphQL-over-HTTP spec describes.
	srv.AddTransport(transport.GET{UseGrapQLResponseJsonByDefault: true})
	srv.AddTransport(transport.POST{UseGrapQLResponseJsonByDefault: true})
	srv.SetQueryCache(lru.New[*ast.QueryDocument](1000))
	srv.SetDisableSuggestion(!opts.Suggestions)
	if opts.Introspection {
		srv.Use(extension.Introspection{})
	}
	srv.Use(depthLimit{Max: opts.MaxDepth})
	srv.Use(extension.FixedComplexityLimit(opts.MaxComplexity))
	srv.Use(subscriptionsOverWebsocket{})
	srv.AroundOperations(websocketSessions(res.Auth, opts.Logger))
	srv.AroundFields(classifyResolverErrors(opts.Logger))
	srv.SetErrorPresenter(presentError)
	srv.SetRecoverFunc(recoverPanic(opts.Logger))
	srv.AroundResponses(newMetrics(opts.Registry).aroundResponses)

	var h http.Handler = srv
	h = withSessions(res.Auth, opts.Logger, h)
	return httpRules(h, opts.MaxBodyBytes)
}

// httpRules applies the GraphQL-over-HTTP rules gqlgen leaves open: only GET and POST, no
// mutations over GET (405 with Allow: POST), and a bounded body (413).
func httpRules(next http.Handler, maxBody int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPost:
			if r.ContentLength > maxBody {
				writeError(w, http.StatusRequestEntityTooLarge, "request body too large")
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		case http.MethodGet:
			if isMutation(r.URL.Query().Get("query"), r.URL.Query().Get("operationName")) {
				w.Header().Set("Allow", "POST")
				writeError(w, http.StatusMethodNotAllowed, "mutations must use POST")
				return
			}
		default:
			w.Header().Set("Allow", "GET, POST")
			writeError(w, http.StatusMethodNotAllowed, "use GET or POST")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// isMutation reports whether the selected operation of query is not a query. Unparsable
// documents return false and get their parse error from gqlgen.
func isMutation(query, opName string) bool {
	if !strings.Contains(query, "mutation") && !strings.Contains(query, "subscription") {
		return false
	}
	doc, err := parser.ParseQuery(&ast.Source{Input: query})
	if err != nil {
		return false
	}
	for _, op := range doc.Operations {
		if (opName == "" || op.Name == opName) && op.Operation != ast.Query {
			return true
		}
	}
	return false
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"errors": []map[string]string{{"message": msg}}})
}

// healthHandler answers 200 when every check passes within 2 s, else 503; the body names each
// dependency's state either way.
func healthHandler(checks map[string]func(context.Context) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		status, body := http.StatusOK, map[string]string{}
		for name, check := range checks {
			if err := check(ctx); err != nil {
				status, body[name] = http.StatusServiceUnavailable, "down"
				continue
			}
			body[name] = "ok"
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(body)
	})
}
