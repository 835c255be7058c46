package graph

import (
	"errors"
	"strconv"
	"strings"

	"github.com/surgekit/surge/ent"
	"github.com/surgekit/surge/internal/apperr"
	"github.com/surgekit/surge/seckill"
)

// refusalAnswers are the API codes and client messages of grab refusals, by reason. A refusal
// not listed (an outcome added to the admission script) answers its reason upper-cased.
var refusalAnswers = map[string]struct {
	code apperr.Code
	msg  string
}{
	"sold_out":          {apperr.SoldOut, "sold out: this voucher has no units left"},
	"already_purchased": {apperr.AlreadyPurchased, "you already have an order for this voucher"},
	"not_started":       {apperr.NotStarted, "the sale of this voucher has not started yet"},
	"ended":             {apperr.Ended, "the sale of this voucher has ended"},
	"not_ready":         {apperr.NotReady, "the sale is being prepared: retry in a moment"},
	"rate_limited":      {apperr.RateLimited, "too many attempts: slow down and retry in a moment"},
	"no_such_voucher":   {apperr.NotFound, "no such seckill voucher"},
	// Replica acknowledgements (SURGE_SECKILL_REPLICA_ACKS): the grab may have gone through;
	// a retry says so (ALREADY_PURCHASED with the order) once it is safe to tell.
	"replication_timeout": {apperr.Unavailable, "your grab could not be confirmed in time: retry in a moment (if it went through, the retry names your order)"},
}

// orderAnswer maps seckill.ErrOrderLost to ORDER_LOST; the rest passes through.
func orderAnswer(o *ent.SeckillOrder, err error) (*ent.SeckillOrder, error) {
	if errors.Is(err, seckill.ErrOrderLost) {
		return nil, apperr.New(apperr.OrderLost, "you have no order with this id; if a grab told you this id, "+
			"that order was lost when the sale's Redis lost its data before writing it: its unit is back on sale, grab again")
	}
	return o, err
}

// grabError maps the refusals of seckill.Grab to client errors; other errors pass through
// (and reach the client as INTERNAL). ALREADY_PURCHASED names the order the user holds.
func grabError(a seckill.Admission, err error) error {
	var r *seckill.Refusal
	if !errors.As(err, &r) {
		return err
	}
	answer, ok := refusalAnswers[r.Reason()]
	if !ok {
		answer.code, answer.msg = apperr.Code(strings.ToUpper(r.Reason())), "refused: "+strings.ReplaceAll(r.Reason(), "_", " ")
	}
	if !errors.Is(err, seckill.ErrAlreadyPurchased) {
		return apperr.New(answer.code, "%s", answer.msg)
	}
	id := strconv.FormatInt(a.OrderID, 10) // most grabs of a sale end here: no fmt
	return &apperr.Error{Code: answer.code, Message: answer.msg + " (order " + id + ")", Extensions: map[string]any{"orderId": id}}
}
