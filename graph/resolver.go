package graph

import (
	"context"
	"log/slog"

	"github.com/99designs/gqlgen/graphql"

	"github.com/surgekit/surge/ent"
	"github.com/surgekit/surge/internal/apperr"
	"github.com/surgekit/surge/internal/auth"
	"github.com/surgekit/surge/internal/catalog"
	"github.com/surgekit/surge/internal/live"
	"github.com/surgekit/surge/internal/sales"
	"github.com/surgekit/surge/seckill"
)

// Resolver holds the services the resolvers translate GraphQL calls into. Resolvers stay
// thin: rules live in auth, catalog, sales and seckill, which are tested on their own;
// authorisation is declared in the schema (@admin).
type Resolver struct {
	DB      *ent.Client
	Auth    *auth.Service
	Catalog *catalog.Service
	Seckill *seckill.Service
	Log     *slog.Logger // for failures that do not fail the operation (slog.Default if nil)
	Live    *live.Hub    // subscriptions' shared pollers
}

func requireUser(ctx context.Context) (*auth.Session, error) {
	s := auth.FromContext(ctx)
	if s == nil {
		return nil, apperr.New(apperr.Unauthenticated, "login required: send Authorization: Bearer <token>")
	}
	return s, nil
}

// adminOnly is the @admin directive: the field resolves only for a logged-in ADMIN.
func adminOnly(ctx context.Context, _ any, next graphql.Resolver) (any, error) {
	s, err := requireUser(ctx)
	if err != nil {
		return nil, err
	}
	if !s.IsAdmin() {
		return nil, apperr.New(apperr.Forbidden, "admin role required")
	}
	auth.WatchRole(ctx) // an admin-only subscription ends if the session loses the role
	return next(ctx)
}

// sales is the application service the voucher and order resolvers call.
func (r *Resolver) sales() *sales.Service {
	return sales.New(r.DB, r.Catalog, r.Seckill, r.Log)
}
