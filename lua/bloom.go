package lua

import "time"

// The Bloom filter's scripts (cache.RedisFilter). A filter's keys share the hash tag {<name>}:
// the live bitmap, its meta hash {m, k}, the bitmap a rebuild builds and the rebuild's meta
// {token, m, k} (its lease).

// BloomKeys are one filter's keys.
type BloomKeys struct {
	Live, Meta, Rebuild, RebuildMeta string
}

// BloomStatus is what bloom_test.lua or bloom_add.lua found.
type BloomStatus int

const (
	BloomDone            BloomStatus = 1  // tested (Present holds the answers) or added
	BloomNotBuilt        BloomStatus = 0  // no live filter (and, adding, no rebuild running)
	BloomLiveMismatch    BloomStatus = -1 // the live filter has other m, k (M, K): nothing done
	BloomRebuildMismatch BloomStatus = -2 // the filter being rebuilt has other m, k (adding)
)

// BloomReply is bloom_test.lua's or bloom_add.lua's parsed reply.
type BloomReply struct {
	Status  BloomStatus
	Present []bool // test, BloomDone: one per id, false meaning certainly absent
	M, K    string // a mismatch: the stored filter's parameters
}

func parseBloom(reply any) (BloomReply, bool) {
	r, ok := reply.([]any)
	if !ok || len(r) == 0 {
		return BloomReply{}, false
	}
	code, ok := r[0].(int64)
	switch s := BloomStatus(code); {
	case !ok:
	case s == BloomDone:
		out := BloomReply{Status: s, Present: make([]bool, len(r)-1)}
		for i, v := range r[1:] {
			bit, ok := v.(int64)
			if !ok || (bit != 0 && bit != 1) {
				return BloomReply{}, false
			}
			out.Present[i] = bit == 1
		}
		return out, true
	case s == BloomNotBuilt:
		return BloomReply{Status: s}, len(r) == 1
	case s == BloomLiveMismatch || s == BloomRebuildMismatch:
		if len(r) != 3 {
			return BloomReply{}, false
		}
		m, ok1 := r[1].(string)
		k, ok2 := r[2].(string)
		return BloomReply{Status: s, M: m, K: k}, ok1 && ok2
	}
	return BloomReply{}, false
}

var (
	bloomTest = newScript(parseBloom, "bloom_test.lua")
	bloomAdd  = newScript(func(reply any) (BloomReply, bool) {
		r, ok := parseBloom(reply)
		return r, ok && len(r.Present) == 0 // adding answers no bits
	}, "bloom_add.lua")
)

// positionArgs is head followed by positions.
func positionArgs(positions []uint64, head ...any) []any {
	args := make([]any, 0, len(head)+len(positions))
	args = append(args, head...)
	for _, p := range positions {
		args = append(args, p)
	}
	return args
}

// BloomTest tests ids against the live filter of m bits and k hashes, given their bit
// positions (k per id, grouped by id): one answer per id. It is read-only (EVAL_RO).
func BloomTest(keys BloomKeys, m, k string, positions []uint64) Call[BloomReply] {
	c := bloomTest.call([]string{keys.Live, keys.Meta}, positionArgs(positions, m, k)...)
	c.ro = true
	return c
}

// BloomAdd sets ids' bit positions in the live filter, and in the one being rebuilt if a
// rebuild runs; it never creates a filter.
func BloomAdd(keys BloomKeys, m, k string, positions []uint64) Call[BloomReply] {
	return bloomAdd.call([]string{keys.Live, keys.Meta, keys.Rebuild, keys.RebuildMeta}, positionArgs(positions, m, k)...)
}

var (
	bloomRebuildBegin  = newScript(parseFlag, "bloom_rebuild_begin.lua")
	bloomRebuildAdd    = newScript(parseFlag, "bloom_rebuild_add.lua")
	bloomRebuildCommit = newScript(parseFlag, "bloom_rebuild_commit.lua")
	bloomRebuildAbort  = newScript(parseFlag, "bloom_rebuild_abort.lua")
)

// BloomRebuildBegin takes the rebuild lease for token and allocates the m-bit bitmap to
// build: false when another rebuild holds the lease.
func BloomRebuildBegin(keys BloomKeys, token, m, k string, lease time.Duration) Call[bool] {
	return bloomRebuildBegin.call([]string{keys.Rebuild, keys.RebuildMeta}, token, m, k, ms(lease))
}

// BloomRebuildAdd writes one batch of bit positions into the bitmap being built and renews
// the lease: false when the lease is lost.
func BloomRebuildAdd(keys BloomKeys, token string, lease time.Duration, positions []uint64) Call[bool] {
	return bloomRebuildAdd.call([]string{keys.Rebuild, keys.RebuildMeta}, positionArgs(positions, token, ms(lease))...)
}

// BloomRebuildCommit swaps the built filter in: false when the lease is lost (nothing changed).
func BloomRebuildCommit(keys BloomKeys, token string) Call[bool] {
	return bloomRebuildCommit.call([]string{keys.Live, keys.Meta, keys.Rebuild, keys.RebuildMeta}, token)
}

// BloomRebuildAbort drops a half-built filter and its lease: false when the lease was lost.
func BloomRebuildAbort(keys BloomKeys, token string) Call[bool] {
	return bloomRebuildAbort.call([]string{keys.Rebuild, keys.RebuildMeta}, token)
}
