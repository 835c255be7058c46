package graph

import (
	"context"
	"errors"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/surgekit/surge/internal/apperr"
	"github.com/surgekit/surge/internal/gqlws"
	"github.com/surgekit/surge/internal/live"
)

// notFoundMessages are the NOT_FOUND messages of the subscription fields.
var notFoundMessages = map[string]string{
	"voucherStock": "no such seckill voucher",
	"orderStatus":  "no such order",
}

// streamError maps a live.Hub subscription error to an API error.
func streamError(err error, notFound string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, live.ErrNotFound):
		return apperr.New(apperr.NotFound, "%s", notFound)
	case errors.Is(err, live.ErrClosed):
		return apperr.New(apperr.Internal, "the server is shutting down; subscribe again")
	}
	return err
}

// SubscriptionFailed is the live.Hub's Options.OnError: when a stream breaks off because its
// voucher or order is gone, the WebSocket client gets an "error" message with code NOT_FOUND
// instead of a bare "complete".
func SubscriptionFailed(ctx context.Context, err error) {
	fc := graphql.GetFieldContext(ctx)
	if fc == nil || !errors.Is(err, live.ErrNotFound) {
		return
	}
	gqlErr := &gqlerror.Error{
		Message:    notFoundMessages[fc.Field.Name],
		Path:       fc.Path(),
		Extensions: map[string]any{"code": string(apperr.NotFound)},
	}
	gqlws.AddError(ctx, gqlErr)
}
