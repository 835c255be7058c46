// Package idgen hands out globally unique 64-bit ids from Redis, in the well-known layout:
//
//	bit 63      0 (ids are positive int64s)
//	bits 62..32 seconds since the epoch (Epoch, 2022-01-01T00:00:00Z; WithEpoch), 31 bits: until 2090
//	bits 31..0  sequence number: counted on the key id:<prefix>:<yyyymmdd> of the id's UTC day
//
// It runs on a single Redis node or a Redis Cluster (any go-redis UniversalClient; each call
// touches one key) and imports nothing from the rest of surge but its Lua script.
//
//	orders, _ := idgen.New(rdb, "order")            // one round trip per id
//	id, err := orders.Next(ctx)
//	tickets, _ := idgen.NewSegment(rdb, "ticket")   // blocks reserved in Redis, ids handed out locally
//	defer tickets.Close()
//
// Plain mode (New) asks Redis for each id. Segment mode (NewSegment, Meituan Leaf's double
// buffer) reserves blocks of numbers with INCRBY on the same key and hands them out with an
// atomic add, prefetching the next block when a tenth of the current one is used; its block
// size adapts to the rate. Both modes draw from the same counter, so they can share a prefix.
//
// # Which clock
//
// The process's clock (time.Now, or WithClock), for both modes. Segment mode must stamp ids
// without a round trip, so only the local clock can give both modes one meaning; and the local
// clock needs no midnight dance: an id's seconds and its day key are derived from one and the
// same reading, so an id whose sequence came from day D's key always carries a second of day D.
// That is all uniqueness needs: two ids of different seconds differ, two ids of one second come
// from one day's counter and differ in their numbers. Clocks need not agree between processes:
// near midnight a fast process already counts on tomorrow's key while a slow one still counts
// on today's, and their ids still cannot collide.
//
// Redis's clock serves one purpose, as a guard. A day key expires at the end of its UTC day plus
// the retention (DefaultRetention, 24 h: keys live at most 48 h and do not accumulate). Counting
// on a day whose key has expired would start again at 1 and repeat old ids, so the script reads
// TIME (the clock that expires the key, in the same atomic call) and refuses with
// ErrDayExpired once that moment has passed. Only a clock lagging Redis's by more than the
// retention meets it. Tests inject a clock with WithClock: it picks the day key and the seconds
// alike, so crossing midnight is simulated exactly as it happens.
//
// # Order
//
// Per Generator (that is, per process): if one call to Next returns before another starts, the
// second id is larger, whichever goroutines make them; so each goroutine sees strictly
// increasing ids. Concurrent calls are not ordered between them. The guarantee holds through
// midnight and when the clock steps back: a generator never uses a second earlier than one it
// has used, so after a step back its ids keep the latest second (and its day) until the clock
// catches up. The caveat is the clock itself: ids of different processes are ordered only as
// well as their clocks agree, and a clock that leaps ahead stamps ids in the future (and
// holds them there after it is corrected). Within one second, plain mode's numbers follow the
// order of the INCRs across all processes; segment mode's follow the blocks, so a process still
// using an older block hands out lower numbers than one that has just fetched a new block.
//
// # Limits and errors
//
// A prefix has 2^32-1 numbers per UTC day (about 49,700 ids/s averaged over the day, all
// processes together). Past that, Next returns ErrSequenceExhausted until the next day: numbers
// never wrap around. A clock before the epoch gives ErrClockBeforeEpoch, 2^31 s after it
// ErrTimeOverflow. Segment mode abandons the unused rest of its blocks when it closes, restarts
// or crosses midnight; no one else ever gets those numbers, so ids stay unique across
// restarts, only with gaps. Every generator of a prefix must share the epoch and retention.
//
// # When Redis loses the counter
//
// A Redis can lose counts: FLUSHALL or a restart without persistence drop the key, a failover
// to a replica that lagged or an AOF that lost its tail bring back an older counter. Numbers
// are then handed out again. Ids stay unique because they are (second, number) pairs: after a
// possible loss the counter is fenced, and every id made with its numbers from then on carries
// a later second than any id made before. The script (lua/idgen_next.lua) fences when
//
//   - the day key is missing (a new day looks the same: its first ids are fenced too),
//   - the Redis process is not the one that counted last (INFO's run_id: a restart, a
//     failover, a restored snapshot),
//   - the counter is below a number known to be issued: the generator's own highest number
//     of the day, or an id passed to Raise (a database's largest id, say).
//
// Fencing sets the key's `since` to Redis's clock plus the fence: twice the block duration
// (the most a segment block is used after it was reserved) plus the clock skew
// (WithMaxClockSkew, 2 s) plus 1 s, 13 s with the defaults. Every reservation answers `since`,
// and ids made with its numbers are stamped no earlier; a segment block stamps ids only up to
// its reservation's clock reading plus its lifetime (or since + 1 s), so no id of a block
// reserved before the loss reaches the fence. The price: the first ids of each UTC day, of a
// new prefix and after a loss carry a second up to the fence ahead of the clock (their order
// is kept). Tested: 0 duplicates among 2 generators × 4 goroutines drawing ids while a private
// Redis is flushed, restarted empty or restored from an older snapshot 0.3 s into a second,
// in both modes.
//
// # Durable fences (WithEpochStore)
//
// A fence kept only in Redis is lost with the key. Without an epoch store, the guarantee above
// has one hole: a loss in the same second (of Redis's clock) as the key's last fence fences
// again to the same `since`, and the numbers handed out under it are handed out again. The
// first reservation of each UTC day, of a new prefix and of an empty Redis is such a fence, as
// is an earlier loss; measured: 60 of 60 ids repeated after a FLUSHALL 20 ms after the first
// reservation on an empty Redis, and after a second flush within the same second.
//
// WithEpochStore closes it: every fence is recorded in a database (EpochStore; SQLEpochs on
// MySQL/MariaDB or SQLite, one row per prefix and namespace) before any id is stamped with it,
// and each fence applied is strictly above every fence applied before it, whatever Redis lost:
// the script only reports a possible loss (lua.FenceAsk), the generator records a fence of at
// least Redis's clock plus the fence plus one second, and applies it (lua.FenceApply) while the
// store holds it, so that no later fence is recorded meanwhile. An apply that a hung Redis runs
// after its one-second window changes nothing, and the store holds the fence that long. The
// store is touched only at fences (a loss, a new day, a new Redis process, a counter below a
// known number); an ordinary id costs what it did. With a store, a fence needs the database:
// while it is down, reservations that must fence fail (no id is better than a repeated one);
// the others go on. Tested: (second, sequence) pairs never repeat when Redis is flushed once or
// twice within the second of the first fence, on a new day as on an empty Redis, in both modes,
// on MariaDB and SQLite; 0 duplicates with 8 goroutines of 2 processes fencing through the
// store at each loss.
//
// What remains assumed: clocks (the generators' and Redis's) within the skew of one another,
// Redis's clock not stepping back by more than that on a failover, and every generator of a
// prefix using the same block duration, skew and epoch store (or none). Persistence (AOF) is
// still wise: it keeps the fence rare.
//
// Keys: id:<prefix>:<yyyymmdd> (UTC date), or <ns>:id:<prefix>:<yyyymmdd> with WithNamespace(ns)
// (deployments sharing a Redis), a hash {n: the last number reserved, since: the fence (Unix
// seconds), run: the run_id of the Redis that counted last}, expiring 24 h (the retention)
// after its day ends. A counter left as a plain string by an earlier version is
// taken over (its count kept, fenced). Script: lua/idgen_next.lua (lua.ReserveIDs).
package idgen
