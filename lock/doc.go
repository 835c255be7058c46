// Package lock holds Redis distributed locks in the Redisson tradition on
// redis.UniversalClient (a single node or Redis Cluster): owner tokens with Lua release,
// fencing tokens, pub/sub wake-up instead of polling, a watchdog, reentrancy by owner,
// multi-locks and Redlock.
//
// The common case is one call and a deferred release:
//
//	locks := lock.New(rdb, lock.Options{})
//	defer locks.Close()
//
//	l, err := locks.Obtain(ctx, "voucher:42", lock.LockOptions{Wait: 2 * time.Second})
//	if err != nil {
//		return err // lock.ErrNotObtained after 2 s of someone else holding it
//	}
//	defer l.Release(context.WithoutCancel(ctx))
//	// Work under l.Context(): it is cancelled if the lock is lost. Write with l.Fence():
//	_, err = lock.GuardedExec(l.Context(), db,
//		"UPDATE stock SET qty = ?, fence = :fence WHERE id = ? AND fence < :fence", l.Fence(), qty, id)
//
// # Locks
//
//   - Simple: Client.Obtain, or Client.NewMutex(name, opts).Lock(ctx) / TryLock(ctx, wait).
//     Acquire is one script, SET key token NX PX lease plus INCR of the fence counter; release
//     is compare-and-delete plus PUBLISH; extend is compare-and-pexpire.
//   - Reentrant: Client.NewReentrant(name, opts). A hash {owner -> hold count}; the owner is
//     the id in the context (WithOwner), not a goroutine. Without one, Lock generates an id
//     and puts it in the returned lock's Context: lock again under that context to re-enter.
//   - Multi: Client.ObtainMulti(ctx, names, opts), all or nothing over keys in any slots,
//     taken in sorted order (no deadlock between multi-locks), everything released on failure.
//   - Redlock: NewRedlock(clients, opts).Obtain over independent nodes: majority rule,
//     clock-drift allowance, release on every node on failure.
//
// Every lock is a *Lock: Fence, Context (Done), Extend, Release.
//
// # Leases and the watchdog
//
// With LockOptions.Lease 0 the lease is Options.WatchdogLease (30 s) and a watchdog goroutine
// renews it every lease/3 until Release. If a renewal fails or finds the lock gone, the lock's
// Context is cancelled at once (context.Cause is an ErrLockLost) and the watchdog stops. With
// an explicit Lease there is no watchdog; the Context is cancelled when the lease runs out
// (a local timer, started before the request, so it never fires after Redis expires the key,
// clock drift aside), unless Extend pushes it back. LockOptions.MaxHold caps the total hold
// time: nothing renews past it and the Context is cancelled then. Release stops the watchdog
// and waits for it; Client.Close stops all of them. No goroutine outlives its lock or Client.
//
// # Waiting
//
// LockOptions.Wait: 0 tries once, > 0 waits at most that long (ErrNotObtained), < 0 until ctx
// ends (ctx.Err(), returned as soon as ctx is done). A waiter subscribes to the lock's release
// channel on the Client's one shared pub/sub connection and retries when the holder releases,
// otherwise when the holder's remaining lease (returned by the failed acquire script) runs
// out. There is no fixed polling. One release wakes one waiter per process (the longest
// waiting), not all of them.
//
// # Fencing
//
// A lock can be lost without its holder noticing in time: a GC pause or a stalled network
// outlasts the lease and someone else takes it. Every acquisition draws a fencing token, greater
// than any earlier holder's of the name across all clients. Store it with the data and refuse
// writes carrying a smaller one: GuardedExec does it for MySQL/MariaDB and returns
// ErrStaleFence. The counter key never expires (one small key per lock name ever used); if Redis
// loses it (no persistence, restart) tokens start over and guarded writes refuse them until
// they pass the stored value again: safe, but blocking. Give Redis persistence where that matters.
//
// # Keys (Options.Prefix "lock")
//
//	lock:{<name>}            string token (simple, multi, Redlock) or hash {owner -> holds, "" -> fence} (reentrant)
//	lock:{<name>}:fence      fencing token counter, never expires
//	lock:{<name>}:released   pub/sub channel, published on release (PUBLISH, so any Cluster node can subscribe)
//
// The name is the hash tag, so a lock and its counter share a Cluster slot and every script
// runs on Cluster; names may not be empty or contain braces. A simple and a reentrant lock of
// the same name are one lock: they exclude each other.
//
// # Errors
//
// ErrNotObtained (the wait ended), ErrNotOwner (not yours: another owner, or released
// already), ErrLockLost (held once, gone now; also matches ErrNotOwner), ErrStaleFence
// (GuardedExec refused), ErrClosed. Redis failures are returned wrapped, never as these.
//
// # Compared
//
//	                                  this package   Redisson RLock   redsync        bsm/redislock
//	owner-checked release (Lua)       yes            yes              yes            yes
//	fencing token                     yes (INCR)     no (1)           no             no
//	wait woken by release (pub/sub)   yes, 1/process yes, 1/process   no, retries    no, retry strategy
//	watchdog renewal                  yes, lease/3   yes, lease/3     no (Extend)    no (Refresh)
//	lost-lock signal                  Context        no               no             no
//	max hold time                     yes            no (2)           no             no
//	reentrant                         yes, ctx owner yes, thread id   no             no
//	multi-lock across slots           yes            yes (MultiLock)  no             no
//	Redlock (majority, drift)         yes            deprecated       yes            no
//	Redlock fencing token             yes (3)        no               no             no
//	Redis Cluster                     yes            yes              yes            yes
//
// (1) Redisson has a separate RFencedLock. (2) leaseTime stops the watchdog, it does not cap
// it. (3) Greatest node token, written back to the granting majority while the lock is held.
//
// What is left out: fair (FIFO across processes) locks, read-write locks and semaphores.
// Redlock does not make a lock safe without fencing; use the token.
package lock
