package lua

import (
	"errors"
	"fmt"
)

// SeckillKeys are the Redis keys of one voucher's sale (seckill.Keys has the same fields, so
// one converts to the other). They share the hash tag {<voucherId>}: every seckill script
// declares the ones it touches in KEYS and runs on Redis Cluster.
type SeckillKeys struct {
	Meta   string // hash: begin, end (Unix ms), on (1/0), run (the run_id of the last rebuild)
	Stock  string // units left for admission
	Buyers string // hash: user id -> order id
	Orders string // stream of admitted orders not yet in the database
	Dead   string // dead-letter stream of orders given up on
	// Of a voucher split into stock buckets (seckill_borrow_*.lua):
	Borrows string // hash: order -> "user:notAfter", reservations waiting for a donor bucket
	Lent    string // hash: order -> user, the orders this bucket gave a unit to
}

// ErrMalformedReply means a script answered something its wrapper cannot read: a bug or a
// script of another version, never a refusal. Test with errors.Is.
var ErrMalformedReply = errors.New("lua: malformed script reply")

func malformed(script string, reply any) error {
	return fmt.Errorf("%w: %s answered %v", ErrMalformedReply, script, reply)
}

// settledFlag reads the 1/0 reply of the scripts that settle a stream entry.
func settledFlag(script string, n int64, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	if n != 0 && n != 1 {
		return false, malformed(script, n)
	}
	return n == 1, nil
}

// flag is a boolean as the scripts take it.
func flag(b bool) int {
	if b {
		return 1
	}
	return 0
}
