package seckill

import (
	"context"
	stdsql "database/sql"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/sql"

	"github.com/surgekit/surge/ent"
	"github.com/surgekit/surge/ent/seckillorder"
	"github.com/surgekit/surge/ent/seckillorderalias"
	"github.com/surgekit/surge/ent/voucher"
	"github.com/surgekit/surge/idgen"
)

// sqlStore is the order store on MySQL (MariaDB) or SQLite, through ent. Statements ent's
// client cannot express (an insert that skips duplicates and counts the rows it wrote, a row
// lock) are built with ent's SQL builder from the generated table and column constants, so a
// rename in ent/schema breaks the build here, not a query at run time.
//
// How orders are persisted is all here: writeBatch (one transaction per batch), and what a
// Redis that lost state sends (rehome.go's cases: re-homed, superseded, lost).
type sqlStore struct {
	db      *ent.Client
	dialect sqlDialect
	ids     *idgen.Generator // fresh ids for re-homed orders, and StrategySync's orders
	locks   voucherLocks     // batch commits, where the database has no row locks
	log     *slog.Logger
}

// sqlDialect is what the store does differently per database.
type sqlDialect struct {
	name string // ent's dialect name
	// rowLocks: SELECT ... FOR UPDATE locks a row until the transaction ends (MySQL). A batch
	// commit then serialises with rebuilds and reconcile on the voucher's row. SQLite has no
	// row locks and serves a single process: there batch commits take the voucher's Redis lock.
	rowLocks bool
}

var sqlDialects = map[string]sqlDialect{
	dialect.MySQL:  {name: dialect.MySQL, rowLocks: true},
	dialect.SQLite: {name: dialect.SQLite},
}

func newSQLStore(db *ent.Client, dialectName string, ids *idgen.Generator, locks voucherLocks, log *slog.Logger) (*sqlStore, error) {
	d, ok := sqlDialects[dialectName]
	if !ok {
		return nil, fmt.Errorf("seckill: unsupported dialect %q (want %s or %s)", dialectName, dialect.MySQL, dialect.SQLite)
	}
	return &sqlStore{db: db, dialect: d, ids: ids, locks: locks, log: log}, nil
}

func (s *sqlStore) ping(ctx context.Context) error {
	_, err := s.db.ExecContext(ctx, "SELECT 1")
	return err
}

func (s *sqlStore) guardCommits(ctx context.Context, voucherID int) (context.Context, func(), error) {
	if s.dialect.rowLocks {
		return ctx, func() {}, nil // writeBatch takes the voucher's row lock first
	}
	l, err := s.locks.lock(ctx, voucherID)
	if err != nil {
		return nil, nil, err
	}
	return l.Context(), func() { _ = l.Release(context.WithoutCancel(ctx)) }, nil
}

func (s *sqlStore) holdVoucher(ctx context.Context, voucherID int) (held orderStore, release func(), err error) {
	if !s.dialect.rowLocks {
		return s, func() {}, nil
	}
	// Read committed: each read under the lock sees what is committed when it runs, as a
	// read on another connection would (a repeatable read's snapshot would be older).
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: stdsql.LevelReadCommitted})
	if err != nil {
		return nil, nil, fmt.Errorf("seckill: locking voucher %d: %w", voucherID, err)
	}
	if err := s.lockRows(ctx, tx.Client(), voucherID); err != nil {
		_ = tx.Rollback()
		return nil, nil, fmt.Errorf("seckill: locking voucher %d: %w", voucherID, err)
	}
	onLock := *s
	onLock.db = tx.Client()
	return &onLock, func() { _ = tx.Rollback() }, nil
}

// lockRows takes the vouchers' row locks in c's transaction, until it ends (row locks only),
// in id order: two transactions locking several rows then never wait on each other in a cycle.
func (s *sqlStore) lockRows(ctx context.Context, c *ent.Client, voucherIDs ...int) error {
	query, args := sql.Dialect(s.dialect.name).Select(voucher.FieldID).From(sql.Table(voucher.Table)).
		Where(sql.InInts(voucher.FieldID, voucherIDs...)).OrderBy(voucher.FieldID).ForUpdate().Query()
	rows, err := c.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	return rows.Close()
}

