package lua

import (
	"context"
	"time"

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
	// Rebuilt is when the last full rebuild ran (Redis's clock; zero if none was recorded):
	// orders told before it may have been lost with the state it replaced.
	Rebuilt time.Time
	// Oldest is when the oldest order still in the stream was added (Redis's clock; zero if the
	// stream is empty): the orders added before it are written.
	Oldest time.Time
}

// ReadSaleState runs seckill_state.lua.
func ReadSaleState(ctx context.Context, rdb redis.Scripter, keys SeckillKeys) (SaleState, error) {
	v, err := seckillState.Run(ctx, rdb, []string{keys.Meta, keys.Stock, keys.Orders}).Int64Slice()
	if err != nil {
		return SaleState{}, err
	}
	if len(v) != 4 || !isFlag(v[0]) || !isFlag(v[1]) || v[2] < 0 || v[3] < 0 {
		return SaleState{}, malformed("seckill_state.lua", v)
	}
	return SaleState{Ready: v[0] == 1, Current: v[1] == 1, Rebuilt: unixMilli(v[2]), Oldest: unixMilli(v[3])}, nil
}

// unixMilli is a Unix ms time, or the zero time for 0.
func unixMilli(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

func isFlag(n int64) bool { return n == 0 || n == 1 }
