// Package apperr holds the typed errors the API answers with. Each carries a stable code that
// the GraphQL layer puts in extensions.code; the message is safe to show to a client.
//
// Codes:
//
//   - BAD_USER_INPUT: an invalid argument; Field names it when known. Nothing was written.
//   - UNAUTHENTICATED: the operation needs a login.
//   - FORBIDDEN: the operation needs the ADMIN role.
//   - NOT_FOUND: the object the operation targets does not exist.
//   - RATE_LIMITED: too many attempts (login codes, seckill grabs); retry later.
//   - SOLD_OUT: a seckill voucher has no units left.
//   - ALREADY_PURCHASED: the user already holds an order of this seckill voucher; the
//     extension orderId carries that order's id.
//   - NOT_STARTED, ENDED: the voucher's sale window has not opened yet, or is over (or the
//     voucher is no longer ACTIVE).
//   - NOT_READY: the sale's state is being (re)built in Redis; retry in a moment.
//   - ORDER_LOST: the caller has no order with this id, and one told under it was lost with
//     Redis's data before it was written; its unit is back on sale: grab again.
//   - UNAVAILABLE: a data store (Redis or the database) cannot serve the request right now:
//     down, restarting, too slow or out of connections; retry in a moment.
//   - INTERNAL: anything else; the detail is logged server-side, never sent.
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
	Unavailable     Code = "UNAVAILABLE"
	Internal        Code = "INTERNAL"

	// Refusals of a seckill grab.
	SoldOut          Code = "SOLD_OUT"
	AlreadyPurchased Code = "ALREADY_PURCHASED"
	NotStarted       Code = "NOT_STARTED"
	Ended            Code = "ENDED"
	NotReady         Code = "NOT_READY"
	OrderLost        Code = "ORDER_LOST"
)

// Error is a client-safe error with a code. Field, when set, names the offending input.
// Extensions, when set, are further client-safe facts the GraphQL layer adds to the error's
// extensions (e.g. orderId of ALREADY_PURCHASED); they never replace code or field.
type Error struct {
	Code       Code
	Message    string
	Field      string
	Extensions map[string]any
}

func (e *Error) Error() string { return e.Message }

// Is makes errors.Is(err, apperr.ErrX) match on the code alone.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Message == "" && t.Code == e.Code
}

// Sentinels for errors.Is checks, e.g. errors.Is(err, apperr.ErrForbidden).
var (
	ErrBadUserInput     = &Error{Code: BadUserInput}
	ErrUnauthenticated  = &Error{Code: Unauthenticated}
	ErrForbidden        = &Error{Code: Forbidden}
	ErrNotFound         = &Error{Code: NotFound}
	ErrRateLimited      = &Error{Code: RateLimited}
	ErrUnavailable      = &Error{Code: Unavailable}
	ErrSoldOut          = &Error{Code: SoldOut}
	ErrAlreadyPurchased = &Error{Code: AlreadyPurchased}
	ErrNotStarted       = &Error{Code: NotStarted}
	ErrEnded            = &Error{Code: Ended}
	ErrNotReady         = &Error{Code: NotReady}
)

// New returns an error with a code and a client-safe message.
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Invalid reports bad input for one named field.
func Invalid(field, format string, args ...any) *Error {
	return &Error{Code: BadUserInput, Field: field, Message: fmt.Sprintf(format, args...)}
}

// With returns e with one more extension, for chaining after New.
func (e *Error) With(key string, value any) *Error {
	if e.Extensions == nil {
		e.Extensions = map[string]any{}
	}
	e.Extensions[key] = value
	return e
}

// CodeOf returns the code of the first *Error in err's chain, or "" if there is none.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}
