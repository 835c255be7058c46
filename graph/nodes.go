package graph

import (
	"context"

	"github.com/surgekit/surge/ent"
	"github.com/surgekit/surge/ent/seckillorder"
	"github.com/surgekit/surge/ent/shop"
	"github.com/surgekit/surge/ent/shoptype"
	"github.com/surgekit/surge/ent/user"
	"github.com/surgekit/surge/ent/voucher"
	"github.com/surgekit/surge/idgen"
	"github.com/surgekit/surge/internal/auth"
)

// tableRanges maps id>>32 to its table: ent's GlobalID ranges (ent/internal/globalid.go, out
// of reach of other packages; TestNodeTablesMatchEnt holds the two together).
var tableRanges = map[int]string{1: shop.Table, 2: shoptype.Table, 3: user.Table, 4: voucher.Table}

// nodeTable is the table of a node id, or "" for an id that no table can hold. Tables with
// database ids own a 2^32 range each (ent's GlobalID feature); order ids come from idgen and
// lie far above every table range.
func nodeTable(id int) string {
	if idgen.IsGenerated(int64(id)) {
		return seckillorder.Table
	}
	return tableRanges[id>>32]
}

// nodesByID answers node and nodes: one query per table the ids fall in (with field
// collection, so the edges a client selects load in one query per edge, not one per node),
// the ids' order kept, null for an id that is absent or hidden from the caller.
func (r *Resolver) nodesByID(ctx context.Context, ids []int) ([]ent.Noder, error) {
	byTable := map[string][]int{}
	for _, id := range ids {
		if t := nodeTable(id); t != "" {
			byTable[t] = append(byTable[t], id)
		}
	}
	found := make(map[int]ent.Noder, len(ids))
	viewer := auth.FromContext(ctx)
	for table, tableIDs := range byTable {
		nodes, err := r.loadTable(ctx, table, tableIDs)
		if err != nil {
			return nil, err
		}
		for id, n := range nodes {
			if visibleTo(viewer, n) {
				found[id] = n
			}
		}
	}
	out := make([]ent.Noder, len(ids))
	for i, id := range ids {
		out[i] = found[id]
	}
	return out, nil
}

// loadTable loads ids of one table. Orders load whole rows, without field collection: their
// owner (user_id) decides who sees them, whatever the client selected.
func (r *Resolver) loadTable(ctx context.Context, table string, ids []int) (map[int]ent.Noder, error) {
	switch table {
	case shop.Table:
		return collect(ctx, r.DB.Shop.Query().Where(shop.IDIn(ids...)), "Shop")
	case shoptype.Table:
		return collect(ctx, r.DB.ShopType.Query().Where(shoptype.IDIn(ids...)), "ShopType")
	case voucher.Table:
		return collect(ctx, r.DB.Voucher.Query().Where(voucher.IDIn(ids...)), "Voucher")
	case user.Table:
		return collect(ctx, r.DB.User.Query().Where(user.IDIn(ids...)), "User")
	case seckillorder.Table:
		orders, err := r.DB.SeckillOrder.Query().Where(seckillorder.IDIn(ids...)).All(ctx)
		return byID(orders, err)
	}
	return nil, nil
}

// nodeQuery is what the generated queries of node types offer.
type nodeQuery[Q any, N identified] interface {
	CollectFields(ctx context.Context, satisfies ...string) (Q, error)
	All(ctx context.Context) ([]N, error)
}

type identified interface {
	ent.Noder
	*ent.Shop | *ent.ShopType | *ent.Voucher | *ent.User | *ent.SeckillOrder
}

// collect runs q with the fields the client selected on typeName (and Node) collected.
func collect[Q nodeQuery[Q, N], N identified](ctx context.Context, q Q, typeName string) (map[int]ent.Noder, error) {
	q, err := q.CollectFields(ctx, typeName, "Node")
	if err != nil {
		return nil, err
	}
	nodes, err := q.All(ctx)
	return byID(nodes, err)
}

func byID[N identified](nodes []N, err error) (map[int]ent.Noder, error) {
	if err != nil {
		return nil, err
	}
	out := make(map[int]ent.Noder, len(nodes))
	for _, n := range nodes {
		out[idOf(n)] = n
	}
	return out, nil
}

func idOf(n ent.Noder) int {
	switch n := n.(type) {
	case *ent.Shop:
		return n.ID
	case *ent.ShopType:
		return n.ID
	case *ent.Voucher:
		return n.ID
	case *ent.User:
		return n.ID
	case *ent.SeckillOrder:
		return n.ID
	}
	return 0
}

// visibleTo hides other users' private nodes: users see themselves, owners their orders,
// admins everything. Hidden nodes look absent (no existence oracle).
func visibleTo(viewer *auth.Session, n ent.Noder) bool {
	switch n := n.(type) {
	case *ent.User:
		return viewer != nil && (viewer.IsAdmin() || viewer.UserID == n.ID)
	case *ent.SeckillOrder:
		return viewer != nil && (viewer.IsAdmin() || viewer.UserID == n.UserID)
	}
	return true
}
