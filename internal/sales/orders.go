package sales

import (
	"cmp"
	"context"
	"slices"
	"time"

	"entgo.io/contrib/entgql"

	"github.com/surgekit/surge/ent"
	"github.com/surgekit/surge/ent/seckillorder"
)

// newestFirst is the order of a user's orders.
var newestFirst = &ent.SeckillOrderOrder{Direction: entgql.OrderDirectionDesc, Field: ent.SeckillOrderOrderFieldCreatedAt}

// Orders is a page of a user's orders, newest first, the QUEUED ones (admitted in Redis, not
// yet in the database) merged in. The queued orders are read before the database page, so an
// order written in between shows up in both and is kept once.
func (s *Service) Orders(ctx context.Context, userID int, first int, after *entgql.Cursor[int]) (*ent.SeckillOrderConnection, error) {
	queued, err := s.seckill.QueuedOrders(ctx, userID)
	if err != nil {
		return nil, err
	}
	conn, err := s.db.SeckillOrder.Query().Where(seckillorder.UserID(userID)).
		Paginate(ctx, after, &first, nil, nil, ent.WithSeckillOrderOrder(newestFirst))
	if err != nil {
		return nil, err
	}
	return mergeQueued(conn, queued, after, first), nil
}

// mergeQueued merges a user's queued orders into a page of their saved orders, as if they
// were rows of the same list: createdAt descending, id descending on ties. conn is the page
// the database gave for after and first. On the first page (after == nil) every queued order
// is a candidate, so they come first as they are the newest; after a cursor, those that sort
// after it (one older than some saved order, or beyond the first page, still shows up once).
// The page keeps at most first edges. totalCount counts each queued order not already on the
// page, hasNextPage also holds when edges were cut, and a queued edge's cursor is the one the
// database would give it ({ID, createdAt}), so that it can serve as after.
func mergeQueued(conn *ent.SeckillOrderConnection, queued []*ent.SeckillOrder, after *entgql.Cursor[int], first int) *ent.SeckillOrderConnection {
	if len(queued) == 0 {
		return conn
	}
	saved := make(map[int]bool, len(conn.Edges))
	for _, e := range conn.Edges {
		saved[e.Node.ID] = true
	}
	edges := slices.Clone(conn.Edges)
	for _, o := range queued {
		if saved[o.ID] {
			continue // written to the database since it was listed
		}
		conn.TotalCount++
		if after != nil && !olderThan(o, after) {
			continue // on an earlier page
		}
		edges = append(edges, &ent.SeckillOrderEdge{Node: o, Cursor: entgql.Cursor[int]{ID: o.ID, Value: o.CreatedAt}})
	}
	slices.SortStableFunc(edges, func(a, b *ent.SeckillOrderEdge) int {
		if c := b.Node.CreatedAt.Compare(a.Node.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(b.Node.ID, a.Node.ID)
	})
	if len(edges) > first {
		edges = edges[:first]
		conn.PageInfo.HasNextPage = true
	}
	conn.Edges = edges
	conn.PageInfo.StartCursor, conn.PageInfo.EndCursor = nil, nil
	if n := len(edges); n > 0 {
		conn.PageInfo.StartCursor = &edges[0].Cursor
		conn.PageInfo.EndCursor = &edges[n-1].Cursor
	}
	return conn
}

// olderThan reports whether o sorts after the cursor c in createdAt-descending order (ties
// broken by id, descending), as the database's cursor predicate does.
func olderThan(o *ent.SeckillOrder, c *entgql.Cursor[int]) bool {
	at, ok := c.Value.(time.Time)
	if !ok {
		return o.ID < c.ID
	}
	if d := o.CreatedAt.Compare(at); d != 0 {
		return d < 0
	}
	return o.ID < c.ID
}
