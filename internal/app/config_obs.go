package app

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/surgekit/surge/internal/telemetry"
)

// Observability is the part of Config that concerns operators: logs, the admin listener,
// tracing.
type Observability struct {
	// AdminAddr is SURGE_ADMIN_ADDR, -admin-addr (none): a second listen address that serves
	// /metrics and the playground (and /query for it, and the health endpoints); with it, the
	// main address serves neither /metrics nor the playground.
	AdminAddr string
	// LogFormat is SURGE_LOG_FORMAT, -log-format ("text"): "text" or "json" lines on stderr.
	LogFormat string
	// LogLevel is SURGE_LOG_LEVEL, -log-level ("info"): debug, info, warn or error.
	LogLevel slog.Level
	// AccessLog is SURGE_ACCESS_LOG, -access-log (true): one INFO line per HTTP request.
	AccessLog bool
	// OTLPEndpoint is SURGE_OTLP_ENDPOINT, -otlp-endpoint (none: tracing off): the base URL of
	// an OTLP/HTTP receiver (http://collector:4318) that spans are exported to.
	OTLPEndpoint string
	// TraceSampleRatio is SURGE_TRACE_SAMPLE_RATIO, -trace-sample-ratio (1): the share of
	// traces started by this server that are recorded; a caller's sampled traceparent decides
	// for its own requests.
	TraceSampleRatio float64
}

// observabilityFlags defines the Observability flags on fs; set checks them into c.
func observabilityFlags(fs *flag.FlagSet, ev *envVars) (set func(c *Config) error) {
	env := ev.str
	adminAddr := fs.String("admin-addr", env("SURGE_ADMIN_ADDR", ""), "second listen address serving /metrics and the playground, which the main address then does not serve (SURGE_ADMIN_ADDR)")
	logFormat := fs.String("log-format", env("SURGE_LOG_FORMAT", telemetry.LogText), `log lines: "text" or "json" (SURGE_LOG_FORMAT)`)
	logLevel := fs.String("log-level", env("SURGE_LOG_LEVEL", "info"), "least level logged: debug, info, warn or error (SURGE_LOG_LEVEL)")
	accessLog := fs.String("access-log", env("SURGE_ACCESS_LOG", ""), "one log line per HTTP request: true/false (SURGE_ACCESS_LOG; default true)")
	otlp := fs.String("otlp-endpoint", env("SURGE_OTLP_ENDPOINT", ""), "OTLP/HTTP receiver to export traces to, e.g. http://collector:4318; empty: tracing off (SURGE_OTLP_ENDPOINT)")
	ratio := fs.Float64("trace-sample-ratio", ev.float("SURGE_TRACE_SAMPLE_RATIO", 1), "share of the traces this server starts that are recorded, 0..1 (SURGE_TRACE_SAMPLE_RATIO)")
	return func(c *Config) error {
		if _, err := splitAddrs("admin-addr", *adminAddr); err != nil {
			return err
		}
		o := Observability{AdminAddr: strings.TrimSpace(*adminAddr), LogFormat: strings.TrimSpace(*logFormat),
			OTLPEndpoint: strings.TrimSpace(*otlp), TraceSampleRatio: *ratio}
		if o.LogFormat != telemetry.LogText && o.LogFormat != telemetry.LogJSON {
			return fmt.Errorf("invalid log-format %q: want %s or %s", o.LogFormat, telemetry.LogText, telemetry.LogJSON)
		}
		var err error
		if o.LogLevel, err = telemetry.ParseLogLevel(*logLevel); err != nil {
			return err
		}
		if o.AccessLog, err = parseBool("access-log", *accessLog, true); err != nil {
			return err
		}
		if o.OTLPEndpoint != "" {
			if _, err := telemetry.TraceEndpoint(o.OTLPEndpoint); err != nil {
				return err
			}
		}
		if o.TraceSampleRatio < 0 || o.TraceSampleRatio > 1 {
			return fmt.Errorf("trace-sample-ratio %v: want 0..1", o.TraceSampleRatio)
		}
		c.Observability = o
		return nil
	}
}

// Logger is the logger the configuration asks for, writing to stderr-like w.
func (c Config) Logger(w io.Writer) *slog.Logger {
	log, err := telemetry.NewLogger(w, c.LogFormat, c.LogLevel)
	if err != nil { // ParseConfig checked the format
		panic(err)
	}
	return log
}
