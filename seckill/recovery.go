package seckill

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/idgen"
	"github.com/surgekit/surge/lua"
	"github.com/surgekit/surge/redisctx"
)

// recovery keeps a voucher's sale state in Redis in line with the database: it warms new and
// changed vouchers and rebuilds lost or stale ones (reconcile.go checks and repairs the same).
//
// Each rebuild holds the voucher's Redis lock and, where the database has row locks, its row
// lock until Redis is written: a batch commit takes the row lock first and, holding it,
// checks its entries are still pending, so a rebuild sees every order either in the database
// or in the stream, never in neither — also after a Redis flush, which deletes the Redis lock.
type recovery struct {
	rdb     redis.UniversalClient
	keys    keyspace
	store   recoveryStore
	locks   voucherLocks
	ids     *idgen.Generator
	settler *settler
	borrow  *borrower     // ends borrows before a full rebuild of a voucher with buckets
	counts  *bucketCounts // forgets a count the warm changed
	bg      *background
	group   string
	clock   func() time.Time
	log     *slog.Logger
}

// warmTimeout bounds one warm run, which every caller asking meanwhile shares.
const warmTimeout = time.Minute

// settlePage is how many stream entries settlePersisted reads at once; buyersPage how many
// buyers loadBuyers copies at once.
const (
	settlePage = 500
	buyersPage = 1000
)

// warm runs Warm or Rebuild. Concurrent warms of one voucher in this process share one run,
// which goes on when a caller gives up (at its ctx's end, whatever the Redis client's settings).
func (r *recovery) warm(ctx context.Context, voucherID int, full bool) error {
	key := "warm:" + strconv.Itoa(voucherID) + ":" + strconv.FormatBool(full)
	_, err := r.bg.shared(ctx, key, warmTimeout, func(ctx context.Context) (any, error) {
		return nil, r.locks.under(ctx, voucherID, func(ctx context.Context) error {
			return r.warmLocked(ctx, voucherID, full)
		})
	})
	return err
}

// guard runs change under the voucher's lock, then warms Redis with the result (see
// Service.Guard).
func (r *recovery) guard(ctx context.Context, voucherID int, change func(ctx context.Context) error) error {
	return r.locks.under(ctx, voucherID, func(ctx context.Context) error {
		if err := change(ctx); err != nil {
			return err
		}
		err := r.warmLocked(ctx, voucherID, false)
		if errors.Is(err, ErrNoSuchVoucher) {
			return nil
		}
		return err
	})
}

// warmAll warms every active seckill voucher whose sale has not ended.
func (r *recovery) warmAll(ctx context.Context) error {
	ids, err := r.store.vouchersOnSale(ctx, r.clock())
	if err != nil {
		return fmt.Errorf("seckill: listing vouchers on sale: %w", err)
	}
	for _, id := range ids {
		if err := r.warm(ctx, id, false); err != nil && !errors.Is(err, ErrNoSuchVoucher) {
			return err
		}
	}
	return nil
}

// warmLocked does the work of warm while the caller holds the voucher's lock: with full, or
// when Redis does not hold the sale or holds it from before a restart, a rebuild.
func (r *recovery) warmLocked(ctx context.Context, voucherID int, full bool) error {
	// The row lock outlives ctx (the voucher lock's context, cancelled if that lock is lost):
	// a commit given up on must not find the consumer's batches written meanwhile (commit).
	held, release, err := r.store.holdVoucher(context.WithoutCancel(ctx), voucherID)
	if err != nil {
		return err
	}
	defer release()
	if testHookWarmHeld != nil {
		testHookWarmHeld()
	}
	onLock := *r
	onLock.store = held // reads on the lock's connection (recoveryStore.holdVoucher)
	err = onLock.warmHeld(ctx, voucherID, full)
	if !full && errors.Is(err, lua.ErrSaleNotReady) {
		// Redis lost the sale (or a bucket of it) since the warm found it ready, before any
		// stock moved (a flush, a failover): rebuild it, with its buyers, under the locks held.
		err = onLock.warmHeld(ctx, voucherID, true)
	}
	return err
}

// warmHeld is warmLocked once the voucher's row lock is held.
func (r *recovery) warmHeld(ctx context.Context, voucherID int, full bool) error {
	sale, err := r.store.sale(ctx, voucherID)
	if err != nil {
		return err
	}
	if prev, err := r.setBucketCount(ctx, voucherID, sale); err != nil || sale.buckets > 1 || prev > 1 {
		if err != nil {
			return err
		}
		return r.warmBuckets(ctx, voucherID, sale, prev, full)
	}
	stale := false
	if !full {
		st, err := lua.ReadSaleState(ctx, r.rdb, r.keys.script(voucherID))
		if err != nil {
			return fmt.Errorf("seckill: warming voucher %d: %w", voucherID, err)
		}
		stale = st.Ready && !st.Current
		full = !st.Ready || stale
	}
	if err := r.prepare(ctx, voucherID, full); err != nil {
		return err
	}
	if err := r.commit(ctx, voucherID, sale, full); err != nil {
		return err
	}
	if full {
		r.log.Info("voucher sale state rebuilt from the database", "voucher", voucherID, "db_stock", sale.stock,
			"redis_restarted", stale)
	}
	return nil
}

