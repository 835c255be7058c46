package sales

import (
	"bytes"
	"strconv"
	"testing"
	"time"

	"entgo.io/contrib/entgql"

	"github.com/surgekit/surge/ent"
	"github.com/surgekit/surge/ent/seckillorder"
)

var t0 = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

func order(id int, sec int, status seckillorder.Status) *ent.SeckillOrder {
	return &ent.SeckillOrder{ID: id, CreatedAt: t0.Add(time.Duration(sec) * time.Second), Status: status}
}

// page builds what Paginate answers for saved orders (already newest first), of a list of
// total saved orders.
func page(total int, hasNext bool, after *entgql.Cursor[int], nodes ...*ent.SeckillOrder) *ent.SeckillOrderConnection {
	c := &ent.SeckillOrderConnection{TotalCount: total, Edges: []*ent.SeckillOrderEdge{}}
	for _, n := range nodes {
		c.Edges = append(c.Edges, &ent.SeckillOrderEdge{Node: n, Cursor: entgql.Cursor[int]{ID: n.ID, Value: n.CreatedAt}})
	}
	c.PageInfo.HasNextPage = hasNext
	c.PageInfo.HasPreviousPage = after != nil
	if len(c.Edges) > 0 {
		c.PageInfo.StartCursor = &c.Edges[0].Cursor
		c.PageInfo.EndCursor = &c.Edges[len(c.Edges)-1].Cursor
	}
	return c
}

func ids(c *ent.SeckillOrderConnection) string {
	var b bytes.Buffer
	for i, e := range c.Edges {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.Itoa(e.Node.ID))
		if e.Cursor.ID != e.Node.ID || !e.Cursor.Value.(time.Time).Equal(e.Node.CreatedAt) {
			b.WriteString("(bad cursor)")
		}
	}
	return b.String()
}

// roundTrip encodes a cursor as a client sees it and decodes it as the server reads it back.
func roundTrip(t *testing.T, c *entgql.Cursor[int]) *entgql.Cursor[int] {
	t.Helper()
	var buf bytes.Buffer
	c.MarshalGQL(&buf)
	s, err := strconv.Unquote(buf.String())
	if err != nil {
		t.Fatal(err)
	}
	var out entgql.Cursor[int]
	if err := out.UnmarshalGQL(s); err != nil {
		t.Fatal(err)
	}
	return &out
}

