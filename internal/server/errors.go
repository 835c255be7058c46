package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/surgekit/surge/ent"
	"github.com/surgekit/surge/internal/apperr"
	"github.com/surgekit/surge/internal/catalog"
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

// presentError puts the typed code in extensions.code, the offending input in
// extensions.field and any further extensions of the typed error (which cannot override
// those two) beside them.
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
	return gqlErr
}

// recoverPanic logs a resolver panic with its stack and answers INTERNAL.
func recoverPanic(log *slog.Logger) graphql.RecoverFunc {
	return func(ctx context.Context, p any) error {
		log.ErrorContext(ctx, "resolver panic", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
		return apperr.New(apperr.Internal, internalMessage)
	}
}
