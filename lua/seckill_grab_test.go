package lua

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/testenv"
)

// testSaleKeys are a sale's keys under a hash tag of the test's own, deleted at its end.
func testSaleKeys(t *testing.T, rdb redis.UniversalClient) SeckillKeys {
	tag := "lua-test:{" + testenv.Phone() + "}:"
	k := SeckillKeys{Meta: tag + "meta", Stock: tag + "stock", Buyers: tag + "buyers", Orders: tag + "orders"}
	t.Cleanup(func() { rdb.Del(context.Background(), k.Meta, k.Stock, k.Buyers, k.Orders) })
	return k
}

// TestGrabScriptRefusesMalformedArguments: argument lists the wrapper never builds (no pair,
// half a pair) are refused by the script before it writes anything.
func TestGrabScriptRefusesMalformedArguments(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		k := testSaleKeys(t, rdb)
		keys := []string{k.Meta, k.Stock, k.Buyers, k.Orders}
		rdb.HSet(ctx, keys[0], "begin", 0, "end", int64(1)<<50, "on", 1)
		rdb.Set(ctx, keys[1], 5, 0)
		for _, args := range [][]any{{1}, {1, 5}, {1, 5, 105, 6}} {
			if _, err := seckillGrab.Run(ctx, rdb, keys, args...).Slice(); err == nil {
				t.Fatalf("arguments %v accepted", args)
			}
		}
		if n := rdb.Exists(ctx, keys[2], keys[3]).Val(); n != 0 || rdb.Get(ctx, keys[1]).Val() != "5" {
			t.Fatalf("refused calls wrote: %d buyers/orders keys, stock %s", n, rdb.Get(ctx, keys[1]).Val())
		}
	})
}

// TestGrabRepliesAreChecked: a reply the wrapper cannot read is ErrMalformedReply, never an
// outcome (an unchecked read made a string code 0, "admitted").
func TestGrabRepliesAreChecked(t *testing.T) {
	for _, res := range [][]any{
		{"0", int64(3)},            // code of the wrong type
		{int64(9), int64(0)},       // an outcome nobody named
		{int64(0), "3"},            // stock left of the wrong type
		{int64(5), "not-an-order"}, // a holder that is no order id
		{int64(5), int64(0)},
		{int64(0)}, // half a pair
	} {
		if r, err := parseGrab(res, nil, 1); !errors.Is(err, ErrMalformedReply) {
			t.Errorf("reply %v parsed as %+v, %v", res, r, err)
		}
	}
	r, err := parseGrab([]any{int64(5), "777", int64(0), int64(2)}, nil, 2)
	if err != nil || r[0] != (GrabReply{Outcome: GrabAlreadyBuyer, Holder: 777}) || r[1] != (GrabReply{Outcome: GrabAdmitted, StockLeft: 2}) {
		t.Errorf("well-formed reply: %+v %v", r, err)
	}
}
