package scalar

import (
	"github.com/99designs/gqlgen/graphql"

	"github.com/surgekit/surge/internal/apperr"
)

// GraphQL's Int is a signed 32-bit integer. gqlgen maps it onto Go's int and int64 and takes
// any 64-bit value; these marshalers hold inputs to the spec's range, whatever the Go type
// behind them (literals out of range are already refused by validation; these catch
// variables). Outputs are written as they are.

// UnmarshalInt reads an Int into an int.
func UnmarshalInt(v any) (int, error) {
	n, err := UnmarshalInt32(v)
	return int(n), err
}

// MarshalInt writes an int.
func MarshalInt(i int) graphql.Marshaler { return graphql.MarshalInt(i) }

// UnmarshalInt64 reads an Int into an int64 (money in cents, counters).
func UnmarshalInt64(v any) (int64, error) {
	n, err := UnmarshalInt32(v)
	return int64(n), err
}

// MarshalInt64 writes an int64.
func MarshalInt64(i int64) graphql.Marshaler { return graphql.MarshalInt64(i) }

// UnmarshalInt32 reads an Int, refusing values outside 32 bits as bad user input. A string
// is refused too, digits or not: gqlgen would parse "5", but GraphQL's Int input is a number
// (a literal, or a JSON number in variables), and a client sending strings has a bug to see.
func UnmarshalInt32(v any) (int32, error) {
	if _, ok := v.(string); ok {
		return 0, apperr.New(apperr.BadUserInput, "Int must be a number, not a string")
	}
	n, err := graphql.UnmarshalInt32(v)
	if err != nil {
		return 0, apperr.New(apperr.BadUserInput, "Int must be a whole number between -2147483648 and 2147483647")
	}
	return n, nil
}

// MarshalInt32 writes an int32.
func MarshalInt32(i int32) graphql.Marshaler { return graphql.MarshalInt32(i) }
