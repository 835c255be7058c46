package telemetry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/surgekit/surge/internal/telemetry"
	"github.com/surgekit/surge/internal/testenv"
)

// Issue 23, item 8: the exporter is the project's own OTLP/HTTP client (the SDK's pulled all
// of gRPC into the server). Spans reach a real OTLP receiver protobuf-encoded, gzipped when
// OTEL_EXPORTER_OTLP_COMPRESSION says so, with their kind, attributes of each type, events,
// status and parent; the exporter's variables are read, and bad ones refused at start.
func TestTracesExportOverOTLPHTTP(t *testing.T) {
	sink := testenv.StartOTLPSink(t)
	for _, compression := range []string{"gzip", "none"} {
		t.Run(compression, func(t *testing.T) {
			t.Setenv("OTEL_EXPORTER_OTLP_COMPRESSION", compression)
			t.Setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "x-team=surge,x-note=a%20b")
			t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "5000")
			ctx := context.Background()
			tr, err := telemetry.StartTracing(ctx, telemetry.TracingOptions{Endpoint: sink.Endpoint, SampleRatio: 1, ServiceName: "otlp-test"})
			if err != nil {
				t.Fatal(err)
			}
			tracer := telemetry.Tracer(tr.Provider())
			ctx, parent := tracer.Start(ctx, "parent-"+compression, trace.WithSpanKind(trace.SpanKindServer))
			_, child := tracer.Start(ctx, "child-"+compression, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
				attribute.String("s", "x"), attribute.Int64("i", 42), attribute.Bool("b", true), attribute.Float64("f", 1.5),
				attribute.StringSlice("ss", []string{"a", "b"})))
			child.AddEvent("retried")
			child.RecordError(errors.New("boom"))
			child.SetStatus(codes.Error, "boom")
			child.End()
			parent.End()
			shut, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := tr.Shutdown(shut); err != nil {
				t.Fatalf("shutdown (flush): %v", err)
			}
			spans := sink.WaitFor(t, 10*time.Second, func(spans []testenv.Span) bool {
				n := 0
				for _, s := range spans {
					if s.Name == "parent-"+compression || s.Name == "child-"+compression {
						n++
					}
				}
				return n == 2
			})
			var p, c testenv.Span
			for _, s := range spans {
				switch s.Name {
				case "parent-" + compression:
					p = s
				case "child-" + compression:
					c = s
				}
			}
			if p.Kind != "SPAN_KIND_SERVER" || c.Kind != "SPAN_KIND_CLIENT" || c.ParentID != p.SpanID || c.TraceID != p.TraceID || c.Service != "otlp-test" {
				t.Errorf("parent %+v, child %+v", p, c)
			}
			if c.Status != "STATUS_CODE_ERROR" || len(c.Events) != 2 || c.StartNanos == 0 || c.EndNanos < c.StartNanos {
				t.Errorf("child status %q, events %v, times %d..%d", c.Status, c.Events, c.StartNanos, c.EndNanos)
			}
			// The sink prints a string as it is and other values in OTLP's JSON form.
			for k, want := range map[string]string{"s": "x", "i": `{"intValue":"42"}`, "b": `{"boolValue":true}`, "f": `{"doubleValue":1.5}`} {
				if c.Attributes[k] != want {
					t.Errorf("attribute %s = %q, want %q (all: %v)", k, c.Attributes[k], want, c.Attributes)
				}
			}
		})
	}
	for k, v := range map[string]string{
		"OTEL_EXPORTER_OTLP_COMPRESSION":    "brotli",
		"OTEL_EXPORTER_OTLP_TIMEOUT":        "10s",
		"OTEL_EXPORTER_OTLP_TRACES_HEADERS": "novalue",
	} {
		t.Run("bad "+k, func(t *testing.T) {
			t.Setenv(k, v)
			if tr, err := telemetry.StartTracing(context.Background(), telemetry.TracingOptions{Endpoint: sink.Endpoint}); err == nil {
				_ = tr.Shutdown(context.Background())
				t.Errorf("%s=%s accepted", k, v)
			}
		})
	}
}