// inVoucherTx runs fn in a transaction holding the voucher's row lock (where there are row
// locks) and commits it if fn succeeds.
func (s *sqlStore) inVoucherTx(ctx context.Context, voucherID int, fn func(c *ent.Client) error) error {
	tx, err := s.db.Tx(ctx)
	if err != nil {
		return err
	}
	if s.dialect.rowLocks {
		// The voucher's row lock first: the insert's foreign-key check would otherwise take a
		// shared lock on the row that the stock update must upgrade, and two transactions
		// doing that (another consumer, a rebuild's SELECT ... FOR UPDATE) deadlock.
		if err := s.lockRows(ctx, tx.Client(), voucherID); err != nil {
			_ = tx.Rollback()
			return err
		}
	}
	if err := fn(tx.Client()); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// gangBatch is one voucher's orders in a gang write.
type gangBatch struct {
	voucherID int
	orders    []order
}

// errGangSplit: a gang write met what only a voucher's own write sorts out (an order written
// before, a stock guard); it wrote nothing.
var errGangSplit = errors.New("seckill: gang write needs splitting")

// canGang reports whether writeGang can serve: it needs row locks (MySQL).
func (s *sqlStore) canGang() bool { return s.dialect.rowLocks }

// writeGang persists several vouchers' batches in one transaction of four statements, however
// many vouchers: their row locks (in id order, so that two gangs and a single voucher's
// transaction never wait on each other in a cycle), one insert of every order, one stock
// update, the commit; mine (the check writeBatch's commit needs, for every batch at once) runs
// while the rows are written, once the locks are held.
// With a thousand quiet sales each voucher has a few orders at a time, and a transaction per
// voucher made the database's round trips, not the orders, the consumer's limit. It takes the
// common case only: if an order is already written (a redelivery) or a stock would go below
// zero, it writes nothing and says errGangSplit, and the caller writes voucher by voucher.
func (s *sqlStore) writeGang(ctx context.Context, batches []gangBatch, mine func(context.Context) error) ([]settlement, error) {
	if !s.dialect.rowLocks {
		return nil, errGangSplit
	}
	take := map[int]int{} // units per voucher
	var all int
	for _, b := range batches {
		take[b.voucherID] += len(b.orders)
		all += len(b.orders)
	}
	ids := slices.Sorted(maps.Keys(take))
	tx, err := s.db.Tx(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback() }() // a no-op after the commit
	c := tx.Client()
	if err := s.lockRows(ctx, c, ids...); err != nil {
		return nil, err
	}
	checked := checkWhile(ctx, mine) // holding the row locks, while the rows are written
	defer func() { _ = checked() }()
	inserted, err := s.insertBatches(ctx, c, batches, seckillorder.StatusCREATED)
	if err != nil {
		return nil, err
	}
	if inserted != all {
		return nil, errGangSplit
	}
	// stock = stock - n per voucher, only where stock >= n: every row or none.
	now := time.Now().UTC()
	var by strings.Builder
	var byArgs []any
	for _, id := range ids {
		by.WriteString(" WHEN ? THEN ?")
		byArgs = append(byArgs, id, take[id])
	}
	in := strings.Repeat(",?", len(ids))[1:]
	update := fmt.Sprintf("UPDATE `%s` SET `%s` = `%s` - CASE `%s`%s END, `%s` = ? WHERE `%s` IN (%s) AND `%s` >= CASE `%s`%s END",
		voucher.Table, voucher.FieldStock, voucher.FieldStock, voucher.FieldID, by.String(), voucher.FieldUpdatedAt,
		voucher.FieldID, in, voucher.FieldStock, voucher.FieldID, by.String())
	updateArgs := append(append(append(slices.Clip(byArgs), now), intsAny(ids)...), byArgs...)
	res, err := c.ExecContext(ctx, update, updateArgs...)
	if err != nil {
		return nil, err
	}
	if n, err := res.RowsAffected(); err != nil || int(n) != len(ids) {
		return nil, errors.Join(errGangSplit, err)
	}
	if err := checked(); err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	out := make([]settlement, len(batches))
	for i, b := range batches {
		out[i].done = b.orders
	}
	return out, nil
}

func intsAny(ids []int) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}

// writeBatch persists orders of one voucher in one transaction: the rows are inserted,
// duplicates ignored, and the stock is decremented by the number of rows inserted, guarded
// by stock >= n. An order that was not inserted is sorted by what the database holds (see
// settleDuplicates): written before, re-homed under a fresh id because its id belongs to
// another order, superseded by the user's existing order, or FAILED before.
func (s *sqlStore) writeBatch(ctx context.Context, voucherID int, orders []order, mine func(context.Context) error) (settlement, error) {
	if s.dialect.rowLocks {
		st, err := s.writeNew(ctx, voucherID, orders, mine)
		if !errors.Is(err, errNotNew) {
			return st, err
		}
	}
	var st settlement
	err := s.inVoucherTx(ctx, voucherID, func(c *ent.Client) error {
		var err error
		st, err = s.writeBatchIn(ctx, c, voucherID, orders, mine)
		return err
	})
	if err != nil {
		return settlement{}, err
	}
	return st, nil
}

// errNotNew: writeNew met an order already written (a redelivery) or a stock lower than the
// batch; it wrote nothing, and writeBatch's careful path sorts it out.
var errNotNew = errors.New("seckill: the batch is not all new orders")

