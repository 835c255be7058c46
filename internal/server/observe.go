package server

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/surgekit/surge/internal/telemetry"
)

// Observability configures what operators get from the HTTP surface besides /metrics.
type Observability struct {
	// AccessLog writes one INFO line per request to Logger: request id, method, route, path,
	// status, bytes, duration, client address, GraphQL operation (and trace id when recorded).
	AccessLog bool
	// Tracer, when set, traces each request (a W3C traceparent is honoured) and its GraphQL
	// operation. nil: tracing off, and nothing of it is installed.
	Tracer trace.TracerProvider
	// AdminSeparate serves /metrics and the playground only on the Admin handler of Build,
	// meant for a listener of its own; the public handler keeps the API and health.
	AdminSeparate bool
}

// observer wraps a route table with what operators read: a request id (X-Request-Id, the
// client's if usable, echoed), HTTP metrics by route, an access-log line and a server span.
type observer struct {
	metrics     *httpMetrics
	log         *slog.Logger // nil: no access log
	tracing     *httpTracing // nil: tracing off
	proxyHeader string
	nextID      func() string
}

func newObserver(opts *Options) *observer {
	o := &observer{metrics: newHTTPMetrics(opts.Registry), proxyHeader: opts.TrustedProxyHeader, nextID: newRequestIDs()}
	if opts.AccessLog {
		o.log = opts.Logger
	}
	if opts.Tracer != nil {
		o.tracing = newHTTPTracing(opts.Tracer)
	}
	return o
}

// routeUnmatched labels requests no route took (the mux answered 404 or 405 itself).
const routeUnmatched = "unmatched"

func (o *observer) wrap(routes *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// One allocation for the writer, the request's record, its life and its report.
		x := &exchange{statusWriter: statusWriter{ResponseWriter: w}, o: o, start: time.Now()}
		x.request.ID = o.requestID(r)
		w.Header().Set(headerRequestID, x.request.ID)
		ctx := telemetry.WithRequest(r.Context(), &x.request)
		if o.tracing != nil {
			ctx, x.span = o.tracing.start(ctx, r)
		}
		x.ctx = ctx
		// The request ends when the handler returns, or later for a WebSocket connection,
		// which holds it open until it closes (requestLife). What its end reports is taken
		// from r when the handler returns, so that a held request keeps neither r nor the
		// writer (net/http's connection and its 8 KB of buffers) alive.
		x.life.refs = 1
		x.life.last = x
		r = r.WithContext(withLife(ctx, &x.life))
		defer func() {
			x.facts = o.factsOf(r) // r.Pattern is set by now, also after a panic
			x.ResponseWriter = nil
			x.life.handlerDone()
		}()
		o.metrics.inFlight.Inc()
		routes.ServeHTTP(&x.statusWriter, r) // sets r.Pattern
	})
}

// exchange is one request as the observer sees it: the writer that records its status and
// size, the record the layers share, its life, and what its end reports.
type exchange struct {
	statusWriter
	request telemetry.Request
	life    requestLife
	o       *observer
	start   time.Time
	span    trace.Span // nil: tracing off
	ctx     context.Context
	facts   requestFacts
}

// end reports the request: metrics, span, access log (requestLife runs it last).
func (x *exchange) end() {
	o, f := x.o, &x.facts
	o.metrics.inFlight.Dec()
	status, took := x.statusCode(), time.Since(x.start)
	o.metrics.observe(f.route, f.method, status, took)
	if x.span != nil {
		o.tracing.end(x.span, f.method, f.route, status)
	}
	if o.log != nil {
		o.accessLog(x.ctx, f, &x.request, &x.statusWriter, took)
	}
}

// requestFacts is what a request's end reports of it.
type requestFacts struct{ method, route, path, client string }

func (o *observer) factsOf(r *http.Request) requestFacts {
	f := requestFacts{method: r.Method, route: routeOf(r), path: r.URL.Path}
	if o.log != nil {
		f.client = clientAddress(r, o.proxyHeader)
	}
	return f
}

// routeOf is the pattern that served r, without its method ("/query"), or routeUnmatched.
func routeOf(r *http.Request) string {
	if r.Pattern == "" {
		return routeUnmatched
	}
	if _, path, ok := strings.Cut(r.Pattern, " "); ok {
		return path
	}
	return r.Pattern
}

// accessLog writes the request's line. It is logged without the request's context: its
// attributes are spelled out here, so a context-aware handler does not add them twice.
//
// The record is made here rather than by Logger.LogAttrs, which looks up its caller's program
// counter (runtime.Callers, about 1 % of a grab's CPU) for a source the line never shows and
// that would always be this function.
func (o *observer) accessLog(ctx context.Context, f *requestFacts, req *telemetry.Request, sw *statusWriter, took time.Duration) {
	h := o.log.Handler()
	if !h.Enabled(context.Background(), slog.LevelInfo) {
		return
	}
	rec := slog.NewRecord(time.Now(), slog.LevelInfo, "request", 0)
	rec.AddAttrs(
		slog.String("request_id", req.ID),
		slog.String("method", f.method),
		slog.String("route", f.route),
		slog.String("path", f.path),
		slog.Int("status", sw.statusCode()),
		slog.Int64("bytes", sw.bytes),
		slog.Float64("duration_ms", float64(took.Microseconds())/1000),
		slog.String("client", f.client),
	)
	if op := req.Operation(); op != "" {
		rec.AddAttrs(slog.String("operation", op))
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsSampled() {
		rec.AddAttrs(slog.String("trace_id", sc.TraceID().String()))
	}
	_ = h.Handle(context.Background(), rec)
}

// statusWriter records the status and size of a response. Unwrap lets
// http.ResponseController and the WebSocket upgrade reach the connection beneath.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *statusWriter) WriteHeader(status int) {
	// 1xx answers other than 101 are interim: the final status comes after them.
	if w.status == 0 && (status >= http.StatusOK || status == http.StatusSwitchingProtocols) {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

// Flush passes flushes through (streamed answers).
func (w *statusWriter) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// statusCode is the status sent: 200 if the handler wrote nothing (net/http sends 200 then).
func (w *statusWriter) statusCode() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}
