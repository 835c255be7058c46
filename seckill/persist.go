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
)

// order is one admitted order read from a stream.
type order struct {
	entry string // stream entry id
	id    int64
	user  int
	at    time.Time
}

// parseEntry reads the fields the admission script writes.
func parseEntry(m redis.XMessage) (order, error) {
	o := order{entry: m.ID}
	get := func(k string) (int64, error) {
		v, ok := m.Values[k].(string)
		if !ok {
			return 0, fmt.Errorf("entry %s has no field %q", m.ID, k)
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("entry %s: field %q = %q is not a positive integer", m.ID, k, v)
		}
		return n, nil
	}
	var err error
	if o.id, err = get("o"); err != nil {
		return o, err
	}
	u, err := get("u")
	if err != nil {
		return o, err
	}
	o.user = int(u)
	t, err := get("t")
	if err != nil {
		return o, err
	}
	o.at = time.UnixMilli(t).UTC()
	return o, nil
}

// errStockGuard means the database has fewer units than the batch needs: Redis admitted
// more than the database holds (someone lowered the database stock by hand, or Redis state
// was rebuilt from a stale read). Such orders fail; their units are not put back on sale.
var errStockGuard = errors.New("seckill: database stock lower than the orders admitted")

// errRedisUnavailable wraps a failure to talk to Redis in the middle of a batch: the batch is
// not retried entry by entry (each entry would fail the same way and count a failure against
// it); the reader waits for Redis and then retries its own pending entries.
var errRedisUnavailable = errors.New("seckill: Redis unavailable")

// notMine says some entries of a batch stopped being this consumer's while it wrote them:
// kept are still pending here; gone are in the stream no more (Redis lost them), the others
// were claimed by another consumer.
type notMine struct{ kept, gone []order }

func (e *notMine) Error() string {
	return "seckill: some entries are no longer pending with this consumer"
}

// settlement is what a batch leaves to settle in Redis, by how each order stands in the
// database.
type settlement struct {
	done     []order    // a row under the order's own id (written now or before)
	relinked []relinked // stands under another id (an alias leads there)
	failed   []order    // recorded FAILED before this delivery
	// New aliases this transaction wrote, for the metrics.
	rehomed, superseded int
}

// relinked is an order that stands under another order's id: re-homed under a fresh id, or
// superseded by the user's existing order of the voucher (then its unit goes back on sale).
type relinked struct {
	order      order
	to         int64
	superseded bool
}

func (st *settlement) empty() bool { return len(st.done)+len(st.relinked)+len(st.failed) == 0 }

// place files an order by how it stands in the database; false if it stands nowhere yet
// (or its id is another order's).
func (st *settlement) place(o order, tr trace) bool {
	switch tr.standing {
	case standsOwn:
		st.done = append(st.done, o)
	case standsElsewhere:
		st.relinked = append(st.relinked, relinked{order: o, to: tr.via, superseded: tr.superseded})
	case standsFailed:
		st.failed = append(st.failed, o)
	default:
		return false
	}
	return true
}

func (st *settlement) add(o settlement) {
	st.done = append(st.done, o.done...)
	st.relinked = append(st.relinked, o.relinked...)
	st.failed = append(st.failed, o.failed...)
	st.rehomed += o.rehomed
	st.superseded += o.superseded
}

