// Package cache is a typed Redis cache client for services that sit in front of a database,
// with the defences a flash sale needs built in. It runs on a single Redis node or a Redis
// Cluster (any go-redis UniversalClient) and imports nothing from the rest of surge but its
// Lua scripts and redisctx.
//
// The common case is one call:
//
//	shops, _ := cache.New[*Shop](ctx, rdb, cache.Options{Name: "shop"})
//	shop, err := shops.GetOrLoad(ctx, "42", loadShopFromDB) // err is cache.ErrNotFound for absent ids
//
// A read goes L1 (if any) → Redis → on a miss, the Bloom filter (if any) → the loader, so a
// hit costs what it costs without a filter. Writes go through Invalidate (delete-after-write;
// pass Created for an insert), or Set and Delete.
//
// What it defends against:
//
//   - Penetration (ids that do not exist): a loader's ErrNotFound is cached as an absence
//     marker for AbsentTTL (in both modes). Entries carry a tag byte, so the marker cannot
//     collide with any encoded value (an empty string, JSON null and []byte{0} are all
//     values). An optional Bloom filter (Options.Filter: NewLocalFilter, or NewRedisFilter
//     shared by all processes as a Redis bitmap) answers misses of ids it has never seen
//     without the database. With a filter set, absences found by its false positives are not
//     written to Redis (Options.AbsentWithFilter turns that on), so missing ids create no keys;
//     while the filter cannot answer (not built, deleted) absences are cached and the failures
//     counted. False positives are counted too, so an over-filled filter shows (and
//     Estimate reports the fill from its bits). Invalidate(…, Created) puts a new id into the
//     filter before the insert and clears its absence everywhere after it.
//   - Avalanche (many keys expiring together, or Redis failing): TTLs are lengthened by a
//     random fraction (Options.Jitter) with millisecond precision, so sub-second TTLs are kept
//     exactly; an optional in-process L1 (Options.Local), invalidated in every process when any
//     process writes. Every Redis call is bounded by RedisTimeout and the caller's context
//     whatever the client's settings (go-redis ignores context deadlines unless
//     ContextTimeoutEnabled; with such a client the calls are plain calls, otherwise each runs
//     in a goroutine of its own, see package redisctx). After BreakerFailures failed calls in
//     a row a breaker skips Redis for BreakerCooldown. While Redis fails, L1 copies are served
//     up to MaxStale past their TTL, and the loader is called directly, once per id and at
//     most Options.OutageLoads at once (ErrOverloaded beyond). New succeeds with Redis down.
//   - Breakdown (a hot key missing): in ModeMutex one caller per key across all processes
//     loads (x/sync singleflight in-process, a Redis lease — SET NX PX with an owner token —
//     across processes) and the others are woken by a pub/sub event the moment the value
//     lands; a failed load fails them too (ErrPeerLoadFailed) rather than each retrying. The
//     shared load runs under its own deadline, so a caller that gives up does not fail the
//     others; a loader that panics fails them with a *PanicError and releases the lease. In
//     ModeLogical values never expire in Redis but carry their own expire-at: a stale value is
//     served at once and a bounded pool rebuilds it, once per expiry window across processes
//     (a rebuild leases only a value still carrying the expire-at its reader saw); a full pool
//     drops the rebuild and counts it; a cold miss loads synchronously.
//   - Stale sets (a slow reader writing old data back after a write): a loader writes back
//     only while it still holds the lease it took before reading; Set, Delete and Invalidate
//     revoke leases, so the old value is refused (counted as a rejected stale set).
//   - Lost deletes: Invalidate records an intent in a Redis stream before the database write
//     and removes it after the delete; RunInvalidator deletes the values of intents left by a
//     crash in between. A delete that fails after the write (Redis down) is retried in-process
//     with backoff and reported as ErrInvalidationPending (the write committed); if the
//     intent cannot be recorded the write does not run (ErrIntentNotRecorded) unless
//     WriteUnrecorded says it must.
//   - Schema changes: an entry that no longer decodes into V, or was written with another
//     Options.Version, is a miss: dropped, reloaded and counted, not an error until its TTL.
//
// Keys: values at <Prefix>:<Name>:{<id>}, leases at <…>:lease (same hash tag, so a value and
// its lease share a Cluster slot), events on the channel <Prefix>:<Name>:events (one pub/sub
// connection per client, shared by its caches), intents in the stream <Prefix>:<Name>:intents,
// Bloom bitmaps at bloom:{<name>}. To share one Redis between deployments, give each its own
// Options.Prefix (e.g. <ns>:cache) and FilterPrefix (<ns>:bloom). Every script is in the lua
// package. Metrics (NewMetrics) are Prometheus collectors labelled by cache name.
package cache
