// Package seckill is the flash-sale flow: admission in Redis by a Lua script,
// orders persisted asynchronously from a Redis Stream consumer group into the database, and
// the recovery that keeps Redis and the database in agreement.
//
// # Parts
//
// [Service] is the front of three parts, each with its own options and state, over one
// order store:
//
//   - admission (admission.go; batch.go shares script calls, ratelimit.go, sync.go for
//     [StrategySync]): decides grabs. The script's outcomes are named in lua/seckill_grab.go;
//     every refusal is a [*Refusal] (errors.go).
//   - the order consumer (consumer.go supervises, ready.go queues the vouchers with work,
//     reader.go serves them with a fixed set of readers, announce.go hears of the orders
//     admitted by processes without a consumer, sweep.go finds the work nothing signals,
//     restart.go notices Redis restarts, persist.go writes batches, claim.go takes over and dead-letters, settle.go brings Redis
//     in line with what the database holds).
//   - recovery (recovery.go: warm, rebuild, Guard; reconcile.go with reconcile_db.go and
//     reconcile_redis.go).
//   - the order store (store.go: one small interface per part; store_sql.go, store_read.go,
//     rehome.go): the only code that writes SQL or knows the dialect.
//
// keys.go names every Redis key; the scripts' typed wrappers live beside the scripts in lua/.
//
// # Admission
//
// Each seckill voucher has its own hash tag, so all its keys live in one Cluster slot and
// every script declares them in KEYS (see [Keys]): a meta hash (sale window, on/off), the
// stock, the buyers (user -> order id) and the orders stream. [Service.Grab] draws an order id
// from idgen and runs lua/seckill_grab.lua, together with the grabs of the same voucher that
// are waiting at that moment (one call admits many users; at low load a grab goes alone and
// at once). For each user the script checks window, one order per user and stock, records the
// buyer and appends the order to the stream; the stock is decremented once per call, and
// every check that can fail comes before the call's first write. A missing key is "not
// ready", never "sold out": the grab
// triggers a rebuild from the database ([Service.Warm]) and the client retries.
//
// # Persistence
//
// [Service.RunConsumer] runs one consumer per process in the group "orders" of every live
// voucher stream, with Options.Readers goroutines whatever the number of live vouchers (woken
// by this process's grabs, by the announcements of processes that admit orders without a
// consumer, and by a sweep of the live vouchers at Options.SweepRate commands per second): XREADGROUP in batches, one database transaction per batch (inserts that
// ignore duplicates, the stock decremented by the rows inserted, guarded by stock >= n), then
// XACK and removal from the stream (one XTRIM MINID for the settled prefix, XDEL for the rest),
// so a stream holds exactly the orders not yet in the database. Entries a dead
// consumer left pending are claimed (XAUTOCLAIM) by any live one; an entry delivered more than
// MaxDeliveries times that also failed to persist in the claiming process goes to the
// voucher's dead-letter stream, its order is recorded FAILED
// and its admission compensated (buyer removed, unit back on sale). A batch or a read that
// finds Redis unreachable (down, loading) waits for it and then retries the reader's own
// pending entries, not after ClaimIdle: a read Redis served before a restart may have lost its
// reply, leaving entries pending here unseen.
//
// No entry is acknowledged without its order standing in the database (a row, or an alias to
// one), a dead letter or a FAILED row. After Redis lost state (see rehome.go) an order whose
// id is another order's is re-homed under a fresh id, one of a user who already holds an order
// of the voucher is superseded by it, both with an alias ([Service.Order] follows it from the
// id the user was told), and one whose entry vanished while being written is recorded FAILED.
// A full rebuild raises the order id counter above the largest known id and records Redis's
// run_id; each consumer rebuilds, once, a live voucher whose state predates a restart or
// failover.
//
// Each batch commit and each rebuild serialise on the voucher's row lock in the database (a
// batch's transaction takes it first and, holding it, checks its entries are still pending; a
// rebuild holds SELECT ... FOR UPDATE until Redis is written), so that a rebuild sees every
// order either in the database or in the stream, never in neither — also after a Redis flush.
// An entry can be in both for a moment: batches are acknowledged in the background (and the
// next batch is read while one is written), so a rebuild first settles entries already in the
// database. Rebuilds, stock changes and reconcile also take a per-voucher Redis lock (package
// lock) among themselves; with SQLite, which has no row locks, batch commits take it too
// (sqlDialect.rowLocks, the one place the dialects differ).
//
// # Deadlines
//
// Every entry point returns at its ctx's deadline whatever the Redis client's settings
// (go-redis ignores deadlines unless Options.ContextTimeoutEnabled): the work runs through
// package redisctx, and work given up on stops at its next call. A grab given up on may still
// be admitted once Redis answers; sent again it is answered ErrAlreadyPurchased naming that
// order. Concurrent warms of a voucher share one run on the service's own context (bounded,
// ended by Close), so that one caller giving up fails no other. Each Redis call of the
// consumer is bounded, so that it neither wedges on a hung Redis nor outlives its context.
//
// # Metrics
//
// With Options.Registerer: grabs by outcome (surge_seckill_grabs_total, every outcome present
// from the start), orders persisted, claimed, dead-lettered, re-homed, superseded and lost,
// batch commit time, lost locks (surge_lock_lost_total), and the consumers' lag read from
// Redis at each scrape: the orders waiting in the streams (surge_seckill_stream_backlog) and
// the age of the oldest (surge_seckill_stream_oldest_age_seconds). The lag gauges are the
// same on every server: aggregate them with max, not sum.
//
// # The simple strategy
//
// [StrategySync] does the classic synchronous version instead: a per-user lock, then one
// database transaction that decrements the stock with UPDATE ... WHERE stock > 0 and inserts
// the order, the unique (user, voucher) index as the last line of defence. It needs no warm-up
// and no consumer, and caps out at what the voucher's row lock allows.
package seckill
