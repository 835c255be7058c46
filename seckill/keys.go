package seckill

import (
	"strconv"

	"github.com/surgekit/surge/lua"
)

// Keys are the Redis keys of one voucher's sale. They share the hash tag {<voucherId>}, so a
// script can touch all of them on Redis Cluster.
type Keys struct {
	Meta   string // hash: begin, end (Unix ms), on (1/0); its presence means "ready"
	Stock  string // units left for admission
	Buyers string // hash: user id -> order id
	Orders string // stream of admitted orders not yet in the database
	Dead   string // dead-letter stream of orders given up on
}

// KeysOf returns the keys of a voucher's sale under a prefix (Options.Prefix, "seckill").
func KeysOf(prefix string, voucherID int) Keys {
	p := prefix + ":{" + strconv.Itoa(voucherID) + "}:"
	return Keys{Meta: p + "meta", Stock: p + "stock", Buyers: p + "buyers", Orders: p + "orders", Dead: p + "dead"}
}

func (s *Service) keys(voucherID int) Keys { return KeysOf(s.opts.Prefix, voucherID) }

// scriptKeys are a voucher's keys as the seckill scripts take them.
func (s *Service) scriptKeys(voucherID int) lua.SeckillKeys {
	return lua.SeckillKeys(s.keys(voucherID))
}

// registryKey is a sorted set of the vouchers warmed into Redis, scored by the end of their
// sale (Unix ms): the consumer's list of streams to read. It is only touched by single-key
// commands, outside scripts.
func (s *Service) registryKey() string { return s.opts.Prefix + ":vouchers" }

// lockName is the name of the per-voucher lock (package lock) that serialises batch commits
// with rebuilds.
func (s *Service) lockName(voucherID int) string {
	return s.opts.Prefix + ":" + strconv.Itoa(voucherID)
}

// userLockName is the per-user lock of the synchronous strategy.
func (s *Service) userLockName(userID int) string {
	return s.opts.Prefix + "-user:" + strconv.Itoa(userID)
}
