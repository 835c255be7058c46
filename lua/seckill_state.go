package lua

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// seckillState tells whether a voucher's sale state is ready and was rebuilt under the
// running Redis process (not before a restart or failover).
var seckillState = load("seckill_state.lua")

// SaleState is how far a voucher's sale state in Redis can be trusted.
type SaleState struct {
	Ready bool // meta and stock exist: admission runs
	// Current: the last full rebuild ran under the running Redis process. False after a
	// restart or failover, which may have brought back an older state.
	Current bool
}

// ReadSaleState runs seckill_state.lua.
func ReadSaleState(ctx context.Context, rdb redis.Scripter, keys SeckillKeys) (SaleState, error) {
	v, err := seckillState.Run(ctx, rdb, []string{keys.Meta, keys.Stock}).Int64Slice()
	if err != nil {
		return SaleState{}, err
	}
	if len(v) != 2 || !isFlag(v[0]) || !isFlag(v[1]) {
		return SaleState{}, malformed("seckill_state.lua", v)
	}
	return SaleState{Ready: v[0] == 1, Current: v[1] == 1}, nil
}

func isFlag(n int64) bool { return n == 0 || n == 1 }