// prepare gets Redis ready for the commit: the stream and its group exist, entries already
// persisted are settled, and for a rebuild the id counter is raised and the buyers reloaded.
func (r *recovery) prepare(ctx context.Context, voucherID int, full bool) error {
	if err := ensureGroup(ctx, r.rdb, r.keys.sale(voucherID).Orders, r.group); err != nil {
		return err
	}
	// An order the consumer wrote but did not acknowledge (it died in between) is in the
	// database and still in the stream: settle it first, or the stock would count it twice.
	queuedMax, err := r.settlePersisted(ctx, voucherID)
	if err != nil || !full {
		return err
	}
	// Redis may have lost the order id counter with the rest: no id issued from now on may
	// equal one the database or the stream holds. Before admission resumes.
	if err := r.raiseIDs(ctx, queuedMax); err != nil {
		return err
	}
	if err := lua.WarmReset(ctx, r.rdb, r.keys.script(voucherID)); err != nil {
		return fmt.Errorf("seckill: rebuilding voucher %d: %w", voucherID, err)
	}
	return r.loadBuyers(ctx, voucherID)
}

// testHookWarmHeld, set by tests only, runs right after a warm takes the voucher's row lock.
var testHookWarmHeld func()

// testHookBeforeWarmCommit, set by tests only, runs right before a warm's commit.
var testHookBeforeWarmCommit func()

// warmCommitTimeout bounds a warm's commit; warmClockMargin covers the difference between this
// process's clock and Redis's when waiting for a commit given up on to expire.
const (
	warmCommitTimeout = 2 * time.Second
	warmClockMargin   = time.Second
)

// commit sets the sale's window and stock in Redis, makes it ready and registers it for the
// consumer.
//
// The commit may run only until notAfter (Redis's clock): a call given up on that Redis runs
// later would set a stock read from the database before the consumer's later batches. On a
// failure the caller keeps the voucher's locks until notAfter has passed everywhere.
func (r *recovery) commit(ctx context.Context, voucherID int, sale sale, full bool) error {
	if testHookBeforeWarmCommit != nil {
		testHookBeforeWarmCommit()
	}
	_, err := timed(ctx, r.rdb, "voucher "+strconv.Itoa(voucherID), func(ctx context.Context, notAfter time.Time) (int64, error) {
		if !full {
			return lua.WarmUpdate(ctx, r.rdb, r.keys.script(voucherID), sale.script(), notAfter)
		}
		return lua.WarmCommit(ctx, r.rdb, r.keys.script(voucherID), sale.script(), true, notAfter)
	})
	if err != nil {
		return err
	}
	z := redis.Z{Score: float64(sale.end.UnixMilli()), Member: voucherID}
	if err := r.rdb.ZAdd(ctx, r.keys.registry(), z).Err(); err != nil {
		return fmt.Errorf("seckill: registering voucher %d: %w", voucherID, err)
	}
	return nil
}

// timed runs one of a warm's writes to Redis (a voucher's commit, or a write to one of its
// buckets), which Redis runs only until notAfter by its own clock (see commit). If the write
// failed otherwise, it may still run: timed holds the caller, and with it the voucher's row
// lock, until it no longer can, even if ctx ended.
func timed[T any](ctx context.Context, rdb redis.UniversalClient, what string, write func(ctx context.Context, notAfter time.Time) (T, error)) (T, error) {
	notAfter := time.Now().Add(warmCommitTimeout)
	cctx, cancel := context.WithDeadline(ctx, notAfter)
	defer cancel()
	got, err := redisctx.Do(cctx, rdb, func(ctx context.Context) (T, error) { return write(ctx, notAfter) })
	if err != nil {
		if !errors.Is(err, lua.ErrCommitTooLate) && !errors.Is(err, lua.ErrSaleNotReady) {
			time.Sleep(time.Until(notAfter.Add(warmClockMargin)))
		}
		return got, fmt.Errorf("seckill: committing %s: %w", what, err)
	}
	return got, nil
}

// settlePersisted settles the stream entries whose order already stands in the database (see
// orderStore.trace): persisted under its id or under another one, or recorded FAILED. The
// caller holds the voucher's row lock, so no commit happens meanwhile. An entry whose id is
// another order's is not settled: the consumer re-homes it. It returns the largest order id
// the stream holds.
func (r *recovery) settlePersisted(ctx context.Context, voucherID int) (queuedMax int64, err error) {
	stream := r.keys.sale(voucherID).Orders
	start := "-"
	for {
		msgs, err := r.rdb.XRangeN(ctx, stream, start, "+", settlePage).Result()
		if err != nil {
			return 0, fmt.Errorf("seckill: reading the queue of voucher %d: %w", voucherID, err)
		}
		orders := make([]order, 0, len(msgs))
		for _, m := range msgs {
			if o, err := parseEntry(m); err == nil {
				orders = append(orders, o)
				queuedMax = max(queuedMax, o.id)
			}
		}
		if err := r.settleStanding(ctx, voucherID, orders); err != nil {
			return 0, fmt.Errorf("seckill: settling persisted orders of voucher %d: %w", voucherID, err)
		}
		if len(msgs) < settlePage {
			return queuedMax, nil
		}
		start = "(" + msgs[len(msgs)-1].ID
	}
}

