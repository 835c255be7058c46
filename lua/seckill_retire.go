package lua

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// seckillRetire shortens a finished sale's keys' lives (seckill_retire.lua).
var seckillRetire = load("seckill_retire.lua")

// Retirement is what RetireSale found.
type Retirement int

const (
	SaleRetired  Retirement = iota // its keys expire within keep
	SaleNotOver                    // on sale, or orders still in its stream
	SaleNotFound                   // no sale state in Redis
)

// RetireSale makes a sale's keys expire within keep if the sale has ended and its stream
// holds no order (seckill_retire.lua).
func RetireSale(ctx context.Context, rdb redis.Scripter, keys SeckillKeys, keep time.Duration) (Retirement, error) {
	n, err := seckillRetire.Run(ctx, rdb, []string{keys.Meta, keys.Stock, keys.Buyers, keys.Orders}, keep.Milliseconds()).Int64()
	if err != nil {
		return 0, err
	}
	switch n {
	case 1:
		return SaleRetired, nil
	case 0:
		return SaleNotOver, nil
	case -1:
		return SaleNotFound, nil
	}
	return 0, malformed("seckill_retire.lua", n)
}
