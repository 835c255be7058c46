package app

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel/trace"

	"github.com/surgekit/surge/internal/store"
	"github.com/surgekit/surge/internal/telemetry"
)

// tracingFlushTimeout bounds the export of the spans still buffered at Close.
const tracingFlushTimeout = 5 * time.Second

// startTracing starts the OTLP exporter when Config.OTLPEndpoint is set. It is the first
// thing opened, so that Close stops it last, once the spans of everything else have ended.
func (a *App) startTracing(ctx context.Context) error {
	if a.Config.OTLPEndpoint == "" {
		return nil
	}
	t, err := telemetry.StartTracing(ctx, telemetry.TracingOptions{
		Endpoint: a.Config.OTLPEndpoint, SampleRatio: a.Config.TraceSampleRatio, Logger: a.Log,
	})
	if err != nil {
		return err
	}
	a.tracing = t
	a.closers = append(a.closers, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), tracingFlushTimeout)
		defer cancel()
		return t.Shutdown(ctx)
	})
	return nil
}

// tracerProvider is the tracer provider, or nil with tracing off.
func (a *App) tracerProvider() trace.TracerProvider {
	if a.tracing == nil {
		return nil
	}
	return a.tracing.Provider()
}

// sqlOpener opens the database pool traced when tracing is on, plainly otherwise.
func (a *App) sqlOpener(system string) store.Opener {
	if a.tracing == nil {
		return nil
	}
	return telemetry.SQLOpener(a.tracing.Provider(), system)
}

// registerPoolStats reports the database pool (go_sql_*, db_name "surge") and the Redis
// clients' pools (surge_redis_pool_*, client "main" and "streams").
func (a *App) registerPoolStats(reg prometheus.Registerer) {
	reg.MustRegister(collectors.NewDBStatsCollector(a.DB.SQL, "surge"))
	pools := telemetry.RedisPools{"main": a.Redis}
	if a.streams != nil {
		pools["streams"] = a.streams
	}
	reg.MustRegister(pools)
}
