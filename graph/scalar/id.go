// Package scalar maps GraphQL scalars onto Go types.
package scalar

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/99designs/gqlgen/graphql"

	"github.com/surgekit/surge/internal/apperr"
)

// MarshalID writes an int id as a JSON string: 64-bit ids do not survive JSON numbers in
// JavaScript clients (2^53), so they never travel as numbers.
func MarshalID(id int) graphql.Marshaler {
	return graphql.WriterFunc(func(w io.Writer) {
		_, _ = io.WriteString(w, strconv.Quote(strconv.Itoa(id)))
	})
}

// UnmarshalID accepts a decimal string (or an integral JSON number, for lenient clients)
// and rejects everything else as bad user input.
func UnmarshalID(v any) (int, error) {
	var s string
	switch v := v.(type) {
	case string:
		s = v
	case json.Number:
		s = v.String()
	case int:
		return checkID(int64(v), fmt.Sprint(v))
	case int64:
		return checkID(v, fmt.Sprint(v))
	default:
		return 0, apperr.New(apperr.BadUserInput, "invalid ID: must be a decimal string")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, apperr.New(apperr.BadUserInput, "invalid ID %q: must be a positive decimal integer", truncate(s))
	}
	return checkID(n, s)
}

func checkID(n int64, s string) (int, error) {
	if n <= 0 {
		return 0, apperr.New(apperr.BadUserInput, "invalid ID %q: must be a positive decimal integer", truncate(s))
	}
	return int(n), nil
}

func truncate(s string) string {
	if len(s) > 32 {
		return s[:32] + "…"
	}
	return s
}
