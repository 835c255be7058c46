package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/surgekit/surge/internal/telemetry"
	"github.com/surgekit/surge/internal/testenv"
)

// recorder is an SDK tracer provider that keeps ended spans in memory.
func recorder(t *testing.T) (*sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, rec
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name())
	}
	return out
}

// Commands and pipelines sent within a recorded trace get client spans under the caller's
// span, named after the commands; outside one (the consumer's loops) they get none.
func TestTraceRedis(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, shared redis.UniversalClient) {
		tp, rec := recorder(t)
		rdb := testenv.Another(t, shared)
		telemetry.TraceRedis(rdb, tp)
		key := "telemetry-test:{" + testenv.Phone() + "}"
		t.Cleanup(func() { shared.Del(context.Background(), key) })

		rdb.Set(context.Background(), key, "untraced", 0)
		if n := len(rec.Ended()); n != 0 {
			t.Fatalf("untraced SET made %d spans", n)
		}
		ctx, parent := tp.Tracer("test").Start(context.Background(), "request")
		if err := rdb.Set(ctx, key, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.Get(ctx, key+"-missing").Err(); err != redis.Nil {
			t.Fatal(err)
		}
		_, _ = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.Get(ctx, key)
			p.Incr(ctx, key)
			p.Get(ctx, key)
			return nil
		})
		parent.End()
		var spans []sdktrace.ReadOnlySpan
		for _, s := range rec.Ended() {
			if !connectionSetup(s.Name()) {
				spans = append(spans, s)
			}
		}
		got := strings.Join(names(spans), ", ")
		if got != "set, get, pipeline get incr, request" {
			t.Fatalf("spans %s", got)
		}
		for _, s := range spans[:3] {
			if s.Parent().SpanID() != parent.SpanContext().SpanID() || s.SpanKind() != trace.SpanKindClient {
				t.Errorf("%s: parent %s kind %v", s.Name(), s.Parent().SpanID(), s.SpanKind())
			}
		}
		if spans[1].Status().Code != 0 {
			t.Errorf("a missing key (redis.Nil) marked the span failed: %v", spans[1].Status())
		}
		if spans[2].Status().Description != "error" {
			t.Errorf("INCR of a non-number: status %v, want an error without its text", spans[2].Status())
		}
	})
}

// connectionSetup tells the commands go-redis sends on a new connection (or to learn the
// Cluster's slots), which show as spans when a traced request opens one.
func connectionSetup(name string) bool {
	return name == "hello" || name == "pipeline client" || strings.HasPrefix(name, "cluster")
}

// Statements run within a recorded trace get spans, with their text and never their
// arguments; statements outside one get none.
func TestSQLOpener(t *testing.T) {
	tp, rec := recorder(t)
	cfg, err := mysql.ParseDSN(testenv.MySQL(t))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := telemetry.SQLOpener(tp, "mysql")(conn)
	defer db.Close()
	var one int
	if err := db.QueryRowContext(context.Background(), "SELECT ?", 1).Scan(&one); err != nil {
		t.Fatal(err)
	}
	if n := len(rec.Ended()); n != 0 {
		t.Fatalf("an untraced query made %d spans: %v", n, names(rec.Ended()))
	}
	ctx, parent := tp.Tracer("test").Start(context.Background(), "request")
	if err := db.QueryRowContext(ctx, "SELECT ? + 1", 41).Scan(&one); err != nil || one != 42 {
		t.Fatal(one, err)
	}
	parent.End()
	var query sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "sql.conn.query" {
			query = s
		}
	}
	if query == nil || query.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Fatalf("no sql.conn.query span under the request: %v", names(rec.Ended()))
	}
	attrs := map[string]string{}
	for _, kv := range query.Attributes() {
		attrs[string(kv.Key)] = kv.Value.Emit()
	}
	if attrs["db.system.name"] != "mysql" || attrs["db.query.text"] != "SELECT ? + 1" || strings.Contains(strings.Join(mapValues(attrs), " "), "41") {
		t.Fatalf("query span attributes %v: want db.system.name mysql, the text with its placeholder, no argument", attrs)
	}
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// The pool collector reports each client's go-redis pool under its label.
func TestRedisPools(t *testing.T) {
	rdb := testenv.Another(t, testenv.Redis(t))
	for range 3 {
		rdb.Ping(context.Background())
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(telemetry.RedisPools{"main": rdb})
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 9 {
		t.Fatalf("%d series (%v), want 9", n, err)
	}
	hits := testutil.ToFloat64(gathered(t, reg, "surge_redis_pool_hits_total"))
	conns := testutil.ToFloat64(gathered(t, reg, "surge_redis_pool_connections"))
	if hits < 2 || conns < 1 {
		t.Fatalf("hits %v, connections %v after 3 PINGs", hits, conns)
	}
}

// gathered is a collector of the one series name has in reg, for testutil.ToFloat64.
func gathered(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			m := f.GetMetric()[0]
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
			return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "x"}, func() float64 { return v })
		}
	}
	t.Fatalf("%s: not one series", name)
	return nil
}

// Lines logged with a request's context carry its request id, and its trace and span ids
// when the trace is recorded.
func TestLoggerContext(t *testing.T) {
	var out bytes.Buffer
	log, err := telemetry.NewLogger(&out, telemetry.LogJSON, 0)
	if err != nil {
		t.Fatal(err)
	}
	tp, _ := recorder(t)
	ctx := telemetry.WithRequest(context.Background(), &telemetry.Request{ID: "req-1"})
	ctx, span := tp.Tracer("test").Start(ctx, "request")
	log.InfoContext(ctx, "inside")
	span.End()
	log.Info("outside")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var in, outside map[string]any
	if len(lines) != 2 || json.Unmarshal([]byte(lines[0]), &in) != nil || json.Unmarshal([]byte(lines[1]), &outside) != nil {
		t.Fatalf("output %q", out.String())
	}
	if in["request_id"] != "req-1" || in["trace_id"] != span.SpanContext().TraceID().String() || in["span_id"] != span.SpanContext().SpanID().String() {
		t.Errorf("line with the request's context: %v", in)
	}
	if _, ok := outside["request_id"]; ok {
		t.Errorf("line without a context names a request: %v", outside)
	}
	if _, err := telemetry.NewLogger(&out, "xml", 0); err == nil {
		t.Error("format xml accepted")
	}
}
