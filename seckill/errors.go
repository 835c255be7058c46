package seckill

import (
	"errors"

	"github.com/surgekit/surge/lua"
)

// Refusal is a grab refused for a reason the buyer can act on (sold out, not started, ...), as
// opposed to a failure. Its reason is stable: it labels the surge_seckill_grabs_total metric
// and the API answers it with a code of its own (graph). Test with errors.Is against the
// sentinels below.
type Refusal struct {
	reason string
	msg    string
}

func (r *Refusal) Error() string { return r.msg }

// Reason is the refusal's stable name: "sold_out", or the name lua gives a script outcome.
func (r *Refusal) Reason() string { return r.reason }

// Is matches a refusal of the same reason, so that a refusal built from a script outcome
// without a sentinel of its own still matches errors.Is(err, &Refusal{...}) by reason.
func (r *Refusal) Is(target error) bool {
	t, ok := target.(*Refusal)
	return ok && t.reason == r.reason
}

// Reasons a grab is refused. Test with errors.Is.
var (
	ErrSoldOut          = outcomeRefusal(lua.GrabSoldOut, "seckill: sold out")
	ErrAlreadyPurchased = outcomeRefusal(lua.GrabAlreadyBuyer, "seckill: already purchased")
	ErrNotStarted       = outcomeRefusal(lua.GrabNotStarted, "seckill: the sale has not started")
	ErrEnded            = outcomeRefusal(lua.GrabEnded, "seckill: the sale has ended")
	// ErrNotReady means Redis does not hold the voucher's sale state (never warmed, or lost);
	// a rebuild has been started and the client should retry shortly.
	ErrNotReady    = outcomeRefusal(lua.GrabNotReady, "seckill: not ready, retry shortly")
	ErrRateLimited = &Refusal{reason: "rate_limited", msg: "seckill: too many attempts, slow down"}
	// ErrNoSuchVoucher means the voucher does not exist or is not a seckill voucher.
	ErrNoSuchVoucher = &Refusal{reason: "no_such_voucher", msg: "seckill: no such seckill voucher"}
)

// ErrClosed is returned after Close.
var ErrClosed = errors.New("seckill: service closed")

// ErrOrderLost is Service.Order's answer for an id no order has that was issued before a
// Redis loss (its second is before the order id counter's latest durable fence; needs
// Options.EpochStore): if a grab told it, Redis lost the order before it was written, and a
// process that could have recorded it LOST was gone too. Its unit is back on sale.
var ErrOrderLost = errors.New("seckill: no order has this id; an order told under it was lost with Redis's data before it was written")

// outcomeRefusal is the sentinel of a refusal the admission script answers.
func outcomeRefusal(o lua.GrabOutcome, msg string) *Refusal {
	return &Refusal{reason: o.String(), msg: msg}
}

// refusalOf is the error of a script outcome other than admitted: a new outcome needs no
// sentinel here to be counted, logged and answered by its name.
func refusalOf(o lua.GrabOutcome) error {
	r := &Refusal{reason: o.String(), msg: "seckill: refused: " + o.String()}
	for _, known := range []*Refusal{ErrSoldOut, ErrAlreadyPurchased, ErrNotStarted, ErrEnded, ErrNotReady} {
		if known.Is(r) {
			return known
		}
	}
	return r
}

// outcome names a grab's result in the surge_seckill_grabs_total metric.
func outcome(err error) string {
	if err == nil {
		return lua.GrabAdmitted.String()
	}
	if r, ok := err.(*Refusal); ok { // the usual case, without errors.As's allocation
		return r.reason
	}
	if r := (*Refusal)(nil); errors.As(err, &r) {
		return r.reason
	}
	return "error"
}