func TestMergeQueued(t *testing.T) {
	const Q, C = seckillorder.StatusQUEUED, seckillorder.StatusCREATED
	cases := []struct {
		name    string
		conn    *ent.SeckillOrderConnection
		queued  []*ent.SeckillOrder
		after   *entgql.Cursor[int]
		first   int
		want    string
		total   int
		hasNext bool
	}{
		{name: "nothing queued", conn: page(2, false, nil, order(20, 20, C), order(10, 10, C)),
			first: 5, want: "20 10", total: 2},
		{name: "prepended", conn: page(2, false, nil, order(20, 20, C), order(10, 10, C)),
			queued: []*ent.SeckillOrder{order(40, 40, Q), order(30, 30, Q)},
			first:  5, want: "40 30 20 10", total: 4},
		{name: "queued given oldest first", conn: page(1, false, nil, order(10, 10, C)),
			queued: []*ent.SeckillOrder{order(30, 30, Q), order(40, 40, Q)},
			first:  5, want: "40 30 10", total: 3},
		{name: "count toward first", conn: page(3, true, nil, order(20, 20, C), order(10, 10, C)),
			queued: []*ent.SeckillOrder{order(40, 40, Q)},
			first:  2, want: "40 20", total: 4, hasNext: true},
		{name: "cut makes a next page", conn: page(1, false, nil, order(10, 10, C)),
			queued: []*ent.SeckillOrder{order(40, 40, Q), order(30, 30, Q)},
			first:  2, want: "40 30", total: 3, hasNext: true},
		{name: "only queued, exact fit", conn: page(0, false, nil),
			queued: []*ent.SeckillOrder{order(40, 40, Q), order(30, 30, Q)},
			first:  2, want: "40 30", total: 2},
		{name: "interleaved with a newer saved order", conn: page(2, false, nil, order(50, 50, C), order(10, 10, C)),
			queued: []*ent.SeckillOrder{order(30, 30, Q)},
			first:  5, want: "50 30 10", total: 3},
		{name: "same second, id breaks the tie", conn: page(1, false, nil, order(31, 30, C)),
			queued: []*ent.SeckillOrder{order(32, 30, Q), order(30, 30, Q)},
			first:  5, want: "32 31 30", total: 3},
		{name: "persisted meanwhile, kept once", conn: page(2, false, nil, order(40, 40, C), order(10, 10, C)),
			queued: []*ent.SeckillOrder{order(40, 40, Q), order(30, 30, Q)},
			first:  5, want: "40 30 10", total: 3},
		{name: "first 0", conn: page(1, false, nil),
			queued: []*ent.SeckillOrder{order(40, 40, Q)},
			first:  0, want: "", total: 2, hasNext: true},
		{name: "later page: queued already shown", conn: page(3, false, &entgql.Cursor[int]{ID: 20, Value: t0.Add(20 * time.Second)}, order(10, 10, C)),
			queued: []*ent.SeckillOrder{order(40, 40, Q)},
			after:  &entgql.Cursor[int]{ID: 20, Value: t0.Add(20 * time.Second)},
			first:  2, want: "10", total: 4},
		{name: "later page: queued order older than the cursor", conn: page(2, false, &entgql.Cursor[int]{ID: 50, Value: t0.Add(50 * time.Second)}, order(10, 10, C)),
			queued: []*ent.SeckillOrder{order(30, 30, Q)},
			after:  &entgql.Cursor[int]{ID: 50, Value: t0.Add(50 * time.Second)},
			first:  2, want: "30 10", total: 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := mergeQueued(c.conn, c.queued, c.after, c.first)
			if ids(got) != c.want || got.TotalCount != c.total || got.PageInfo.HasNextPage != c.hasNext {
				t.Fatalf("got [%s] total %d hasNext %v, want [%s] total %d hasNext %v",
					ids(got), got.TotalCount, got.PageInfo.HasNextPage, c.want, c.total, c.hasNext)
			}
			if got.PageInfo.HasPreviousPage != (c.after != nil) {
				t.Fatalf("hasPreviousPage = %v", got.PageInfo.HasPreviousPage)
			}
			if n := len(got.Edges); n > 0 {
				if got.PageInfo.StartCursor != &got.Edges[0].Cursor || got.PageInfo.EndCursor != &got.Edges[n-1].Cursor {
					t.Fatal("start/end cursors are not the page's first and last edges'")
				}
			} else if got.PageInfo.StartCursor != nil || got.PageInfo.EndCursor != nil {
				t.Fatal("an empty page has cursors")
			}
		})
	}
}

// A queued edge's cursor, as the client sends it back, must place the next page right after
// it: the saved orders' cursor predicate (createdAt, id) < cursor is what olderThan mirrors.
func TestQueuedCursorRoundTrip(t *testing.T) {
	q := order(1<<50+7, 30, seckillorder.StatusQUEUED)
	conn := mergeQueued(page(0, false, nil), []*ent.SeckillOrder{q}, nil, 1)
	c := roundTrip(t, conn.PageInfo.EndCursor)
	if c.ID != q.ID {
		t.Fatalf("cursor id %d, want %d", c.ID, q.ID)
	}
	if at, ok := c.Value.(time.Time); !ok || !at.Equal(q.CreatedAt) {
		t.Fatalf("cursor value %#v (%T), want the time %v", c.Value, c.Value, q.CreatedAt)
	}
	for _, o := range []struct {
		o     *ent.SeckillOrder
		after bool
	}{
		{order(1<<50+6, 30, ""), true}, {order(1<<50+8, 30, ""), false},
		{order(1<<50+99, 29, ""), true}, {order(1<<50+1, 31, ""), false}, {q, false},
	} {
		if olderThan(o.o, c) != o.after {
			t.Errorf("order %d at %v: olderThan = %v", o.o.ID, o.o.CreatedAt, !o.after)
		}
	}
}
