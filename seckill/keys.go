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
	// Of a voucher split into stock buckets (buckets.go):
	Borrows string // hash: order -> "user:notAfter", reservations waiting for a donor bucket
	Lent    string // hash: order -> user, the orders this bucket gave a unit to
}

// KeysOf returns the keys of a voucher's sale under a prefix (Options.Prefix, "seckill").
func KeysOf(prefix string, voucherID int) Keys { return keysOfTag(prefix, strconv.Itoa(voucherID)) }

// BucketKeysOf returns the keys of bucket b of a voucher split into k stock buckets: bucket 0
// has the voucher's own keys (KeysOf), bucket b > 0 a hash tag of its own, {<voucherId>.<b>.<n>},
// chosen so that the buckets spread over the slot range (see bucketTag in buckets.go).
func BucketKeysOf(prefix string, voucherID, b, k int) Keys {
	if b == 0 {
		return KeysOf(prefix, voucherID)
	}
	return keysOfTag(prefix, cachedTag(bucketRef(voucherID, b, k)))
}

func keysOfTag(prefix, tag string) Keys {
	p := prefix + ":{" + tag + "}:"
	return Keys{Meta: p + "meta", Stock: p + "stock", Buyers: p + "buyers", Orders: p + "orders", Dead: p + "dead",
		Borrows: p + "borrows", Lent: p + "lent"}
}

// KeyPrefix is the start of a voucher's sale keys (KeysOf's prefix) for Options.Namespace and
// Options.Prefix: <namespace>:<prefix>, or prefix alone without a namespace.
func KeyPrefix(namespace, prefix string) string { return inNamespace(namespace, prefix) }

// inNamespace puts key under namespace ("" leaves it as is).
func inNamespace(namespace, key string) string {
	if namespace == "" {
		return key
	}
	return namespace + ":" + key
}

// RegistryKey is the sorted set of warmed vouchers for a key prefix (KeyPrefix's result).
func RegistryKey(keyPrefix string) string { return keyPrefix + ":vouchers" }

// VoucherLockKeys are a voucher's lock (package lock) and its fencing counter, for tools that
// clean up after a sale: <namespace>:lock:{<prefix>:<voucherId>} and …:fence.
func VoucherLockKeys(namespace, prefix string, voucherID int) []string {
	key := inNamespace(namespace, "lock") + ":{" + prefix + ":" + strconv.Itoa(voucherID) + "}"
	return []string{key, key + ":fence"}
}

// keyspace names every Redis key and lock of a Service: sale keys and the registry under
// keys (<namespace>:<prefix>), lock names under locks (<prefix>; the lock client adds the
// namespace).
type keyspace struct{ keys, locks string }

func newKeyspace(o *Options) keyspace {
	return keyspace{keys: KeyPrefix(o.Namespace, o.Prefix), locks: o.Prefix}
}

// sale is the keys of a voucher's sale, or of one of its stock buckets when voucherID is a
// bucket reference (bucketRef in buckets.go).
func (ks keyspace) sale(voucherID int) Keys {
	if voucherID >= 0 {
		return KeysOf(ks.keys, voucherID)
	}
	return keysOfTag(ks.keys, cachedTag(voucherID))
}

// script is a voucher's keys as the seckill scripts take them.
func (ks keyspace) script(voucherID int) lua.SeckillKeys { return lua.SeckillKeys(ks.sale(voucherID)) }

// registry is a sorted set of the vouchers warmed into Redis, scored by the end of their sale
// (Unix ms): the consumer's list of streams to read. It is only touched by single-key
// commands, outside scripts.
func (ks keyspace) registry() string { return RegistryKey(ks.keys) }

// voucherLock is the name of the per-voucher lock (package lock) that serialises rebuilds,
// stock changes and reconcile (and, without row locks, batch commits).
func (ks keyspace) voucherLock(voucherID int) string {
	return ks.locks + ":" + strconv.Itoa(voucherID)
}

// userLock is the per-user lock of the synchronous strategy.
func (ks keyspace) userLock(userID int) string {
	return ks.locks + "-user:" + strconv.Itoa(userID)
}
