package telemetry

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"go.opentelemetry.io/otel/trace"
)

// Log formats.
const (
	LogText = "text" // logfmt-like key=value lines (slog.TextHandler)
	LogJSON = "json" // one JSON object per line (slog.JSONHandler)
)

// ParseLogLevel reads debug, info, warn or error.
func ParseLogLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.TrimSpace(s))); err != nil {
		return 0, fmt.Errorf("invalid log level %q: want debug, info, warn or error", s)
	}
	return l, nil
}

// NewLogger writes records of level and above to w in format (LogText or LogJSON). A record
// logged with a request's context carries its request_id, and its trace_id and span_id when
// the request's trace is recorded. When w holds lines back (a BatchWriter), a record at WARN
// or above is written at once, with the lines before it: a warning is not left in a buffer
// that a crash would lose.
func NewLogger(w io.Writer, format string, level slog.Level) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	switch format {
	case LogText:
		h = slog.NewTextHandler(w, opts)
	case LogJSON:
		h = slog.NewJSONHandler(w, opts)
	default:
		return nil, fmt.Errorf("invalid log format %q: want %s or %s", format, LogText, LogJSON)
	}
	f, _ := w.(flusher)
	return slog.New(contextHandler{h, f}), nil
}

// contextHandler adds the request id and trace context of a record's context, and flushes
// the writer after a record at WARN or above.
type contextHandler struct {
	slog.Handler
	flush flusher // nil: w writes each record at once
}

func (h contextHandler) Handle(ctx context.Context, rec slog.Record) error {
	if id := RequestID(ctx); id != "" {
		rec.AddAttrs(slog.String("request_id", id))
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsSampled() {
		rec.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	err := h.Handler.Handle(ctx, rec)
	if h.flush != nil && rec.Level >= slog.LevelWarn {
		if ferr := h.flush.Flush(); err == nil {
			err = ferr
		}
	}
	return err
}

func (h contextHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return contextHandler{h.Handler.WithAttrs(attrs), h.flush}
}

func (h contextHandler) WithGroup(name string) slog.Handler {
	return contextHandler{h.Handler.WithGroup(name), h.flush}
}
