package seckill

import (
	"context"
	"errors"
	"hash/fnv"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/redisctx"
)

// Stock buckets. A voucher's sale lives in one hash tag, so in one Cluster slot: one Redis
// master runs every admission of it. A voucher with Buckets = K > 1 splits its stock over K
// buckets, each with its own hash tag ({<voucherId>} for bucket 0, {<voucherId>.<b>} for the
// others) and its own meta, stock, buyers and order stream: every script still runs in one
// slot, and the K slots spread over the masters.
//
// A user's buyer record lives in one bucket, chosen from the user id (homeBucket), so the check
// "one order per user" stays atomic there. A user whose bucket ran dry borrows a unit from
// another bucket (borrow.go). The consumer reads each bucket's stream as it reads a voucher's:
// the registry lists every bucket by its reference (bucketRef), which the keyspace and the
// stores turn back into keys and the voucher id.

// maxBuckets bounds a voucher's buckets (the ent schema's range).
const maxBuckets = 64

// A bucket reference packs the voucher id (low 48 bits), the bucket and the voucher's bucket
// count, negated.
const (
	bucketShift = 48
	countShift  = 55
	refMask     = 1<<7 - 1
)

// bucketRef names bucket b of a voucher with k buckets where the code handles a voucher id:
// bucket 0 is the voucher id itself (a voucher without buckets is unchanged), bucket b > 0 a
// negative number no voucher id can be. The count is in it because a bucket's hash tag
// depends on it (bucketTag).
func bucketRef(voucherID, bucket, k int) int {
	if bucket == 0 {
		return voucherID
	}
	return -(k<<countShift | bucket<<bucketShift | voucherID)
}

// voucherOf is the voucher a bucket reference (or a voucher id) belongs to.
func voucherOf(ref int) int {
	if ref >= 0 {
		return ref
	}
	return (-ref) & (1<<bucketShift - 1)
}

// bucketOf is the bucket a reference names (0 for a voucher id).
func bucketOf(ref int) int {
	if ref >= 0 {
		return 0
	}
	return (-ref) >> bucketShift & refMask
}

// countOf is the bucket count a reference was made with (1 for a voucher id).
func countOf(ref int) int {
	if ref >= 0 {
		return 1
	}
	return (-ref) >> countShift & refMask
}

// bucketTag is the hash tag of bucket b > 0 of k: "<voucherId>.<b>.<n>" with the smallest n
// that puts the tag's slot in the b-th of the k-1 parts of the slot range that bucket 0's slot
// ({<voucherId>}) leaves free. A Cluster whose masters hold equal runs of slots (what
// redis-cli --cluster create makes) so gets the buckets spread over its masters, where plain
// {<voucherId>.<b>} tags would often share one (all three of a K = 3 voucher, one time in
// nine). Computed once per bucket (tags).
func bucketTag(voucherID, b, k int) string {
	v := strconv.Itoa(voucherID)
	part := func(slot int) int { return slot * k / clusterSlots }
	home := part(keySlot(v))
	want := b - 1 // the (b-1)-th part other than home's
	if want >= home {
		want++
	}
	for n := 0; ; n++ {
		tag := v + "." + strconv.Itoa(b) + "." + strconv.Itoa(n)
		if part(keySlot(tag)) == want || n >= 1<<16 {
			return tag
		}
	}
}

// tags caches bucketTag by bucket reference, up to maxTags (then it starts over).
var (
	tags    sync.Map
	tagsLen atomic.Int64
)

const maxTags = 100_000

func cachedTag(ref int) string {
	if t, ok := tags.Load(ref); ok {
		return t.(string)
	}
	t := bucketTag(voucherOf(ref), bucketOf(ref), countOf(ref))
	if tagsLen.Add(1) > maxTags {
		tags.Clear()
		tagsLen.Store(1)
	}
	tags.Store(ref, t)
	return t
}

// clusterSlots is Redis Cluster's number of hash slots.
const clusterSlots = 16384

