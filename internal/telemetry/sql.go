package telemetry

import (
	"context"
	"database/sql"
	"database/sql/driver"

	"github.com/XSAM/otelsql"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// SQLOpener opens database pools whose statements and transactions get client spans when
// they run within a recorded trace (statement text with its placeholders, never the
// arguments). system is the db.system.name ("mysql", "sqlite").
func SQLOpener(tp trace.TracerProvider, system string) func(driver.Connector) *sql.DB {
	return func(c driver.Connector) *sql.DB {
		return otelsql.OpenDB(c,
			otelsql.WithTracerProvider(tp),
			otelsql.WithAttributes(semconv.DBSystemNameKey.String(system)),
			otelsql.WithSpanOptions(otelsql.SpanOptions{
				DisableErrSkip:       true,
				OmitConnResetSession: true,
				OmitRows:             true,
				SpanFilter: func(ctx context.Context, _ otelsql.Method, _ string, _ []driver.NamedValue) bool {
					return traced(ctx)
				},
			}))
	}
}