// writeNew is writeBatch for the common case, a batch of orders none of which is written yet,
// in four statements where the careful path takes five and a Redis round trip: the stock
// update first, by the whole batch and guarded, which takes the voucher's row lock (so the
// insert's foreign-key check finds it held: no lock to upgrade, no deadlock); then the insert,
// while mine checks Redis (holding the row lock, as the careful path does: a rebuild counts
// the stream under the same lock), and the commit. If the insert skipped an order or the stock
// is short it writes nothing (errNotNew). Row locks only (MySQL).
func (s *sqlStore) writeNew(ctx context.Context, voucherID int, orders []order, mine func(context.Context) error) (settlement, error) {
	tx, err := s.db.Tx(ctx)
	if err != nil {
		return settlement{}, err
	}
	defer func() { _ = tx.Rollback() }() // a no-op after the commit
	c := tx.Client()
	if err := takeStock(ctx, c, voucherID, len(orders)); err != nil {
		if errors.Is(err, errStockGuard) {
			return settlement{}, errNotNew
		}
		return settlement{}, err
	}
	checked := checkWhile(ctx, mine)
	defer func() { _ = checked() }()
	inserted, err := s.insertOrders(ctx, c, voucherID, orders, seckillorder.StatusCREATED)
	if err := errors.Join(err, checked()); err != nil {
		return settlement{}, err
	}
	if inserted != len(orders) {
		return settlement{}, errNotNew
	}
	if err := tx.Commit(); err != nil {
		return settlement{}, err
	}
	return settlement{done: orders}, nil
}

// checkWhile runs mine in the background (the caller holds the row locks it needs, and goes
// on with its statements meanwhile); wait waits for it and returns its error, every time.
func checkWhile(ctx context.Context, mine func(context.Context) error) (wait func() error) {
	done := make(chan error, 1)
	go func() { done <- mine(ctx) }()
	return sync.OnceValue(func() error { return <-done })
}

func (s *sqlStore) writeBatchIn(ctx context.Context, c *ent.Client, voucherID int, orders []order, mine func(context.Context) error) (st settlement, err error) {
	inserted, err := s.insertOrders(ctx, c, voucherID, orders, seckillorder.StatusCREATED)
	if err != nil {
		return st, err
	}
	st.done = orders
	if inserted < len(orders) {
		var moved int
		if st, moved, err = s.settleDuplicates(ctx, c, voucherID, orders); err != nil {
			return st, err
		}
		inserted += moved
	}
	if err := takeStock(ctx, c, voucherID, inserted); err != nil {
		return st, err
	}
	if inserted > 0 || st.rehomed+st.superseded > 0 {
		// Holding the voucher's row lock, make sure the entries are still pending here: if
		// Redis lost the stream meanwhile, a rebuild has counted without them (it reads under
		// the same row lock), and an entry another consumer claimed is that one's to write.
		if err := mine(ctx); err != nil {
			return st, err
		}
	}
	return st, nil
}

// takeStock decrements a voucher's stock by n, or fails with errStockGuard if it has fewer.
func takeStock(ctx context.Context, c *ent.Client, voucherID, n int) error {
	if n == 0 {
		return nil
	}
	updated, err := c.Voucher.Update().Where(voucher.ID(voucherID), voucher.StockGTE(n)).
		AddStock(-n).SetUpdatedAt(time.Now().UTC()).Save(ctx)
	if err != nil {
		return err
	}
	if updated != 1 {
		return errStockGuard
	}
	return nil
}

// insertOrders inserts the orders' rows with a status (CREATED holds the user's slot, FAILED
// does not), skipping those whose id or slot is taken, and returns how many it inserted.
// Only duplicate keys are skipped (INSERT IGNORE would also swallow foreign-key and data
// errors); on MySQL a duplicate's no-op update counts 0 affected rows.
func (s *sqlStore) insertOrders(ctx context.Context, c *ent.Client, voucherID int, orders []order, status seckillorder.Status) (int, error) {
	return s.insertBatches(ctx, c, []gangBatch{{voucherID: voucherID, orders: orders}}, status)
}

// insertBatches is insertOrders for the orders of several vouchers, in one statement.
func (s *sqlStore) insertBatches(ctx context.Context, c *ent.Client, batches []gangBatch, status seckillorder.Status) (int, error) {
	var slot any // NULL: a FAILED or LOST order leaves the user's slot free
	if !givenUp(status) {
		slot = true
	}
	now := time.Now().UTC()
	insert := sql.Dialect(s.dialect.name).Insert(seckillorder.Table).Columns(
		seckillorder.FieldID, seckillorder.FieldCreatedAt, seckillorder.FieldUpdatedAt, seckillorder.FieldUserID,
		seckillorder.FieldVoucherID, seckillorder.FieldStatus, seckillorder.FieldSlot)
	for _, b := range batches {
		for _, o := range b.orders {
			insert.Values(o.id, o.at, now, o.user, b.voucherID, string(status), slot)
		}
	}
	return s.execCounting(ctx, c, insert.OnConflict(sql.DoNothing()))
}

