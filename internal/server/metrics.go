package server

import (
	"context"
	"regexp"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics counts GraphQL operations by name, type and outcome, and their latency.
type metrics struct {
	ops      *prometheus.CounterVec
	errors   *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "surge_graphql_operations_total", Help: "GraphQL responses by operation type and outcome (one per operation; one per event for subscriptions; operation names are client-chosen, so not a label).",
		}, []string{"type", "outcome"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "surge_graphql_errors_total", Help: "GraphQL errors by extensions.code.",
		}, []string{"code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "surge_graphql_duration_seconds", Help: "GraphQL operation latency, reading, parsing and validating the document included (subscriptions excluded).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"type"}),
	}
	reg.MustRegister(m.ops, m.errors, m.duration,
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(tailMetrics)), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// tailMetrics are the Go runtime's histograms that explain a latency tail: how long runnable
// goroutines waited for a CPU (go_sched_latencies_seconds) and how long the GC stopped the
// world (go_sched_pauses_total_gc_seconds), besides the default Go collector's gauges.
var tailMetrics = collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/sched/(latencies|pauses/total/gc):seconds$`)}

func (m *metrics) aroundResponses(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	start := time.Now()
	resp := next(ctx)
	typ := "unknown"
	if graphql.HasOperationContext(ctx) {
		op := graphql.GetOperationContext(ctx)
		if op.Operation != nil {
			typ = string(op.Operation.Operation)
		}
		// From the moment the request reached gqlgen: reading, parsing and validating the
		// document count, not only executing it.
		if !op.Stats.OperationStart.IsZero() {
			start = op.Stats.OperationStart
		}
	}
	outcome := "ok"
	if resp != nil && len(resp.Errors) > 0 {
		outcome = "error"
		for _, e := range resp.Errors {
			code, _ := e.Extensions["code"].(string)
			if code == "" {
				code = "UNKNOWN"
			}
			m.errors.WithLabelValues(code).Inc()
		}
	}
	m.ops.WithLabelValues(typ, outcome).Inc()
	if typ != "subscription" {
		// A subscription answers once per event; the time in between is waiting, not latency.
		m.duration.WithLabelValues(typ).Observe(time.Since(start).Seconds())
	}
	return resp
}
