package seckill

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/ent"
	"github.com/surgekit/surge/ent/seckillorder"
	"github.com/surgekit/surge/ent/voucher"
	"github.com/surgekit/surge/lock"
	"github.com/surgekit/surge/lua"
	"github.com/surgekit/surge/redisctx"
)

// lockVoucher takes the voucher's lock, waiting for another rebuild, stock change or
// reconcile (and, with SQLite, a batch commit; with MySQL batch commits serialise with those
// on the voucher's row lock, lockRow).
func (s *Service) lockVoucher(ctx context.Context, voucherID int) (*lock.Lock, error) {
	l, err := s.locks.Obtain(ctx, s.lockName(voucherID), lock.LockOptions{Wait: -1})
	if err == nil && ctx.Err() != nil {
		// Obtained as the caller gave up (a late answer from Redis): nobody would use it.
		_ = l.Release(context.WithoutCancel(ctx))
		err = ctx.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("seckill: locking voucher %d: %w", voucherID, err)
	}
	return l, nil
}

// holding returns ctx, also ended when the lock l is lost, for work done under l: the
// caller's deadline still bounds it (a lock's own Context has none). done releases it.
func holding(ctx context.Context, l *lock.Lock) (held context.Context, done func()) {
	held, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(l.Context(), func() { cancel(context.Cause(l.Context())) })
	return held, func() { stop(); cancel(nil) }
}

// underVoucherLock runs work holding the voucher's lock, with a ctx that ends with ctx or when
// the lock is lost. It returns at ctx's deadline whatever the Redis client's settings; work
// given up on that way stops at its next call and releases the lock.
func (s *Service) underVoucherLock(ctx context.Context, voucherID int, work func(ctx context.Context) error) error {
	return redisctx.Err(ctx, s.rdb, func(ctx context.Context) error {
		l, err := s.lockVoucher(ctx, voucherID)
		if err != nil {
			return err
		}
		defer l.Release(context.WithoutCancel(ctx))
		held, done := holding(ctx, l)
		defer done()
		return work(held)
	})
}

// Warm brings a voucher's sale state in Redis in line with the database: the window, on/off
// and the stock (database stock minus the orders still queued in the stream). If Redis does
// not hold the voucher (never warmed, or lost), it is rebuilt in full, buyers included, and
// admission answers NOT_READY until that is done. Call it after creating or changing a seckill
// voucher; grabs call it by themselves when Redis has lost a voucher. ErrNoSuchVoucher if the
// voucher is not a seckill voucher. With StrategySync it does nothing.
func (s *Service) Warm(ctx context.Context, voucherID int) error {
	return s.warm(ctx, voucherID, false)
}

// Rebuild rebuilds a voucher's sale state in Redis from the database and the stream, even if
// Redis holds it: admission pauses (NOT_READY) for the duration. It is what reconcile -fix does.
func (s *Service) Rebuild(ctx context.Context, voucherID int) error {
	return s.warm(ctx, voucherID, true)
}

// warmTimeout bounds one warm run, which every caller asking meanwhile shares.
const warmTimeout = time.Minute

// warm runs Warm or Rebuild. Concurrent warms of one voucher in this process share one run,
// which goes on when a caller gives up (at its ctx's end, whatever the Redis client's settings).
func (s *Service) warm(ctx context.Context, voucherID int, full bool) error {
	if s.opts.Strategy == StrategySync {
		return nil
	}
	key := "warm:" + strconv.Itoa(voucherID) + ":" + strconv.FormatBool(full)
	_, err := s.shared(ctx, key, warmTimeout, func(ctx context.Context) (any, error) {
		return nil, s.underVoucherLock(ctx, voucherID, func(ctx context.Context) error {
			return s.warmLocked(ctx, voucherID, full)
		})
	})
	return err
}

