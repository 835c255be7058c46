package scalar

import (
	"time"

	"github.com/99designs/gqlgen/graphql"

	"github.com/surgekit/surge/internal/apperr"
)

// The range of times every store of this server keeps exactly: MySQL's TIMESTAMP columns hold
// 1970-01-01T00:00:01Z to 2038-01-19T03:14:07Z; outside it MySQL fails the write (after 2038)
// or stores 0000-00-00 (before 1970). Times outside it are refused as bad user input.
var (
	MinTime = time.Date(1970, 1, 1, 0, 0, 1, 0, time.UTC)
	MaxTime = time.Date(2038, 1, 19, 3, 14, 7, 0, time.UTC)
)

// UnmarshalTime reads an RFC 3339 time within [MinTime, MaxTime].
func UnmarshalTime(v any) (time.Time, error) {
	t, err := graphql.UnmarshalTime(v)
	if err != nil {
		return time.Time{}, apperr.New(apperr.BadUserInput, "Time must be an RFC 3339 string, e.g. 2030-01-02T15:04:05Z")
	}
	if t.Before(MinTime) || t.After(MaxTime) {
		return time.Time{}, apperr.New(apperr.BadUserInput, "Time must lie between %s and %s",
			MinTime.Format(time.RFC3339), MaxTime.Format(time.RFC3339))
	}
	return t, nil
}

// MarshalTime writes a time in RFC 3339 (gqlgen's format).
func MarshalTime(t time.Time) graphql.Marshaler { return graphql.MarshalTime(t) }
