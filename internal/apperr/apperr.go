// Package apperr holds the typed errors the API answers with. Each carries a stable code that
// the GraphQL layer puts in extensions.code; the message is safe to show to a client.
package apperr

import (
	"errors"
	"fmt"
)

// Code is a stable, machine-readable error class.
type Code string

const (
	BadUserInput    Code = "BAD_USER_INPUT"
	Unauthenticated Code = "UNAUTHENTICATED"
	Forbidden       Code = "FORBIDDEN"
	NotFound        Code = "NOT_FOUND"
	RateLimited     Code = "RATE_LIMITED"
	Internal        Code = "INTERNAL"
)

// Error is a client-safe error with a code. Field, when set, names the offending input.
type Error struct {
	Code    Code
	Message string
	Field   string
}

func (e *Error) Error() string { return e.Message }

// Is makes errors.Is(err, apperr.ErrX) match on the code alone.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Message == "" && t.Code == e.Code
}

// Sentinels for errors.Is checks, e.g. errors.Is(err, apperr.ErrForbidden).
var (
	ErrBadUserInput    = &Error{Code: BadUserInput}
	ErrUnauthenticated = &Error{Code: Unauthenticated}
	ErrForbidden       = &Error{Code: Forbidden}
	ErrNotFound        = &Error{Code: NotFound}
	ErrRateLimited     = &Error{Code: RateLimited}
)

// New returns an error with a code and a client-safe message.
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Invalid reports bad input for one named field.
func Invalid(field, format string, args ...any) *Error {
	return &Error{Code: BadUserInput, Field: field, Message: fmt.Sprintf(format, args...)}
}

// CodeOf returns the code of the first *Error in err's chain, or "" if there is none.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}