// warmLocked does the work of warm while the caller holds the voucher's lock.
func (s *Service) warmLocked(ctx context.Context, voucherID int, full bool) error {
	// The voucher's row lock, held until Redis is written, is what keeps a consumer's batch
	// commit from landing between the database read below and the Redis writes: a consumer
	// updates the row's stock in its transaction and checks, holding that row lock, that its
	// entries are still in the stream. (The Redis lock alone is not enough: a flush deletes it.)
	release, err := s.lockRow(ctx, voucherID)
	if err != nil {
		return err
	}
	defer release()
	v, err := s.db.Voucher.Get(ctx, voucherID)
	if ent.IsNotFound(err) {
		return ErrNoSuchVoucher
	}
	if err != nil {
		return fmt.Errorf("seckill: reading voucher %d: %w", voucherID, err)
	}
	if v.Kind != voucher.KindSECKILL || v.Stock == nil || v.BeginAt == nil || v.EndAt == nil {
		return ErrNoSuchVoucher
	}
	k := s.keys(voucherID)
	stale := false
	if !full {
		ready, current, err := s.saleState(ctx, voucherID)
		if err != nil {
			return fmt.Errorf("seckill: warming voucher %d: %w", voucherID, err)
		}
		stale = ready && !current
		full = !ready || stale
	}
	if err := s.ensureGroup(ctx, s.rdb, k.Orders); err != nil {
		return err
	}
	// An order the consumer wrote but did not acknowledge (it died in between) is in the
	// database and still in the stream: settle it first, or the stock below would count it twice.
	queuedMax, err := s.settlePersisted(ctx, voucherID)
	if err != nil {
		return err
	}
	if full {
		// Redis may have lost the order id counter with the rest: no id issued from now on may
		// equal one the database or the stream holds. Before admission resumes.
		if err := s.raiseIDs(ctx, queuedMax); err != nil {
			return err
		}
		if err := lua.WarmReset(ctx, s.rdb, lua.SeckillKeys(k)); err != nil {
			return fmt.Errorf("seckill: rebuilding voucher %d: %w", voucherID, err)
		}
		if err := s.loadBuyers(ctx, voucherID); err != nil {
			return err
		}
	}
	sale := lua.Sale{Begin: *v.BeginAt, End: *v.EndAt, On: v.Status == voucher.StatusACTIVE, Stock: int64(*v.Stock)}
	if _, err := lua.WarmCommit(ctx, s.rdb, lua.SeckillKeys(k), sale, full); err != nil {
		return fmt.Errorf("seckill: committing voucher %d: %w", voucherID, err)
	}
	if err := s.rdb.ZAdd(ctx, s.registryKey(), redis.Z{Score: float64(v.EndAt.UnixMilli()), Member: voucherID}).Err(); err != nil {
		return fmt.Errorf("seckill: registering voucher %d: %w", voucherID, err)
	}
	if full {
		s.log.Info("voucher sale state rebuilt from the database", "voucher", voucherID, "db_stock", *v.Stock,
			"redis_restarted", stale)
	}
	return nil
}

// lockRow takes the voucher row's lock in a transaction (MySQL) that release ends. SQLite
// has no row locks and serves a single process; there it takes none.
func (s *Service) lockRow(ctx context.Context, voucherID int) (release func(), err error) {
	if s.opts.Dialect != "mysql" {
		return func() {}, nil
	}
	tx, err := s.db.Tx(ctx)
	if err != nil {
		return nil, fmt.Errorf("seckill: locking voucher %d: %w", voucherID, err)
	}
	if err := lockRowIn(ctx, tx, voucherID); err != nil {
		_ = tx.Rollback()
		return nil, fmt.Errorf("seckill: locking voucher %d: %w", voucherID, err)
	}
	return func() { _ = tx.Rollback() }, nil
}

// lockRowIn takes the voucher row's lock (MySQL) in tx, until tx ends.
func lockRowIn(ctx context.Context, tx *ent.Tx, voucherID int) error {
	rows, err := tx.QueryContext(ctx, "SELECT id FROM vouchers WHERE id = ? FOR UPDATE", voucherID)
	if err != nil {
		return err
	}
	return rows.Close()
}

// settlePersisted settles the stream entries whose order already stands in the database (see
// traceOrders): persisted under its id or under another one, or recorded FAILED. The caller
// holds the voucher's row lock, so no commit happens meanwhile. An entry whose id is another
// order's is not settled: the consumer re-homes it. It returns the largest order id the
// stream holds.
func (s *Service) settlePersisted(ctx context.Context, voucherID int) (queuedMax int64, err error) {
	k := s.keys(voucherID)
	start := "-"
	for {
		msgs, err := s.rdb.XRangeN(ctx, k.Orders, start, "+", settlePage).Result()
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
		if err := s.settleStanding(ctx, voucherID, orders); err != nil {
			return 0, fmt.Errorf("seckill: settling persisted orders of voucher %d: %w", voucherID, err)
		}
		if len(msgs) < settlePage {
			return queuedMax, nil
		}
		start = "(" + msgs[len(msgs)-1].ID
	}
}

// raiseIDs tells the order id generator the largest order id known to be issued: in the
// database (its orders, and the ids users were told that lead elsewhere) or queued (atLeast).
// If Redis lost counts, the counter is raised and fenced above it (idgen.Generator.Raise).
func (s *Service) raiseIDs(ctx context.Context, atLeast int64) error {
	var dbMax int64
	err := scanRows(ctx, s.db, "SELECT COALESCE(MAX(id), 0) FROM tb_voucher_order UNION ALL SELECT COALESCE(MAX(admitted_id), 0) FROM tb_voucher_order_alias",
		nil, func(r *sql.Rows) error {
			var n int64
			err := r.Scan(&n)
			dbMax = max(dbMax, n)
			return err
		})
	if err != nil {
		return fmt.Errorf("seckill: reading the largest order id: %w", err)
	}
	if top := max(dbMax, atLeast); top > 0 {
		if err := s.ids.Raise(ctx, top); err != nil {
			return fmt.Errorf("seckill: raising the order id counter above %d: %w", top, err)
		}
	}
	return nil
}