// insertAlias writes the alias from the id a user was told to the order standing for it.
func (s *sqlStore) insertAlias(ctx context.Context, c *ent.Client, voucherID int, o order, to int64, reason seckillorderalias.Reason) error {
	insert := sql.Dialect(s.dialect.name).Insert(seckillorderalias.Table).Columns(
		seckillorderalias.FieldUserID, seckillorderalias.FieldVoucherID, seckillorderalias.FieldAdmittedID,
		seckillorderalias.FieldOrderID, seckillorderalias.FieldReason, seckillorderalias.FieldCreatedAt).
		Values(o.user, voucherID, o.id, to, string(reason), o.at)
	_, err := s.execCounting(ctx, c, insert.OnConflict(sql.DoNothing()))
	return err
}

func (s *sqlStore) execCounting(ctx context.Context, c *ent.Client, q sql.Querier) (int, error) {
	query, args := q.Query()
	res, err := c.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// buyNow is StrategySync's grab in one transaction: it checks the voucher and the user's
// existing order, decrements the stock only while it is positive and inserts the order, the
// unique (user, voucher, slot) index as the last line of defence.
func (s *sqlStore) buyNow(ctx context.Context, userID, voucherID int, now time.Time) (Admission, error) {
	tx, err := s.db.Tx(ctx)
	if err != nil {
		return Admission{}, err
	}
	a, err := s.buyIn(ctx, tx.Client(), userID, voucherID, now)
	if err != nil {
		_ = tx.Rollback()
		return a, err
	}
	return a, tx.Commit()
}

func (s *sqlStore) buyIn(ctx context.Context, c *ent.Client, userID, voucherID int, now time.Time) (Admission, error) {
	v, err := c.Voucher.Get(ctx, voucherID)
	if ent.IsNotFound(err) {
		return Admission{}, ErrNoSuchVoucher
	}
	if err != nil {
		return Admission{}, err
	}
	if v.Kind != voucher.KindSECKILL || v.BeginAt == nil || v.EndAt == nil {
		return Admission{}, ErrNoSuchVoucher
	}
	if err := (sale{status: v.Status, begin: *v.BeginAt, end: *v.EndAt}).refusalAt(now); err != nil {
		return Admission{}, err
	}
	prev, err := c.SeckillOrder.Query().
		Where(seckillorder.UserID(userID), seckillorder.VoucherID(voucherID), seckillorder.Slot(true)).
		Select(seckillorder.FieldID).First(ctx)
	if err == nil {
		return Admission{OrderID: int64(prev.ID), Status: StatusCreated}, ErrAlreadyPurchased
	}
	if !ent.IsNotFound(err) {
		return Admission{}, err
	}
	if v.Stock == nil || *v.Stock <= 0 {
		// A plain read suffices to refuse: the stock only goes down during a sale, and not
		// taking the row lock keeps the sold-out flood from queueing behind the buyers.
		return Admission{}, ErrSoldOut
	}
	return s.takeOne(ctx, c, userID, voucherID, now)
}

// takeOne takes a unit while the stock is positive and inserts the user's order.
func (s *sqlStore) takeOne(ctx context.Context, c *ent.Client, userID, voucherID int, now time.Time) (Admission, error) {
	n, err := c.Voucher.Update().Where(voucher.ID(voucherID), voucher.StockGT(0)).AddStock(-1).Save(ctx)
	if err != nil {
		return Admission{}, err
	}
	if n == 0 {
		return Admission{}, ErrSoldOut
	}
	id, err := s.ids.Next(ctx)
	if err != nil {
		return Admission{}, fmt.Errorf("seckill: order id: %w", err)
	}
	at := createdAt(now)
	err = c.SeckillOrder.Create().SetID(int(id)).SetUserID(userID).SetVoucherID(voucherID).
		SetStatus(seckillorder.StatusCREATED).SetSlot(true).SetCreatedAt(at).Exec(ctx)
	if ent.IsConstraintError(err) {
		return Admission{}, ErrAlreadyPurchased
	}
	if err != nil {
		return Admission{}, err
	}
	return Admission{OrderID: id, Status: StatusCreated, createdAt: at}, nil
}

// createdAt is the created_at stored for an order made at t: whole seconds, what MySQL's
// TIMESTAMP column keeps (MariaDB truncates, MySQL rounds), so that the grab's answer and a
// later read agree.
func createdAt(t time.Time) time.Time { return t.Truncate(time.Second) }
