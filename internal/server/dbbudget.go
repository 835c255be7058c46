package server

import (
	"context"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/surgekit/surge/internal/apperr"
	"github.com/surgekit/surge/internal/auth"
	"github.com/surgekit/surge/internal/store"
)

// CodeQueryTooExpensive is the code of a field whose statements were stopped, or not run,
// because its request had used up its database time (Options.DBBudget).
const CodeQueryTooExpensive apperr.Code = "QUERY_TOO_EXPENSIVE"

// requestBudgetKey holds the database time budget of an HTTP request: the operations of a
// batch share it, as they share the complexity budget.
type requestBudgetKey struct{}

// withRequestBudget gives an HTTP request its database time budget (none when d <= 0).
func withRequestBudget(ctx context.Context, d time.Duration) context.Context {
	if d <= 0 {
		return ctx
	}
	return context.WithValue(ctx, requestBudgetKey{}, store.NewBudget(d))
}

// dbBudget makes each query of a caller other than an admin draw on a budget of database time
// (store.Budget): its HTTP request's, or over a WebSocket one of its own. The cost model
// (fullreads.go) refuses the reads it can price; the budget stops whatever it priced too low,
// in the database. Admins' queries, mutations (writes by key, which may wait for row locks
// without using the database's CPU) and subscriptions are bounded by the request's deadline
// alone.
func dbBudget(d time.Duration) graphql.OperationMiddleware {
	return func(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
		op := graphql.GetOperationContext(ctx).Operation
		if d <= 0 || op == nil || op.Operation != ast.Query {
			return next(ctx)
		}
		if s := auth.FromContext(ctx); s != nil && s.IsAdmin() {
			return next(ctx)
		}
		b, ok := ctx.Value(requestBudgetKey{}).(*store.Budget)
		if !ok { // an operation over a WebSocket
			b = store.NewBudget(d)
		}
		return next(store.WithBudget(ctx, b))
	}
}

// busyMessage is the message of a request whose reads the cost model prices as lookups by
// index, yet whose database time ran out: the database answers slowly (too busy), not the
// request asks too much.
const busyMessage = "the database is too busy to answer within this request's database time: retry in a moment"

// budgetSpent is the error of a field stopped by its request's database time: the request
// asked too much when the cost model counted full reads in it (QUERY_TOO_EXPENSIVE); when it
// counted none, the database was too slow for reads by index (UNAVAILABLE: retry). Under
// load the statements of a few lookups took more than the 80 ms by themselves.
func budgetSpent(ctx context.Context) error {
	if pricedFullReads(ctx) == 0 {
		return apperr.New(apperr.Unavailable, busyMessage)
	}
	return apperr.New(CodeQueryTooExpensive, "the request used up its database time: ask for less (a filter an index answers, fewer aliases)")
}
