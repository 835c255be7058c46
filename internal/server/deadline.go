package server

import (
	"context"
	"net/http"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/surgekit/surge/internal/apperr"
)

// CodeTimeout is the code of a field whose work was cut off at the request's deadline.
const CodeTimeout apperr.Code = "TIMEOUT"

func isUpgrade(r *http.Request) bool { return r.Header.Get("Upgrade") != "" }

// operationDeadline gives queries and mutations that arrive without a deadline (over a
// WebSocket) the same one as an HTTP request. Subscriptions run as long as they are wanted.
func operationDeadline(timeout time.Duration) graphql.OperationMiddleware {
	return func(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
		op := graphql.GetOperationContext(ctx).Operation
		if _, ok := ctx.Deadline(); ok || op == nil || op.Operation == ast.Subscription {
			return next(ctx)
		}
		ctx, cancel := context.WithTimeout(ctx, timeout)
		handler := next(ctx)
		return func(ctx context.Context) *graphql.Response {
			defer cancel()
			return handler(ctx)
		}
	}
}

// deadlinePassed reports whether ctx ended at its deadline: whatever error a call returned
// then (a Redis "i/o timeout", a driver's "context deadline exceeded") is the deadline's doing.
func deadlinePassed(ctx context.Context) bool { return ctx.Err() == context.DeadlineExceeded }
