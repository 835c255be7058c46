package lua

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// The scripts that settle an order's stream entry. Each deletes the entry it settles in the
// same script, so that whatever settles an entry (the consumer, a rebuild) compensates once.
var (
	// seckillAck acknowledges persisted orders and removes them from the stream (the settled
	// prefix in one trim, the rest one by one).
	seckillAck = load("seckill_ack.lua")
	// seckillFail moves an order entry to the dead-letter stream and compensates its admission.
	seckillFail = load("seckill_fail.lua")
	// seckillRelink settles an order that stands in the database under another order's id
	// (re-homed, or superseded by the user's existing order): the buyer names that order.
	seckillRelink = load("seckill_relink.lua")
)

// Ack acknowledges persisted entries of a voucher's stream in group and removes them
// (seckill_ack.lua). It returns how many were acknowledged.
func Ack(ctx context.Context, rdb redis.Scripter, keys SeckillKeys, group string, entries []string) (int64, error) {
	if len(entries) == 0 {
		return 0, nil
	}
	args := make([]any, 0, 1+len(entries))
	args = append(args, group)
	for _, e := range entries {
		args = append(args, e)
	}
	return seckillAck.Run(ctx, rdb, []string{keys.Orders}, args...).Int64()
}

// DeadLetter is an order entry given up on.
type DeadLetter struct {
	Entry string // stream entry id
	// User and Order are "" when the entry is unreadable; with Order set, the entry is settled
	// only if it still carries that order (after a flush a new entry can get an old one's id).
	User, Order string
	Restore     bool // put the unit back on sale
	Reason      string
	Deliveries  int64
	MaxLen      int64 // the dead-letter stream's cap (approximate)
}

// FailEntry moves an entry to the voucher's dead-letter stream and compensates its admission
// (seckill_fail.lua). False if the entry was settled already.
func FailEntry(ctx context.Context, rdb redis.Scripter, keys SeckillKeys, group string, d DeadLetter) (bool, error) {
	n, err := seckillFail.Run(ctx, rdb, []string{keys.Orders, keys.Dead, keys.Stock, keys.Buyers, keys.Lent},
		group, d.Entry, d.User, d.Order, flag(d.Restore), d.Reason, d.Deliveries, d.MaxLen).Int64()
	return settledFlag("seckill_fail.lua", n, err)
}

// Relink is an admitted order that stands in the database under another order's id.
type Relink struct {
	Entry, User, Order string // the entry, its user, the order id the user was told
	To                 string // the order standing for it
	Superseded         bool   // the user's other order: the unit goes back on sale
}

// RelinkEntry settles such an order (seckill_relink.lua): the buyer names r.To. False if the
// entry was settled already.
func RelinkEntry(ctx context.Context, rdb redis.Scripter, keys SeckillKeys, group string, r Relink) (bool, error) {
	n, err := seckillRelink.Run(ctx, rdb, []string{keys.Orders, keys.Stock, keys.Buyers},
		group, r.Entry, r.User, r.Order, r.To, flag(r.Superseded)).Int64()
	return settledFlag("seckill_relink.lua", n, err)
}
