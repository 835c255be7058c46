package seckill_test

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/lua"
	"github.com/surgekit/surge/seckill"
)

// A reply the grab cannot read is a failure, never an answer: with an order id in the buyers
// hash that is no number, the script answers "already a buyer" with that value, and reading it
// unchecked told the user they already held order 0.
func TestGrabMalformedReplyIsAnError(t *testing.T) {
	rdb := testenv.Redis(t)
	e := newEnv(t, rdb)
	ctx := context.Background()
	for _, pipelines := range []int{-1, 2} {
		t.Run("pipelines="+strconv.Itoa(pipelines), func(t *testing.T) {
			s := e.service(seckill.Options{Pipelines: pipelines})
			v := e.onSale(s, 5)
			user := e.users(1)[0]
			k := seckill.KeysOf(e.prefix, v)
			t.Cleanup(func() { rdb.Del(context.Background(), k.Meta, k.Stock, k.Buyers, k.Orders, k.Dead) })
			if err := rdb.HSet(ctx, k.Buyers, strconv.Itoa(user), "not-an-order").Err(); err != nil {
				t.Fatal(err)
			}
			a, err := s.Grab(ctx, user, v)
			if !errors.Is(err, lua.ErrMalformedReply) || errors.Is(err, seckill.ErrAlreadyPurchased) {
				t.Fatalf("grab with an unreadable buyer: %+v %v, want lua.ErrMalformedReply", a, err)
			}
		})
	}
}
