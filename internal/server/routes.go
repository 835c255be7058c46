package server

import (
	"net/http"
	"net/http/pprof"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	gql "github.com/surgekit/surge/graph"
)

// Handlers are the server's HTTP surfaces. Admin is nil unless Options.AdminSeparate.
type Handlers struct {
	// Public serves /query, the health endpoints and, unless AdminSeparate, /metrics and the
	// playground.
	Public http.Handler
	// Admin serves /metrics, the playground, /query (the playground's endpoint), the health
	// endpoints and Go's profiles (/debug/pprof/), for a listener of its own that only
	// operators reach.
	Admin http.Handler
}

// Build returns the server's handlers, sharing one GraphQL endpoint and one set of metrics.
func Build(res *gql.Resolver, opts Options) Handlers {
	opts.setDefaults()
	obs := newObserver(&opts)
	api := withAllowedHosts(GraphQL(res, &opts), opts.AllowedHosts)
	public := apiRoutes(api, opts.Health)
	if !opts.AdminSeparate {
		adminRoutes(public, &opts)
		return Handlers{Public: obs.wrap(public)}
	}
	admin := apiRoutes(api, opts.Health)
	adminRoutes(admin, &opts)
	profilingRoutes(admin, &opts)
	return Handlers{Public: obs.wrap(public), Admin: obs.wrap(admin)}
}

// apiRoutes are the endpoint and the probes: /livez answers while the process serves,
// /readyz (and /healthz, its older name) when its dependencies answer too. The probes answer
// whatever the Host header (orchestrators address a server by its IP); the endpoint comes
// behind the Host allowlist.
func apiRoutes(api http.Handler, health map[string]healthCheck) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/query", api)
	mux.Handle("GET /livez", http.HandlerFunc(liveness))
	ready := healthHandler(health)
	mux.Handle("GET /readyz", ready)
	mux.Handle("GET /healthz", ready)
	return mux
}

// adminRoutes add /metrics and the playground, behind the Host allowlist.
func adminRoutes(mux *http.ServeMux, opts *Options) {
	metrics := promhttp.HandlerFor(opts.Registry, promhttp.HandlerOpts{Registry: opts.Registry})
	mux.Handle("GET /metrics", withAllowedHosts(metrics, opts.AllowedHosts))
	if opts.Playground != nil {
		mux.Handle("/", withAllowedHosts(opts.Playground, opts.AllowedHosts))
	}
}

// profilingRoutes add Go's profiles under /debug/pprof/ (CPU, heap, goroutines, and the
// execution trace that shows what a slow request waited for: the scheduler, the GC, a
// syscall), on the admin listener only: a profile costs CPU and shows the process's insides.
func profilingRoutes(mux *http.ServeMux, opts *Options) {
	mux.Handle("GET /debug/pprof/", withAllowedHosts(http.HandlerFunc(pprof.Index), opts.AllowedHosts))
	for name, h := range map[string]http.HandlerFunc{
		"cmdline": pprof.Cmdline, "profile": pprof.Profile, "symbol": pprof.Symbol, "trace": pprof.Trace,
	} {
		mux.Handle("GET /debug/pprof/"+name, withAllowedHosts(h, opts.AllowedHosts))
	}
}

// liveness answers that the process is up and serving HTTP, whatever its dependencies say: a
// restart would not bring Redis or the database back.
func liveness(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write([]byte(`{"status":"ok"}` + "\n"))
}
