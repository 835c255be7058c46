package scalar

import (
	"entgo.io/contrib/entgql"
	"github.com/99designs/gqlgen/graphql"

	"github.com/surgekit/surge/internal/apperr"
)

// A Cursor is entgql's: msgpack in unpadded base64, written by this server. One that does not
// decode is the client's mistake, answered as bad user input without the decoder's words
// ("msgpack: unexpected code=7b …" tells a client nothing and names a library). A cursor that
// decodes but does not fit its list is refused where the list is read (graph/pagination.go).

// UnmarshalCursor reads a Cursor.
func UnmarshalCursor(v any) (entgql.Cursor[int], error) {
	var c entgql.Cursor[int]
	if err := c.UnmarshalGQL(v); err != nil {
		return c, apperr.Invalid("cursor", "invalid cursor: pass a cursor this API returned (pageInfo.endCursor, startCursor or an edge's cursor)")
	}
	return c, nil
}

// MarshalCursor writes a Cursor.
func MarshalCursor(c entgql.Cursor[int]) graphql.Marshaler { return c }
