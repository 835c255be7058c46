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
// With Options.ReplicaAcks, every acquisition and renewal also waits until that many
// replicas have it (see "Failover"): a lock then survives the failover to a replica.
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
// # Failover
//
// Redis replicates asynchronously: a master answers a lock script before any replica has its
// write. When a master dies and a replica that had not received the write is promoted (a
// lagging failover: Sentinel's or Cluster's automatic failover after a crash), the lock is
// gone from the new master while its holder's handle still says Valid, and the next caller
// obtains it too. The holder learns it at its next renewal, which finds the lock gone or taken
// (the watchdog renews every lease/3: up to 10 s with the default 30 s lease; a lock with an
// explicit Lease not before it runs out or Extend is called). Until then there are two holders.
//
// Options.ReplicaAcks closes that window. After each acquire and renew script, on the same
// connection, the Client sends WAIT ReplicaAcks ReplicaTimeout, which blocks until that many
// replicas have every write of the connection. An acquisition fewer replicas acknowledged in
// time is undone (released on the master, with the owner check) and fails with
// ErrNotReplicated, counted in surge_lock_not_replicated_total; the caller may retry. A
// renewal fewer replicas acknowledged loses the lock (ErrLockLost and ErrNotReplicated): the
// replicas know an older lease than the handle would. Releases do not wait: a release that a
// failover loses leaves the lock to expire with its lease, which costs time, not exclusion.
// On a Cluster, WAIT goes to the master that owns the key's slot, one WAIT per master for a
// multi-lock. Cost: one replica round trip per acquisition and renewal; with master and
// replica on one 2-core host, obtain + release took 1.2 to 2.3 times as long as without the
// check, 1.4 in the median of ten runs (go test -run '^$' -bench ReplicaCheck ./lock/). When
// too few replicas answer, each acquisition costs ReplicaTimeout (1 s) and fails. WAIT's
// timeout is cut to the caller's deadline, less 110 ms: Redis checks WAIT timeouts on its cron
// (every 100 ms at hz 10), so it answers up to that much late.
//
// Which locks keep mutual exclusion (a second caller cannot obtain while a handle is Valid):
//
//	                            no failover   failover to an        lagging failover
//	                                          up-to-date replica
//	Obtain, Reentrant           yes           yes                   no: two holders until the
//	                                                                first one's next renewal
//	  with ReplicaAcks          yes           yes                   yes (1)
//	ObtainMulti                 yes           yes                   no, as Obtain, for the names
//	                                                                on the master that failed over
//	  with ReplicaAcks          yes           yes                   yes (1)
//	Redlock, N nodes            yes           yes                   only while fewer nodes forget
//	                                                                than granted it beyond the
//	                                                                quorum (2)
//	  with ReplicaAcks per node yes           yes                   yes (1), per node
//
// "Up-to-date": the promoted replica has every lock write, as after a planned failover
// (FAILOVER, CLUSTER FAILOVER without FORCE wait for the replica to catch up). "Lagging": it
// lacks the last writes. (1) If the promoted replica has every write that ReplicaAcks replicas
// acknowledged: one of them, or one at least as far along. Sentinel promotes the replica with
// the greatest replication offset (after replica-priority) and a Cluster's election favours
// it; ReplicaAcks equal to the number of replicas removes the doubt. A replica acknowledges
// receipt, not a write to disk: a replica that restarts without persistence before it is
// promoted has lost the lock again. Redis 7.2's WAITAOF also waits for the AOF fsync on the
// master and its replicas (what a restart needs, with appendonly on); this package sends WAIT
// only: Redis 7.0, which it is tested on, has no WAITAOF.
// (2) A node that fails over to a lagging replica forgets its grants, as a node restarted
// without its data does. A holder granted by all 3 of 3 nodes survives one such node; one
// granted by a bare majority (2 of 3, the third down) does not: the forgetful node and the
// third let a second holder in. RedlockOptions.ReplicaAcks counts a node's grant only once its
// replicas acknowledged it; nodes that have no replicas (the Redlock algorithm's independent
// masters) leave it 0 and need persistence, or a restarted node kept out for a lease.
//
// The lagging failover is reproduced with real servers in TestLaggingFailoverWithoutReplicaCheck
// (two holders), TestLaggingFailoverWithReplicaCheck, TestFailoverToSyncedReplicaWithReplicaCheck
// and TestRedlockNodeFailover: the replica frozen, its link dropped (CLIENT KILL TYPE replica),
// the lock taken, the master killed (SIGKILL), the replica thawed and promoted.
//
// Fencing, in every cell: tokens keep increasing across any failover (a promoted replica with
// an older counter draws Redis's time, later than every earlier token; see "Fencing"). So
// where two holders overlap, a store that checks the token (GuardedExec) refuses the older
// holder's writes once the newer one has written. It does not stop the older holder from
// working, nor protect effects outside the store (a message sent, a call made).
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
// already), ErrLockLost (held once, gone now; also matches ErrNotOwner), ErrNotReplicated
// (too few replicas acknowledged an acquisition, undone, or a renewal, then with
// ErrLockLost), ErrStaleFence (GuardedExec refused), ErrAmbiguousUnlock (Unlock could not
// tell which hold), ErrClosed.
// Redis failures are returned wrapped, never as these; a call that Redis did not answer in
// time wraps context.DeadlineExceeded.
//
// # Metrics
//
// With Options.Metrics (NewMetrics), surge_lock_lost_total counts the locks lost while held:
// the moment a lock's Context ends with ErrLockLost, or Release finds the lock gone. Any
// increase deserves a look: work ran without exclusion (the fence is what still guards it).
// surge_lock_not_replicated_total counts acquisitions and renewals that fewer than ReplicaAcks
// replicas acknowledged in time: a replica down or lagging.
//
// # Compared
//
//	                                  this package     Redisson RLock   redsync        bsm/redislock
//	owner-checked release (Lua)       yes              yes              yes            yes
//	fencing token                     yes (HLC)        no (1)           no             no
//	wait woken by release (pub/sub)   yes, 1/process   yes, 1/process   no, retries    no, retry strategy
//	watchdog renewal                  yes, lease/3     yes, lease/3     no (Extend)    no (Refresh)
//	lost-lock signal                  Context, Valid   no               no             no
//	max hold time                     yes              no (2)           no             no
//	reentrant                         yes, ctx owner   yes, thread id   no             no
//	multi-lock (all or nothing)       one Client (3)   MultiLock (3)    no             no
//	replica check (WAIT) on writes    opt-in (4)       on by default(4) no             no
//	Redlock (majority, drift)         yes              deprecated       yes            no
//	Redlock fencing token             yes (5)          no               no             no
//	Redis Cluster                     yes              yes              yes            yes
//
// (1) Redisson has a separate RFencedLock. (2) leaseTime stops the watchdog, it does not cap
// it. (3) ObtainMulti takes simple locks of one Client (one deployment, names in any slots),
// with this package's replica check only if the Client has ReplicaAcks; Redisson's MultiLock
// groups any RLocks, also of different deployments, each with Redisson's replica check. So
// without ReplicaAcks, ObtainMulti does not survive a lagging failover where a MultiLock
// does. (4) ReplicaAcks: this many replicas must acknowledge, also when none is connected;
// Redisson (checkLockSyncedSlaves, slavesSyncTimeout 1 s) refuses an acquisition that no
// replica acknowledged when the master has replicas, and retries it. (5) Greatest node
// token, written back to the granting majority while the lock is held.
//
// What is left out: fair (FIFO across processes) locks, read-write locks and semaphores.
// Redlock does not make a lock safe without fencing; use the token.
package lock
