package telemetry

import (
	"context"
	"errors"
	"net"
	"strings"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// maxPipelineSummary is how many distinct command names a pipeline span's name lists.
const maxPipelineSummary = 4

// TraceRedis adds a client span for each command and pipeline rdb sends within a recorded
// trace, named after the command (its arguments are not recorded: they hold login codes and
// session hashes). Work outside a trace is left alone, at the cost of one context lookup.
func TraceRedis(rdb redis.UniversalClient, tp trace.TracerProvider) {
	rdb.AddHook(redisHook{tracer: Tracer(tp)})
}

type redisHook struct{ tracer trace.Tracer }

func (redisHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h redisHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !traced(ctx) {
			return next(ctx, cmd)
		}
		ctx, span := h.start(ctx, cmd.FullName(), 1)
		err := next(ctx, cmd)
		endRedisSpan(span, err)
		return err
	}
}

func (h redisHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if !traced(ctx) {
			return next(ctx, cmds)
		}
		ctx, span := h.start(ctx, "pipeline "+pipelineSummary(cmds), len(cmds))
		err := next(ctx, cmds)
		endRedisSpan(span, err)
		return err
	}
}

func (h redisHook) start(ctx context.Context, name string, commands int) (context.Context, trace.Span) {
	return h.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		semconv.DBSystemNameRedis, semconv.DBOperationName(name), semconv.DBOperationBatchSize(commands)))
}

// endRedisSpan ends span, marking it failed unless err is nil or redis.Nil (a missing key is
// an answer, not a failure).
func endRedisSpan(span trace.Span, err error) {
	if err != nil && !errors.Is(err, redis.Nil) {
		span.RecordError(err)
		span.SetStatus(codes.Error, redisErrorKind(err))
	}
	span.End()
}

// redisErrorKind describes err without its text, which may quote arguments.
func redisErrorKind(err error) string {
	var netErr net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return "error"
}

// pipelineSummary names the distinct commands of a pipeline, in order, at most
// maxPipelineSummary of them.
func pipelineSummary(cmds []redis.Cmder) string {
	var names []string
	for _, c := range cmds {
		name := c.FullName()
		seen := false
		for _, n := range names {
			seen = seen || n == name
		}
		if !seen {
			if len(names) == maxPipelineSummary {
				names = append(names, "…")
				break
			}
			names = append(names, name)
		}
	}
	return strings.Join(names, " ")
}