// settlePage is how many stream entries settlePersisted reads at once.
const settlePage = 500

// settleStanding settles the orders that stand in the database, leaving the others queued.
func (s *Service) settleStanding(ctx context.Context, voucherID int, orders []order) error {
	if len(orders) == 0 {
		return nil
	}
	traces, err := s.traceOrders(ctx, s.db, voucherID, orders)
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
	return s.settle(ctx, voucherID, st)
}

// saleState reports whether a voucher's sale state is ready in Redis, and current: rebuilt
// under the running Redis process, not before a restart or a failover (see seckill_state.lua).
func (s *Service) saleState(ctx context.Context, voucherID int) (ready, current bool, err error) {
	st, err := lua.ReadSaleState(ctx, s.rdb, s.scriptKeys(voucherID))
	return st.Ready, st.Current, err
}

// loadBuyers copies the voucher's live orders (user -> order) from the database into the
// buyers hash, in batches.
func (s *Service) loadBuyers(ctx context.Context, voucherID int) error {
	const batch = 1000
	last := 0
	for {
		rows, err := s.db.SeckillOrder.Query().
			Where(seckillorder.VoucherID(voucherID), seckillorder.Slot(true), seckillorder.IDGT(last)).
			Order(ent.Asc(seckillorder.FieldID)).Limit(batch).
			Select(seckillorder.FieldID, seckillorder.FieldUserID).All(ctx)
		if err != nil {
			return fmt.Errorf("seckill: reading orders of voucher %d: %w", voucherID, err)
		}
		if len(rows) == 0 {
			return nil
		}
		buyers := make([]lua.Buyer, len(rows))
		for i, o := range rows {
			buyers[i] = lua.Buyer{User: o.UserID, Order: int64(o.ID)}
		}
		if err := lua.WarmBuyers(ctx, s.rdb, s.scriptKeys(voucherID), buyers); err != nil {
			return fmt.Errorf("seckill: loading buyers of voucher %d: %w", voucherID, err)
		}
		last = rows[len(rows)-1].ID
	}
}

// ensureGroup creates the consumer group of a stream (and the stream) if it does not exist.
// Starting at 0 is always safe: the stream only holds orders not yet persisted.
func (s *Service) ensureGroup(ctx context.Context, rdb redis.UniversalClient, stream string) error {
	err := rdb.XGroupCreateMkStream(ctx, stream, s.opts.Group, "0").Err()
	if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return fmt.Errorf("seckill: creating group on %s: %w", stream, err)
	}
	return nil
}

// Guard runs a change to a voucher's row (stock, window, status) under the voucher's lock and
// then warms Redis with the result: the Redis stock becomes the new database stock minus the
// orders still queued (read under the row lock, so a batch committed in between is counted
// once). For a voucher that is not a seckill voucher it just runs change. change's ctx ends
// with ctx or when the lock is lost; Guard returns at ctx's deadline whatever the Redis
// client's settings.
func (s *Service) Guard(ctx context.Context, voucherID int, change func(ctx context.Context) error) error {
	if s.opts.Strategy == StrategySync {
		return change(ctx)
	}
	return s.underVoucherLock(ctx, voucherID, func(ctx context.Context) error {
		if err := change(ctx); err != nil {
			return err
		}
		err := s.warmLocked(ctx, voucherID, false)
		if errors.Is(err, ErrNoSuchVoucher) {
			return nil
		}
		return err
	})
}

// WarmAll warms every active seckill voucher whose sale has not ended: what a server does at
// start, so the first grabs do not meet NOT_READY. Vouchers Redis already holds are only
// brought in line (window, on/off, stock), not rebuilt.
func (s *Service) WarmAll(ctx context.Context) error {
	if s.opts.Strategy == StrategySync {
		return nil
	}
	ids, err := s.db.Voucher.Query().
		Where(voucher.KindEQ(voucher.KindSECKILL), voucher.StatusEQ(voucher.StatusACTIVE), voucher.EndAtGT(s.opts.Clock())).
		IDs(ctx)
	if err != nil {
		return fmt.Errorf("seckill: listing vouchers on sale: %w", err)
	}
	for _, id := range ids {
		if err := s.Warm(ctx, id); err != nil && !errors.Is(err, ErrNoSuchVoucher) {
			return err
		}
	}
	return nil
}
