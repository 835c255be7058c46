// Package lock holds Redis distributed locks in the Redisson tradition on
// redis.UniversalClient (a single node or Redis Cluster): owner tokens with Lua release,
// fencing tokens that survive Redis losing its data, pub/sub wake-up instead of polling, a
// watchdog, reentrancy by owner, multi-locks and Redlock.
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
//	defer l.Release(ctx)
//	// Work under l.Context(): it is cancelled if the lock is lost. Write with the fence,
//	// as often as needed; GuardedExec refuses once the lock is no longer Valid:
//	_, err = l.GuardedExec(l.Context(), db,
//		"UPDATE stock SET qty = ?, fence = ? WHERE id = ? AND fence <= ?", qty, lock.FenceArg, id, lock.FenceArg)
//
// # Locks
//
//   - Simple: Client.Obtain, or Client.NewMutex(name, opts).Lock(ctx) / TryLock(ctx, wait).
//     Acquire is one script, SET key token NX PX lease plus the next fencing token; release
//     is compare-and-delete plus PUBLISH; extend is compare-and-pexpire.
//   - Reentrant: Client.NewReentrant(name, opts). A hash of the owner, the fence and one field
//     per hold; the owner is the id in the context (WithOwner), not a goroutine. Without one,
//     Lock generates an id and puts it in the returned lock's Context: lock again under that
//     context to re-enter. Holds are given back by the process that took them (a handle's
//     Release, or Unlock with the handle's Context); another process may extend the lease
//     but never shorten it.
//   - Multi: Client.ObtainMulti(ctx, names, opts), all or nothing over keys in any slots,
//     taken in sorted order (no deadlock between multi-locks), everything released on failure.
//   - Redlock: NewRedlock(clients, opts).Obtain over independent nodes: majority rule,
//     clock-drift allowance, release on every node on failure.
//
// Every lock is a *Lock: Fence, Context (Done), Valid, GuardedExec, Extend, Release. The nil
// *Lock that a failed Obtain returns is a lock not held: Release returns ErrNotOwner.
//
// # Leases and the watchdog
//
// With LockOptions.Lease 0 the lease is Options.WatchdogLease (30 s) and a watchdog goroutine
// renews it every lease/3 until Release. If a renewal fails, finds the lock gone or is not
// answered within lease/6, the lock's Context is cancelled at once (context.Cause is an
// ErrLockLost) and the watchdog stops. With an explicit Lease there is no watchdog; the lock
// runs out when the lease does, unless Extend pushes it back. LockOptions.MaxHold caps the
// total hold time: nothing renews past it. Release stops the watchdog and waits for it;
// Client.Close stops all of them. No watchdog outlives its lock or Client.
//
// Each lock keeps a local deadline: the moment the request that took or last renewed it was
// sent, plus the lease it set (capped by MaxHold). Redis cannot expire the key earlier, clock
// drift aside. Lock.Valid compares it with the monotonic clock; a timer cancels the Context
// at it. The timer can run late: a process paused past the deadline (SIGSTOP, a stalled VM, a
// long GC) may see its Context still live for a moment after it resumes, while Valid is
// already false. Check Valid (Lock.GuardedExec does) right before a protected write.
//
// # A hung Redis
//
// go-redis ignores context deadlines unless Options.ContextTimeoutEnabled is set; this package
// does not rely on it. Every Redis call it makes (acquire, renew, extend, release, the
// reentrant and multi scripts, each Redlock node) goes through redisctx and returns at its
// context's deadline with any client; Obtain's calls also end with its wait. Calls made
// without a caller's deadline have their own bounds: a watchdog renewal lease/6, an Extend
// the end of the current lease, a Release 2 s, each Redlock node call its NodeTimeout.
// Release runs even under a cancelled context (it is clean-up), bounded by its deadline.
// With a client that does not honour deadlines, a call under a deadline runs in a goroutine
// of its own (a goroutine hand-off per call); set ContextTimeoutEnabled on the client to make
// such calls plain ones.
//
// An acquisition whose caller never learned that it took the lock (the deadline passed while
// Redis hung and Redis ran it later, or the reply was lost) is cancelled in the background:
// released if it took the lock, or refused by a tombstone key if it has not run yet, which
// covers a command stuck in a hung Redis's input buffer that runs after the cancel sent
// later. A cancel Redis does not answer within 1 s leaves the lock to expire with its lease.
// Close waits for the cancels under way. SUBSCRIBE and UNSUBSCRIBE go out from one goroutine,
// so a waiter never waits for them.
//
// # Waiting
//
// LockOptions.Wait: 0 tries once, > 0 waits at most that long (ErrNotObtained, wrapping the
// error of a call Redis had not answered by then), < 0 until ctx ends
// (ctx.Err(), returned as soon as ctx is done). A waiter subscribes to the lock's release
// channel on the Client's one shared pub/sub connection and retries when the holder
// releases, otherwise when the holder's remaining lease (returned by the failed acquire
// script) runs out. There is no fixed polling. One release wakes one waiter per process (the
// longest waiting), not all of them.
//
// # Fencing
//
// A lock can be lost without its holder noticing in time: a GC pause or a stalled network
// outlasts the lease and someone else takes it. Every acquisition draws a fencing token,
// greater than any earlier holder's of the name across all clients. Store it with the data
// and refuse writes carrying a smaller one: GuardedExec does it for MySQL/MariaDB (fence <= ?
// with lock.FenceArg, so the holder may write several times) and returns ErrStaleFence.
//
// Tokens are a hybrid logical clock: max(counter + 1, Redis TIME in microseconds), in the
// acquire script. They track the time they were drawn at, so they keep increasing when Redis
// loses the counter (FLUSHALL, a restart without persistence) or comes back with an older one
// (a failover to a lagging replica, an AOF that lost its tail): the next token is at least
// Redis's current time, later than every earlier token. The counter expires 1 min after the
// lease of the last acquisition (no key outlives its use); while it lives, tokens increase
// even if Redis's clock steps back. What remains assumed: Redis's clock (the clock of
// whichever node serves the lock after a failover) is not behind the time the last token
// before the loss was drawn, nor, once the counter expired, behind it by more than the lease
// plus 1 min; and fewer than a million acquisitions per second per name, so that tokens do
// not run ahead of the clock (they stay below 2^53, exact in JavaScript, until 2255).
//
// # Keys (Options.Prefix "lock")
//
//	lock:{<name>}               string token (simple, multi, Redlock) or hash {owner, fence, <hold id> -> 1} (reentrant); the lease
//	lock:{<name>}:fence         fencing token counter; the lease + 1 min after the last acquisition
//	lock:{<name>}:void:<token>  tombstone of a cancelled acquisition; 1 min
//	lock:{<name>}:released      pub/sub channel, published on release (PUBLISH, so any Cluster node can subscribe)
//
// The name is the hash tag, so a lock and its other keys share a Cluster slot and every
// script runs on Cluster; names may not be empty or contain braces. A simple and a reentrant
// lock of the same name are one lock: they exclude each other.
//
// # Errors
//
// ErrNotObtained (the wait ended), ErrNotOwner (not yours: another owner, or released
// already), ErrLockLost (held once, gone now; also matches ErrNotOwner), ErrStaleFence
// (GuardedExec refused), ErrAmbiguousUnlock (Unlock could not tell which hold), ErrClosed.
// Redis failures are returned wrapped, never as these; a call that Redis did not answer in
// time wraps context.DeadlineExceeded.
//
// # Metrics
//
// With Options.Metrics (NewMetrics), surge_lock_lost_total counts the locks lost while held:
// the moment a lock's Context ends with ErrLockLost, or Release finds the lock gone. Any
// increase deserves a look: work ran without exclusion (the fence is what still guards it).
//
// # Compared
//
//	                                  this package   Redisson RLock   redsync        bsm/redislock
//	owner-checked release (Lua)       yes            yes              yes            yes
//	fencing token                     yes (HLC)      no (1)           no             no
//	wait woken by release (pub/sub)   yes, 1/process yes, 1/process   no, retries    no, retry strategy
//	watchdog renewal                  yes, lease/3   yes, lease/3     no (Extend)    no (Refresh)
//	lost-lock signal                  Context, Valid no               no             no
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
