package graph

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"testing"

	"github.com/surgekit/surge/internal/apperr"
	"github.com/surgekit/surge/seckill"
)

func TestGrabErrors(t *testing.T) {
	cases := []struct {
		err  error
		code apperr.Code
	}{
		{seckill.ErrSoldOut, apperr.SoldOut},
		{seckill.ErrAlreadyPurchased, apperr.AlreadyPurchased},
		{seckill.ErrNotStarted, apperr.NotStarted},
		{seckill.ErrEnded, apperr.Ended},
		{seckill.ErrNotReady, apperr.NotReady},
		{seckill.ErrRateLimited, apperr.RateLimited},
		{seckill.ErrNoSuchVoucher, apperr.NotFound},
		{fmt.Errorf("%w: invalid ids", seckill.ErrNoSuchVoucher), apperr.NotFound},
		{fmt.Errorf("%w: 0 of 1 replicas acknowledged", seckill.ErrReplicationTimeout), apperr.Unavailable},
	}
	for _, c := range cases {
		err := grabError(seckill.Admission{OrderID: 1 << 50}, c.err)
		var ae *apperr.Error
		if !errors.As(err, &ae) || ae.Code != c.code {
			t.Errorf("%v → %v, want %s", c.err, err, c.code)
			continue
		}
		if ae.Message == "" || bytes.Contains([]byte(ae.Message), []byte("seckill:")) {
			t.Errorf("%v: message %q is not a client message", c.err, ae.Message)
		}
		if c.code == apperr.AlreadyPurchased && ae.Extensions["orderId"] != strconv.Itoa(1<<50) {
			t.Errorf("orderId extension = %#v", ae.Extensions["orderId"])
		}
		if c.code != apperr.AlreadyPurchased && ae.Extensions["orderId"] != nil {
			t.Errorf("%v tells an order: %#v", c.err, ae.Extensions)
		}
	}
	boom := errors.New("redis: connection refused")
	if err := grabError(seckill.Admission{}, boom); err != boom {
		t.Errorf("a failure became %v", err)
	}
}
