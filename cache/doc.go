// Package cache will be the generic Redis cache client: penetration (Bloom filter and cached
// absence), avalanche (jittered TTLs, local L1), breakdown (singleflight plus a cross-process
// mutex, or logical expiry with a bounded rebuild pool) and delete-after-write consistency.
//
// Not implemented yet: it is tracked as issue 3. Nothing imports it.
package cache
