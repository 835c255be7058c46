package server

import (
	"context"
	"net/http"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/surgekit/surge/internal/telemetry"
)

// httpTracing makes one server span per request, a child of the caller's span when the
// request carries a W3C traceparent.
type httpTracing struct {
	tracer     trace.Tracer
	propagator propagation.TextMapPropagator
}

func newHTTPTracing(tp trace.TracerProvider) *httpTracing {
	return &httpTracing{tracer: telemetry.Tracer(tp), propagator: telemetry.Propagator()}
}

func (t *httpTracing) start(ctx context.Context, r *http.Request) (context.Context, trace.Span) {
	ctx = t.propagator.Extract(ctx, propagation.HeaderCarrier(r.Header))
	return t.tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
		semconv.HTTPRequestMethodKey.String(r.Method),
		semconv.URLPath(r.URL.Path),
		semconv.ClientAddress(peerAddress(r.RemoteAddr).String()),
	))
}

// end names the span after its route ("POST /query") once the mux has chosen it.
func (t *httpTracing) end(span trace.Span, method, route string, status int) {
	span.SetName(method + " " + route)
	span.SetAttributes(semconv.HTTPRoute(route), semconv.HTTPResponseStatusCode(status))
	if status >= http.StatusInternalServerError {
		span.SetStatus(codes.Error, http.StatusText(status))
	}
	span.End()
}

// recordOperation tells the request record which GraphQL operation it ran, for the access log.
func recordOperation(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	if req := telemetry.RequestOf(ctx); req != nil {
		req.SetOperation(operationLabel(graphql.GetOperationContext(ctx)))
	}
	return next(ctx)
}

// operationLabel is "query ShopPage", or the type alone for an anonymous operation.
func operationLabel(op *graphql.OperationContext) string {
	if op.Operation == nil {
		return ""
	}
	if op.Operation.Name == "" {
		return string(op.Operation.Operation)
	}
	return string(op.Operation.Operation) + " " + op.Operation.Name
}

// traceOperations makes a span for each query and mutation, from the moment the request's
// body was read (parsing and validation included, as events) to its answer; the resolvers'
// Redis and SQL spans are its children. Subscriptions get none: they last as long as the
// client listens.
func traceOperations(tp trace.TracerProvider) graphql.OperationMiddleware {
	tracer := telemetry.Tracer(tp)
	return func(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
		op := graphql.GetOperationContext(ctx)
		if op.Operation == nil || op.Operation.Operation == ast.Subscription || !trace.SpanFromContext(ctx).IsRecording() {
			return next(ctx)
		}
		ctx, span := tracer.Start(ctx, operationLabel(op), trace.WithTimestamp(op.Stats.OperationStart), trace.WithAttributes(
			semconv.GraphQLOperationTypeKey.String(string(op.Operation.Operation)),
			semconv.GraphQLOperationName(op.Operation.Name),
		))
		addPhase(span, "graphql.parse", op.Stats.Parsing)
		addPhase(span, "graphql.validate", op.Stats.Validation)
		handler := next(ctx)
		return func(ctx context.Context) *graphql.Response {
			resp := handler(ctx)
			if resp != nil && len(resp.Errors) > 0 {
				span.SetAttributes(attribute.Int("graphql.errors", len(resp.Errors)))
				if code, _ := resp.Errors[0].Extensions["code"].(string); code != "" {
					span.SetAttributes(attribute.String("graphql.error.code", code))
				}
			}
			span.End()
			return resp
		}
	}
}

// addPhase records a phase of the operation as an event at its end, with its duration.
func addPhase(span trace.Span, name string, t graphql.TraceTiming) {
	if t.Start.IsZero() || t.End.IsZero() {
		return
	}
	span.AddEvent(name, trace.WithTimestamp(t.End), trace.WithAttributes(attribute.Float64("duration_ms", float64(t.End.Sub(t.Start).Microseconds())/1000)))
}
