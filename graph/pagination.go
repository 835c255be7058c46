package graph

import (
	"entgo.io/contrib/entgql"

	"github.com/surgekit/surge/ent"
	"github.com/surgekit/surge/internal/apperr"
)

// Page sizes for connections: a missing first/last means DefaultPageSize, more than
// MaxPageSize is refused (the complexity limit multiplies by the same numbers).
const (
	DefaultPageSize = 20
	MaxPageSize     = 100
	MaxNodeIDs      = 100
)

// pageArgs checks first and last (one of them, each within MaxPageSize) and defaults first.
func pageArgs(first, last *int) (*int, *int, error) {
	if first != nil && last != nil {
		return nil, nil, apperr.Invalid("last", "first and last cannot be used together")
	}
	for name, v := range map[string]*int{"first": first, "last": last} {
		if v != nil && (*v < 0 || *v > MaxPageSize) {
			return nil, nil, apperr.Invalid(name, "%s must be between 0 and %d", name, MaxPageSize)
		}
	}
	if first == nil && last == nil {
		n := DefaultPageSize
		first = &n
	}
	return first, last, nil
}

// errForeignCursor: entgql compares a cursor's values with the order's columns as they come,
// so a cursor this server did not write for the list's order (tampered, or taken from another
// order) would fail in entgql or the database as an internal error.
var errForeignCursor = apperr.Invalid("cursor", "invalid cursor: it does not come from this list in this order")

// checkShopCursors accepts the cursors a shops page writes for orderBy: a list of one plain
// value per order field (entgql's multi-field ordering).
func checkShopCursors(orderBy []*ent.ShopOrder, cursors ...*entgql.Cursor[int]) error {
	for _, c := range cursors {
		if c == nil || c.Value == nil {
			continue
		}
		values, ok := c.Value.([]any)
		if !ok || len(values) != len(orderBy) {
			return errForeignCursor
		}
		for _, v := range values {
			if !plainValue(v) {
				return errForeignCursor
			}
		}
	}
	return nil
}

// checkSingleOrderCursor accepts the cursor of a list with one order field: one plain value.
func checkSingleOrderCursor(c *entgql.Cursor[int]) error {
	if c != nil && !plainValue(c.Value) {
		return errForeignCursor
	}
	return nil
}

// plainValue is a column value as a cursor carries it: no list, no map.
func plainValue(v any) bool {
	switch v.(type) {
	case []any, map[string]any, map[any]any:
		return false
	}
	return true
}

// shopFilter turns where into a query filter. A top-level empty where means no filter, as in
// entgql; an empty not, and or or inside it is the client's mistake.
func shopFilter(where *ent.ShopWhereInput) (func(*ent.ShopQuery) (*ent.ShopQuery, error), error) {
	noFilter := func(q *ent.ShopQuery) (*ent.ShopQuery, error) { return q, nil }
	if where == nil {
		return noFilter, nil
	}
	p, err := where.P()
	switch {
	case err == ent.ErrEmptyShopWhereInput: // only the top level's is unwrapped
		return noFilter, nil
	case err != nil:
		return nil, apperr.Invalid("where", "invalid filter: not, and and or each need a condition")
	}
	return func(q *ent.ShopQuery) (*ent.ShopQuery, error) { return q.Where(p), nil }, nil
}
