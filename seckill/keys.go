package seckill

import "strconv"

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

func (s *Service) keys(voucherID int) Keys { return KeysOf(s.keyPrefix(), voucherID) }

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

func (s *Service) keyPrefix() string { return KeyPrefix(s.opts.Namespace, s.opts.Prefix) }

// registryKey is a sorted set of the vouchers warmed into Redis, scored by the end of their
// sale (Unix ms): the consumer's list of streams to read. It is only touched by single-key
// commands, outside scripts.
func (s *Service) registryKey() string { return RegistryKey(s.keyPrefix()) }

// RegistryKey is the sorted set of warmed vouchers for a key prefix (KeyPrefix's result).
func RegistryKey(keyPrefix string) string { return keyPrefix + ":vouchers" }

// VoucherLockKeys are a voucher's lock (package lock) and its fencing counter, for tools that
// clean up after a sale: <namespace>:lock:{<prefix>:<voucherId>} and …:fence.
func VoucherLockKeys(namespace, prefix string, voucherID int) []string {
	key := inNamespace(namespace, "lock") + ":{" + prefix + ":" + strconv.Itoa(voucherID) + "}"
	return []string{key, key + ":fence"}
}

// lockName is the name of the per-voucher lock (package lock) that serialises batch commits
// with rebuilds. The lock client puts it under the namespace.
func (s *Service) lockName(voucherID int) string {
	return s.opts.Prefix + ":" + strconv.Itoa(voucherID)
}

// userLockName is the per-user lock of the synchronous strategy.
func (s *Service) userLockName(userID int) string {
	return s.opts.Prefix + "-user:" + strconv.Itoa(userID)
}
