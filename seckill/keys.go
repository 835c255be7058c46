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

// keyspace names every Redis key and lock of a Service, under its prefix.
type keyspace struct{ prefix string }

func (ks keyspace) sale(voucherID int) Keys { return KeysOf(ks.prefix, voucherID) }

// script is a voucher's keys as the seckill scripts take them.
func (ks keyspace) script(voucherID int) lua.SeckillKeys { return lua.SeckillKeys(ks.sale(voucherID)) }

// registry is a sorted set of the vouchers warmed into Redis, scored by the end of their sale
// (Unix ms): the consumer's list of streams to read. It is only touched by single-key
// commands, outside scripts.
func (ks keyspace) registry() string { return ks.prefix + ":vouchers" }

// voucherLock is the name of the per-voucher lock (package lock) that serialises rebuilds,
// stock changes and reconcile (and, without row locks, batch commits).
func (ks keyspace) voucherLock(voucherID int) string {
	return ks.prefix + ":" + strconv.Itoa(voucherID)
}

// userLock is the per-user lock of the synchronous strategy.
func (ks keyspace) userLock(userID int) string {
	return ks.prefix + "-user:" + strconv.Itoa(userID)
}