// settleStanding settles the orders that stand in the database, leaving the others queued.
func (r *recovery) settleStanding(ctx context.Context, voucherID int, orders []order) error {
	if len(orders) == 0 {
		return nil
	}
	traces, err := r.store.trace(ctx, voucherID, orders)
	if err != nil {
		return err
	}
	var st settlement
	for i, o := range orders {
		st.place(o, traces[i])
	}
	if st.empty() {
		return nil
	}
	return r.settler.settle(ctx, voucherID, st)
}

// raiseIDs tells the order id generator the largest order id known to be issued: in the
// database (its orders, and the ids users were told that lead elsewhere) or queued (atLeast).
// If Redis lost counts, the counter is raised and fenced above it (idgen.Generator.Raise), and
// today's counter is fenced too (Fence): the ids told before the loss then lie before the
// latest durable fence at once, which Order's answer for a lost order relies on (status.go).
func (r *recovery) raiseIDs(ctx context.Context, atLeast int64) error {
	if err := r.ids.Fence(ctx); err != nil {
		return fmt.Errorf("seckill: fencing the order id counter: %w", err)
	}
	dbMax, err := r.store.maxOrderID(ctx)
	if err != nil {
		return fmt.Errorf("seckill: reading the largest order id: %w", err)
	}
	if top := max(dbMax, atLeast); top > 0 {
		if err := r.ids.Raise(ctx, top); err != nil {
			return fmt.Errorf("seckill: raising the order id counter above %d: %w", top, err)
		}
	}
	return nil
}

// loadBuyers copies the voucher's live orders (user -> order) from the database into the
// buyers hash, in pages.
func (r *recovery) loadBuyers(ctx context.Context, voucherID int) error {
	var last int64
	for {
		buyers, err := r.store.buyers(ctx, voucherID, last, buyersPage)
		if err != nil {
			return fmt.Errorf("seckill: reading orders of voucher %d: %w", voucherID, err)
		}
		if len(buyers) == 0 {
			return nil
		}
		if err := lua.WarmBuyers(ctx, r.rdb, r.keys.script(voucherID), buyers); err != nil {
			return fmt.Errorf("seckill: loading buyers of voucher %d: %w", voucherID, err)
		}
		last = buyers[len(buyers)-1].Order
	}
}

// stale reports whether Redis holds a voucher's sale state from before a restart or failover.
func (r *recovery) stale(ctx context.Context, voucherID int) (stale, ok bool) {
	st, err := bounded(ctx, r.rdb, func(ctx context.Context) (lua.SaleState, error) {
		return lua.ReadSaleState(ctx, r.rdb, r.keys.script(voucherID))
	})
	return err == nil && st.Ready && !st.Current, err == nil
}

// rebuildStale rebuilds a voucher whose sale state Redis may have brought back older than it
// was (see lua.SaleState); warm checks again under the voucher's lock, so that of all the
// processes noticing the restart, one rebuilds.
func (r *recovery) rebuildStale(ctx context.Context, voucherID int) {
	r.log.Warn("Redis restarted or failed over since the voucher's sale state was rebuilt: rebuilding it", "voucher", voucherID)
	voucherID = voucherOf(voucherID) // the consumer passes a stock bucket's reference (buckets.go)
	if err := r.warm(ctx, voucherID, false); err != nil && ctx.Err() == nil && !errors.Is(err, ErrNoSuchVoucher) {
		r.log.Error("rebuilding a voucher after a Redis restart", "voucher", voucherID, "err", err)
	}
}

// errNoStream: groupOnStream found no stream to create the group on.
var errNoStream = errors.New("seckill: no such stream")

// groupOnStream creates the consumer group of a stream if the stream exists and the group
// does not (errNoStream if the stream does not exist). Starting at 0 is always safe.
func groupOnStream(ctx context.Context, rdb redis.UniversalClient, stream, group string) error {
	err := rdb.XGroupCreate(ctx, stream, group, "0").Err()
	switch {
	case err == nil || redis.HasErrorPrefix(err, "BUSYGROUP"):
		return nil
	case replyError(err) && strings.Contains(err.Error(), "requires the key to exist"):
		return errNoStream
	}
	return fmt.Errorf("seckill: creating group on %s: %w", stream, err)
}

// ensureGroup creates the consumer group of a stream (and the stream) if it does not exist.
// Starting at 0 is always safe: the stream only holds orders not yet persisted.
func ensureGroup(ctx context.Context, rdb redis.UniversalClient, stream, group string) error {
	err := rdb.XGroupCreateMkStream(ctx, stream, group, "0").Err()
	if err != nil && !redis.HasErrorPrefix(err, "BUSYGROUP") {
		return fmt.Errorf("seckill: creating group on %s: %w", stream, err)
	}
	return nil
}
