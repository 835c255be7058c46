package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// instrumentation names the tracers of this module's spans.
const instrumentation = "github.com/surgekit/surge"

// tracesPath is where an OTLP/HTTP receiver takes spans, below its base URL.
const tracesPath = "/v1/traces"

// TracingOptions configure tracing; it is on when Endpoint is set.
type TracingOptions struct {
	// Endpoint is the base URL of an OTLP/HTTP receiver (an OpenTelemetry Collector, Jaeger:
	// http://collector:4318); spans are posted, protobuf-encoded, to <Endpoint>/v1/traces,
	// or to Endpoint itself when it has a path.
	Endpoint string
	// SampleRatio is the share of traces started here that are recorded (0..1). A request
	// arriving with a W3C traceparent is recorded if and only if its caller's is.
	SampleRatio float64
	ServiceName string // service.name of the spans ("surge"); OTEL_SERVICE_NAME overrides it
	Logger      *slog.Logger
}

// Tracing is a running OpenTelemetry tracer provider that exports over OTLP/HTTP.
type Tracing struct {
	provider *sdktrace.TracerProvider
}

// TraceEndpoint checks an OTLP/HTTP endpoint and returns the URL spans are posted to.
func TraceEndpoint(endpoint string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(endpoint))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("invalid OTLP endpoint %q: want http(s)://host:port, e.g. http://collector:4318", endpoint)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = tracesPath
	}
	return u.String(), nil
}

// StartTracing starts a tracer provider exporting in batches (the SDK's OTEL_BSP_* and
// OTEL_EXPORTER_OTLP_HEADERS/TIMEOUT/COMPRESSION variables apply). Export failures are
// logged at WARN. Shutdown flushes what is left.
func StartTracing(ctx context.Context, o TracingOptions) (*Tracing, error) {
	endpoint, err := TraceEndpoint(o.Endpoint)
	if err != nil {
		return nil, err
	}
	if o.SampleRatio < 0 || o.SampleRatio > 1 {
		return nil, fmt.Errorf("trace sample ratio %v: want 0..1", o.SampleRatio)
	}
	if o.ServiceName == "" {
		o.ServiceName = "surge"
	}
	client, err := newOTLPHTTP(endpoint, os.Getenv)
	if err != nil {
		return nil, err
	}
	exporter, err := otlptrace.New(ctx, client)
	if err != nil {
		return nil, fmt.Errorf("OTLP exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithSchemaURL(semconv.SchemaURL),
		resource.WithAttributes(semconv.ServiceName(o.ServiceName)),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES win
		resource.WithTelemetrySDK(),
		resource.WithHost(),
	)
	if err != nil {
		return nil, fmt.Errorf("trace resource: %w", err)
	}
	if o.Logger != nil {
		log := o.Logger
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("tracing", "err", err) }))
	}
	return &Tracing{provider: sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exporter),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(o.SampleRatio))),
	)}, nil
}

// Provider is the tracer provider, for instrumentation.
func (t *Tracing) Provider() trace.TracerProvider { return t.provider }

// Shutdown exports the spans still buffered (within ctx) and stops the provider.
func (t *Tracing) Shutdown(ctx context.Context) error { return t.provider.Shutdown(ctx) }

// Propagator reads and writes the W3C trace context (traceparent, tracestate) and baggage.
func Propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// Tracer is this module's tracer of tp.
func Tracer(tp trace.TracerProvider) trace.Tracer { return tp.Tracer(instrumentation) }

// traced reports whether ctx belongs to a recorded trace: the only work spans are made for,
// so that background loops (the order consumer's blocking reads) start no traces of their own.
func traced(ctx context.Context) bool { return trace.SpanFromContext(ctx).IsRecording() }
