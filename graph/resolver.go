package graph

import (
	"context"
	"log/slog"

	"github.com/surgekit/surge/ent"
	"github.com/surgekit/surge/ent/seckillorder"
	"github.com/surgekit/surge/internal/apperr"
	"github.com/surgekit/surge/internal/auth"
	"github.com/surgekit/surge/internal/catalog"
	"github.com/surgekit/surge/internal/live"
	"github.com/surgekit/surge/seckill"
)

// Resolver holds the services the resolvers translate GraphQL calls into. Resolvers stay
// thin: rules live in auth, catalog and seckill, which are tested on their own.
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

func requireAdmin(ctx context.Context) (*auth.Session, error) {
	s, err := requireUser(ctx)
	if err != nil {
		return nil, err
	}
	if !s.IsAdmin() {
		return nil, apperr.New(apperr.Forbidden, "admin role required")
	}
	return s, nil
}

// orderIDFloor separates order ids from table ids. Tables with database ids own a 2^32 range
// each (ent's GlobalID feature); order ids come from idgen with seconds since its epoch in the
// high 32 bits, so they lie far above every table range.
const orderIDFloor = 1 << 48

func nodeOptions(id int) []ent.NodeOption {
	if id >= orderIDFloor {
		return []ent.NodeOption{ent.WithFixedNodeType(seckillorder.Table)}
	}
	return nil
}

// visible hides other users' private nodes: users see themselves, owners see their orders,
// admins see everything. Hidden nodes look absent (no existence oracle). Ownership is checked
// with its own query because field collection loads only the columns the client selected.
func (r *Resolver) visible(ctx context.Context, n ent.Noder) (bool, error) {
	s := auth.FromContext(ctx)
	switch n := n.(type) {
	case *ent.User:
		return s != nil && (s.IsAdmin() || s.UserID == n.ID), nil
	case *ent.SeckillOrder:
		if s == nil {
			return false, nil
		}
		if s.IsAdmin() {
			return true, nil
		}
		return r.DB.SeckillOrder.Query().Where(seckillorder.ID(n.ID), seckillorder.UserID(s.UserID)).Exist(ctx)
	}
	return n != nil, nil
}