// keySlot is Redis Cluster's slot of a hash tag's content (CRC16/XMODEM mod 16384).
func keySlot(tag string) int {
	var crc uint16
	for i := 0; i < len(tag); i++ {
		crc ^= uint16(tag[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % clusterSlots
}

// homeBucket is the bucket that holds a user's buyer record among k: a hash of the user id,
// so every process picks the same one and users spread evenly whatever their ids look like.
func homeBucket(userID, k int) int {
	if k <= 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(strconv.Itoa(userID)))
	return int(h.Sum32() % uint32(k))
}

// bucketRefs lists a voucher's k bucket references, bucket 0 first.
func bucketRefs(voucherID, k int) []int {
	out := make([]int, max(k, 1))
	for b := range out {
		out[b] = bucketRef(voucherID, b, k)
	}
	return out
}

// splitStock is bucket b's share of n units over k buckets: equal parts, the first n%k
// buckets one more.
func splitStock(n int64, b, k int) int64 {
	share := n / int64(k)
	if int64(b) < n%int64(k) {
		share++
	}
	return share
}

// bucketsKey holds a voucher's bucket count, in bucket 0's slot beside its meta. A warm writes
// it before any bucket becomes ready and a rebuild never deletes it, so a process never admits
// with a count older than the buckets' state. Missing (never warmed, or lost with its master):
// bucket 0 is not ready either.
func (ks keyspace) bucketsKey(voucherID int) string {
	return ks.keys + ":{" + strconv.Itoa(voucherID) + "}:buckets"
}

// bucketCountTTL is how long a process trusts a voucher's bucket count. The count changes only
// before the sale starts (the catalog refuses later changes), so a grab never meets a stale one.
const bucketCountTTL = time.Second

// bucketCounts caches each voucher's bucket count for bucketCountTTL.
type bucketCounts struct {
	rdb  redis.UniversalClient
	keys keyspace
	mu   sync.Mutex
	m    map[int]bucketCount
	met  map[int]bucketCount // vouchers with buckets, when last asked for (the borrow sweep's)
}

type bucketCount struct {
	k  int
	at time.Time
}

// of is the voucher's bucket count: 1 if Redis holds none (the grab in bucket 0 then finds
// the sale not ready and starts its rebuild).
func (c *bucketCounts) of(ctx context.Context, voucherID int) (int, error) {
	now := time.Now()
	c.mu.Lock()
	got, ok := c.m[voucherID]
	c.mu.Unlock()
	if ok && now.Sub(got.at) < bucketCountTTL {
		if got.k > 1 {
			c.noteMet(voucherID, got.k, now)
		}
		return got.k, nil
	}
	k, err := redisctx.Do(ctx, c.rdb, func(ctx context.Context) (int, error) {
		return c.rdb.Get(ctx, c.keys.bucketsKey(voucherID)).Int()
	})
	switch {
	case errors.Is(err, redis.Nil):
		// Never warmed, warmed before buckets existed (one bucket), or lost with bucket 0's
		// master: cached as 1 too. A full rebuild writes the count first and then waits out
		// borrowTimeout+borrowMargin (3 s) before bucket 0 is ready again, longer than this
		// cache lives, so no process admits with 1 in a voucher of more buckets.
		k = 1
	case err != nil:
		return 0, err
	}
	k = min(max(k, 1), maxBuckets)
	c.mu.Lock()
	if c.m == nil || len(c.m) > maxVoucherInfos {
		c.m = map[int]bucketCount{}
	}
	c.m[voucherID] = bucketCount{k: k, at: now}
	c.mu.Unlock()
	if k > 1 {
		c.noteMet(voucherID, k, now)
	}
	return k, nil
}

func (c *bucketCounts) noteMet(voucherID, k int, at time.Time) {
	c.mu.Lock()
	if c.met == nil || len(c.met) > maxVoucherInfos {
		c.met = map[int]bucketCount{}
	}
	c.met[voucherID] = bucketCount{k: k, at: at}
	c.mu.Unlock()
}

// voucherBuckets is a voucher with buckets, and how many.
type voucherBuckets struct{ voucher, k int }

// bucketedSince lists the vouchers with buckets asked for since t, and forgets older ones.
func (c *bucketCounts) bucketedSince(t time.Time) []voucherBuckets {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []voucherBuckets
	for v, got := range c.met {
		if got.at.Before(t) {
			delete(c.met, v)
			continue
		}
		out = append(out, voucherBuckets{v, got.k})
	}
	return out
}

// forget drops a cached count (a warm changed it in this process).
func (c *bucketCounts) forget(voucherID int) {
	c.mu.Lock()
	delete(c.m, voucherID)
	c.mu.Unlock()
}

// bucketStock sums the stock of a voucher's k buckets (one pipelined round trip);
// ErrNotReady if a bucket has none.
func bucketStock(ctx context.Context, rdb redis.UniversalClient, keys keyspace, voucherID, k int) (int, error) {
	cmds := make([]*redis.StringCmd, k)
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for b := range k {
			cmds[b] = p.Get(ctx, keys.sale(bucketRef(voucherID, b, k)).Stock)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, err
	}
	sum := 0
	for _, c := range cmds {
		n, err := c.Int()
		if errors.Is(err, redis.Nil) {
			return 0, ErrNotReady
		}
		if err != nil {
			return 0, err
		}
		sum += n
	}
	return sum, nil
}

// BucketCountKey is the key holding a voucher's bucket count under a key prefix (KeyPrefix's
// result), for tools that clean up after a sale.
func BucketCountKey(keyPrefix string, voucherID int) string {
	return keyspace{keys: keyPrefix}.bucketsKey(voucherID)
}

// RegistryMembers are the registry entries (RegistryKey) of a voucher with k buckets: its id,
// and a reference per further bucket.
func RegistryMembers(voucherID, k int) []string {
	refs := bucketRefs(voucherID, k)
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = strconv.Itoa(r)
	}
	return out
}