// writeBatch persists orders of one voucher in one transaction: the rows are inserted,
// duplicates ignored, and the stock is decremented by the number of rows inserted, guarded
// by stock >= n. An order that was not inserted is sorted by what the database holds (see
// settleDuplicates): written before, re-homed under a fresh id because its id belongs to
// another order, superseded by the user's existing order, or FAILED before.
func (s *Service) writeBatch(ctx context.Context, voucherID int, orders []order) (st settlement, err error) {
	tx, err := s.db.Tx(ctx)
	if err != nil {
		return st, err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if s.opts.Dialect == "mysql" {
		// The voucher's row lock first: the insert's foreign-key check would otherwise take a
		// shared lock on the row that the stock update below must upgrade, and two transactions
		// doing that (another consumer, a rebuild's SELECT ... FOR UPDATE) deadlock.
		if err := lockRowIn(ctx, tx, voucherID); err != nil {
			return st, err
		}
	}
	inserted, err := s.insertOrders(ctx, tx, voucherID, orders, "CREATED")
	if err != nil {
		return st, err
	}
	st.done = orders
	if inserted < len(orders) {
		var moved int
		if st, moved, err = s.settleDuplicates(ctx, tx, voucherID, orders); err != nil {
			return st, err
		}
		inserted += moved
	}
	if inserted > 0 {
		res, err := tx.ExecContext(ctx, "UPDATE vouchers SET stock = stock - ?, updated_at = ? WHERE id = ? AND stock >= ?",
			inserted, time.Now().UTC(), voucherID, inserted)
		if err != nil {
			return st, err
		}
		if n, err := res.RowsAffected(); err != nil {
			return st, err
		} else if n != 1 {
			return st, errStockGuard
		}
	}
	if inserted > 0 || st.rehomed+st.superseded > 0 {
		// Holding the voucher's row lock, make sure the entries are still pending here: if
		// Redis lost the stream meanwhile, a rebuild has counted without them (it reads under
		// the same row lock), and an entry another consumer claimed is that one's to write.
		if err := s.stillMine(ctx, voucherID, orders); err != nil {
			return st, err
		}
	}
	if err := tx.Commit(); err != nil {
		return settlement{}, err
	}
	return st, nil
}

// insertOrders inserts the orders' rows with a status (CREATED holds the user's slot, FAILED
// does not), ignoring duplicate keys, and returns how many were inserted.
func (s *Service) insertOrders(ctx context.Context, q sqlRunner, voucherID int, orders []order, status string) (int, error) {
	slot := "1"
	if status == "FAILED" {
		slot = "NULL"
	}
	now := time.Now().UTC()
	var b strings.Builder
	b.WriteString("INSERT INTO tb_voucher_order (id, created_at, updated_at, user_id, voucher_id, status, slot) VALUES ")
	args := make([]any, 0, 5*len(orders))
	for i, o := range orders {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?, ?, ?, ?, ?, '" + status + "', " + slot + ")")
		args = append(args, o.id, o.at, now, o.user, voucherID)
	}
	res, err := q.ExecContext(ctx, s.ignoringDuplicates(b.String()), args...)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// ignoringDuplicates ends an INSERT so that a row whose unique key exists is skipped. Only
// duplicate keys are ignored (INSERT IGNORE would also swallow foreign-key and data errors);
// with MySQL's no-op update, a duplicate counts 0 affected rows.
func (s *Service) ignoringDuplicates(insert string) string {
	if s.opts.Dialect == "mysql" {
		return insert + " ON DUPLICATE KEY UPDATE id = id"
	}
	return insert + " ON CONFLICT DO NOTHING"
}

// settleDuplicates sorts a batch some of whose rows were not inserted, by how each order
// stands in the database (see traceOrders), writing what it takes in tx: an order whose id
// belongs to another order is re-homed; one whose id is free but could not be inserted lost
// to the user's other order of the voucher and is superseded by it. moved counts the rows
// inserted under fresh ids, which take stock.
func (s *Service) settleDuplicates(ctx context.Context, tx *ent.Tx, voucherID int, orders []order) (st settlement, moved int, err error) {
	traces, err := s.traceOrders(ctx, tx, voucherID, orders)
	if err != nil {
		return st, 0, err
	}
	for i, o := range orders {
		if st.place(o, traces[i]) {
			continue
		}
		r, err := s.rehomeIn(ctx, tx, voucherID, o, traces[i].standing == standsTaken)
		if err != nil {
			return st, 0, err
		}
		st.relinked = append(st.relinked, r)
		if r.superseded {
			st.superseded++
		} else {
			st.rehomed++
			moved++
		}
	}
	return st, moved, nil
}

// stillMine checks that the orders' entries are still pending with this consumer. If some
// are not, it returns *notMine: the ones still pending here, and those gone from the stream.
// A failure to ask Redis is errRedisUnavailable.
func (s *Service) stillMine(ctx context.Context, voucherID int, orders []order) error {
	stream := s.keys(voucherID).Orders
	pending, err := bounded(ctx, s.rdb, func(ctx context.Context) ([]redis.XPendingExt, error) {
		return s.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{
			Stream: stream, Group: s.opts.Group, Consumer: s.opts.Consumer,
			Start: orders[0].entry, End: orders[len(orders)-1].entry, Count: int64(len(orders)),
		}).Result()
	})
	if err != nil && !isNoGroup(err) {
		return fmt.Errorf("%w: checking pending orders: %w", errRedisUnavailable, err)
	}
	mine := make(map[string]bool, len(pending))
	for _, p := range pending {
		mine[p.ID] = true
	}
	nm := &notMine{}
	var others []order
	for _, o := range orders {
		if mine[o.entry] {
			nm.kept = append(nm.kept, o)
		} else {
			others = append(others, o)
		}
	}
	if len(others) == 0 {
		return nil
	}
	inStream, err := s.inStream(ctx, stream, others)
	if err != nil {
		return err
	}
	for i, o := range others {
		if inStream[i] {
			s.log.Warn("order entry claimed by another consumer; skipped here", "voucher", voucherID, "order", o.id, "entry", o.entry)
		} else {
			nm.gone = append(nm.gone, o)
		}
	}
	return nm
}

// inStream reports, for each order, whether the stream still holds its entry (the same entry
// id with the same order: after a flush, a new entry can get an old one's id).
func (s *Service) inStream(ctx context.Context, stream string, orders []order) ([]bool, error) {
	cmds, err := bounded(ctx, s.rdb, func(ctx context.Context) ([]*redis.XMessageSliceCmd, error) {
		cmds := make([]*redis.XMessageSliceCmd, len(orders))
		_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, o := range orders {
				cmds[i] = p.XRangeN(ctx, stream, o.entry, o.entry, 1)
			}
			return nil
		})
		return cmds, err
	})
	if cmds == nil || err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("%w: reading the stream: %w", errRedisUnavailable, err)
	}
	out := make([]bool, len(orders))
	for i, o := range orders {
		msgs, _ := cmds[i].Result()
		out[i] = len(msgs) == 1 && msgs[0].Values["o"] == strconv.FormatInt(o.id, 10)
	}
	return out, nil
}

func isNoGroup(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "NOGROUP") }

// sqlRunner is a transaction or the client: what the order store's raw queries run on.
type sqlRunner interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}
