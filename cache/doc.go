// Package cache is a typed Redis cache client for services that sit in front of a database,
// with the defences a flash sale needs built in. It runs on a single Redis node or a Redis
// Cluster (any go-redis UniversalClient) and imports nothing from the rest of surge but its
// Lua scripts.
//
// The common case is one call:
//
//	shops, _ := cache.New[*Shop](ctx, rdb, cache.Options{Name: "shop"})
//	shop, err := shops.GetOrLoad(ctx, "42", loadShopFromDB) // err is cache.ErrNotFound for absent ids
//
// What it defends against:
//
//   - Penetration (ids that do not exist): a loader's ErrNotFound is cached as an absence
//     marker for AbsentTTL. Entries carry a tag byte, so the marker cannot collide with any
//     encoded value (an empty string, JSON null and []byte{0} are all values). An optional
//     Bloom filter (Options.Filter: NewLocalFilter, or NewRedisFilter shared by all processes
//     as a Redis bitmap) answers ids it has never seen without touching Redis keys or the
//     database. With a filter set, absences found by its false positives are not written to
//     Redis (Options.AbsentWithFilter turns that on), so missing ids create no keys.
//   - Avalanche (many keys expiring together, or Redis failing): TTLs are lengthened by a
//     random fraction (Options.Jitter) with millisecond precision, so sub-second TTLs are kept
//     exactly; an optional in-process L1 (Options.Local), invalidated in every process when any
//     process writes, keeps serving during a Redis outage; when Redis fails the loader is
//     called directly but at most Options.OutageLoads at once (ErrOverloaded beyond).
//   - Breakdown (a hot key missing): in ModeMutex one caller per key across all processes
//     loads (x/sync singleflight in-process, a Redis lease — SET NX PX with an owner token —
//     across processes) and the others are woken by a pub/sub event the moment the value
//     lands. The shared load runs under its own deadline, so a caller that gives up does not
//     fail the others. In ModeLogical values never expire in Redis but carry their own
//     expire-at: a stale value is served at once and a bounded pool rebuilds it (a full pool
//     drops the rebuild and counts it; the next stale read retries); a cold miss loads
//     synchronously.
//   - Stale sets (a slow reader writing old data back after a write): a loader writes back
//     only while it still holds the lease it took before reading; Set, Delete and Invalidate
//     revoke leases, so the old value is refused (counted as a rejected stale set).
//   - Lost deletes: Invalidate records an intent in a Redis stream before the database write
//     and removes it after the delete; RunInvalidator deletes the values of intents left by a
//     crash in between.
//
// Keys: values at <Prefix>:<Name>:{<id>}, leases at <…>:lease (same hash tag, so a value and
// its lease share a Cluster slot), events on the channel <Prefix>:<Name>:events, intents in
// the stream <Prefix>:<Name>:intents, Bloom bitmaps at bloom:{<name>}. Every script is in the
// lua package. Metrics (NewMetrics) are Prometheus collectors labelled by cache name.
package cache
