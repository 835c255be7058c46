package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"unicode/utf8"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/surgekit/surge/ent"
	"github.com/surgekit/surge/internal/apperr"
	"github.com/surgekit/surge/internal/catalog"
	"github.com/surgekit/surge/internal/store"
)

const internalMessage = "internal error"

// classifyResolverErrors runs around every field resolver. Whatever a resolver returns that is
// not already a typed client error is logged with its detail and replaced by a bare INTERNAL
// error (UNAVAILABLE when a data store could not serve it now), so SQL and driver messages
// never reach a client. Errors that reach the presenter
// without a code therefore come from gqlgen's input coercion: bad user input.
func classifyResolverErrors(log *slog.Logger) graphql.FieldMiddleware {
	return func(ctx context.Context, next graphql.Resolver) (any, error) {
		res, err := next(ctx)
		if err == nil || apperr.CodeOf(err) != "" {
			return res, err
		}
		var gqlErr *gqlerror.Error
		if errors.As(err, &gqlErr) && gqlErr.Extensions["code"] != nil {
			return res, err
		}
		switch {
		case store.IsBudgetSpent(err):
			log.WarnContext(ctx, "request database time spent", "path", graphql.GetFieldContext(ctx).Path().String(), "full_reads", pricedFullReads(ctx), "err", err)
			return res, budgetSpent(ctx)
		case deadlinePassed(ctx) || store.IsStatementTimeout(err): // the server's count of the same deadline
			log.WarnContext(ctx, "request deadline passed", "path", graphql.GetFieldContext(ctx).Path().String(), "err", err)
			return res, apperr.New(CodeTimeout, "the request ran past its deadline")
		case ent.IsNotFound(err):
			return res, apperr.New(apperr.NotFound, "not found")
		case ent.IsValidationError(err), ent.IsConstraintError(err):
			return res, catalog.FromEnt(err)
		case errors.Is(err, context.Canceled):
			return res, apperr.New(apperr.Internal, "request cancelled")
		case unavailable(err):
			log.WarnContext(ctx, "store unavailable", "path", graphql.GetFieldContext(ctx).Path().String(), "err", err)
			return res, apperr.New(apperr.Unavailable, unavailableMessage)
		}
		fc := graphql.GetFieldContext(ctx)
		log.ErrorContext(ctx, "resolver failed", "path", fc.Path().String(), "err", err)
		return res, apperr.New(apperr.Internal, internalMessage)
	}
}

// presenter puts the typed code in extensions.code, the offending input in
// extensions.field and any further extensions of the typed error (which cannot override
// those two) beside them. Without suggestions, no "Did you mean" hint survives: gqlgen's
// switch covers unknown fields only, not enum values, arguments or input fields.
func presenter(suggestions bool) graphql.ErrorPresenterFunc {
	return func(ctx context.Context, err error) *gqlerror.Error {
		gqlErr := presentError(ctx, err)
		if !suggestions {
			gqlErr.Message = withoutSuggestion(gqlErr.Message)
		}
		return gqlErr
	}
}

// withoutSuggestion drops gqlparser's " Did you mean …?" tail, which names schema members.
func withoutSuggestion(msg string) string {
	if i := strings.Index(msg, " Did you mean "); i >= 0 {
		return msg[:i]
	}
	return msg
}

func presentError(ctx context.Context, err error) *gqlerror.Error {
	gqlErr := graphql.DefaultErrorPresenter(ctx, err)
	if gqlErr.Extensions == nil {
		gqlErr.Extensions = map[string]any{}
	}
	var ae *apperr.Error
	switch {
	case errors.As(err, &ae):
		gqlErr.Message = ae.Message
		for k, v := range ae.Extensions {
			gqlErr.Extensions[k] = v
		}
		gqlErr.Extensions["code"] = string(ae.Code)
		if ae.Field != "" {
			gqlErr.Extensions["field"] = ae.Field
		}
	case gqlErr.Extensions["code"] != nil:
		// Parse, validation and limit errors from gqlgen keep their own codes.
	case gqlErr.Unwrap() != nil:
		// A scalar or input failed to coerce (e.g. a malformed Time): the client's mistake.
		gqlErr.Extensions["code"] = string(apperr.BadUserInput)
	default:
		// gqlgen's own execution errors ("must not be null"): a server bug, not input.
		gqlErr.Message = internalMessage
		gqlErr.Extensions["code"] = string(apperr.Internal)
	}
	gqlErr.Message = truncate(gqlErr.Message, maxMessageBytes)
	return gqlErr
}

// maxMessageBytes bounds an error message: parser and validator messages quote the input
// (a value, a name), and no answer may echo an unbounded input.
const maxMessageBytes = 300

// truncate cuts s to at most n bytes on a UTF-8 boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// maxErrors bounds the errors of one response: validation reports every conflicting pair of
// fields, which grows with the square of a hostile document.
const maxErrors = 20

// capErrors keeps the first maxErrors errors of a response and says how many were dropped.
func capErrors(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	resp := next(ctx)
	if resp != nil && len(resp.Errors) > maxErrors {
		dropped := len(resp.Errors) - maxErrors + 1
		resp.Errors = append(resp.Errors[:maxErrors-1], &gqlerror.Error{
			Message:    fmt.Sprintf("%d more errors not shown", dropped),
			Extensions: map[string]any{"code": resp.Errors[maxErrors-1].Extensions["code"]},
		})
	}
	return resp
}

// recoverPanic logs a resolver panic with its stack and answers INTERNAL.
func recoverPanic(log *slog.Logger) graphql.RecoverFunc {
	return func(ctx context.Context, p any) error {
		log.ErrorContext(ctx, "resolver panic", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
		return apperr.New(apperr.Internal, internalMessage)
	}
}
