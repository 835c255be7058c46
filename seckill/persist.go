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

// notMine says some entries of a batch stopped being this consumer's while it wrote them;
// kept are the ones still pending here.
type notMine struct{ kept []order }

func (e *notMine) Error() string {
	return "seckill: some entries are no longer pending with this consumer"
}

// superseded is an order the database refused because the user already holds another one of
// the voucher there.
type superseded struct {
	order    order
	existing int64
}

// writeBatch persists orders of one voucher in one transaction: the rows are inserted,
// duplicates ignored (an order id already there was persisted by an earlier delivery; a
// (user, voucher) already there is a superseded order), and the stock is decremented by the
// number of rows actually inserted, guarded by stock >= n. It returns the entries to settle:
// done (persisted now or before) and superseded ones.
func (s *Service) writeBatch(ctx context.Context, voucherID int, orders []order) (done []order, sup []superseded, err error) {
	tx, err := s.db.Tx(ctx)
	if err != nil {
		return nil, nil, err
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
			return nil, nil, err
		}
	}
	now := time.Now().UTC()
	var q strings.Builder
	q.WriteString("INSERT INTO tb_voucher_order (id, created_at, updated_at, user_id, voucher_id, status, slot) VALUES ")
	args := make([]any, 0, 6*len(orders))
	for i, o := range orders {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteString("(?, ?, ?, ?, ?, 'CREATED', 1)")
		args = append(args, o.id, o.at, now, o.user, voucherID)
	}
	if s.opts.Dialect == "mysql" {
		// Only duplicate keys are ignored (INSERT IGNORE would also swallow foreign-key and data
		// errors); with this no-op update, a duplicate counts 0 affected rows.
		q.WriteString(" ON DUPLICATE KEY UPDATE id = id")
	} else {
		q.WriteString(" ON CONFLICT DO NOTHING")
	}
	res, err := tx.ExecContext(ctx, q.String(), args...)
	if err != nil {
		return nil, nil, err
	}
	inserted, err := res.RowsAffected()
	if err != nil {
		return nil, nil, err
	}
	done = orders
	if int(inserted) < len(orders) {
		if done, sup, err = s.sortDuplicates(ctx, tx, voucherID, orders); err != nil {
			return nil, nil, err
		}
	}
	if inserted > 0 {
		res, err := tx.ExecContext(ctx, "UPDATE vouchers SET stock = stock - ?, updated_at = ? WHERE id = ? AND stock >= ?",
			inserted, now, voucherID, inserted)
		if err != nil {
			return nil, nil, err
		}
		if n, err := res.RowsAffected(); err != nil {
			return nil, nil, err
		} else if n != 1 {
			return nil, nil, errStockGuard
		}
		// Holding the voucher's row lock, make sure the entries are still pending here: if
		// Redis lost the stream meanwhile, a rebuild has counted without them (it reads under
		// the same row lock), and an entry another consumer claimed is that one's to write.
		if mine := s.stillMine(ctx, voucherID, orders); len(mine) != len(orders) {
			return nil, nil, &notMine{kept: mine}
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, nil, err
	}
	return done, sup, nil
}

// sortDuplicates splits a batch some of whose rows were not inserted: an order id that is in
// the table is done; one that is not lost to the user's other order of the voucher.
func (s *Service) sortDuplicates(ctx context.Context, tx *ent.Tx, voucherID int, orders []order) ([]order, []superseded, error) {
	ph := strings.TrimSuffix(strings.Repeat("?,", len(orders)), ",")
	args := make([]any, len(orders))
	for i, o := range orders {
		args[i] = o.id
	}
	present := map[int64][2]int64{} // id -> (user, voucher)
	rows, err := tx.QueryContext(ctx, "SELECT id, user_id, voucher_id FROM tb_voucher_order WHERE id IN ("+ph+")", args...)
	if err != nil {
		return nil, nil, err
	}
	for rows.Next() {
		var id, user, v int64
		if err := rows.Scan(&id, &user, &v); err != nil {
			rows.Close()
			return nil, nil, err
		}
		present[id] = [2]int64{user, v}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	var done []order
	var sup []superseded
	for _, o := range orders {
		if p, ok := present[o.id]; ok {
			if p != [2]int64{int64(o.user), int64(voucherID)} {
				// Never take another order's row for this one's: fail the batch, and the entry
				// fails alone on its own and is dead-lettered.
				return nil, nil, fmt.Errorf("seckill: order id %d is already taken by another order", o.id)
			}
			done = append(done, o)
			continue
		}
		var existing int64
		err := queryInts(ctx, tx, "SELECT id FROM tb_voucher_order WHERE user_id = ? AND voucher_id = ? AND slot = 1",
			[]any{o.user, voucherID}, func(id int64) { existing = id })
		if err != nil {
			return nil, nil, err
		}
		if existing == 0 {
			return nil, nil, fmt.Errorf("seckill: order %d was neither inserted nor a duplicate", o.id)
		}
		sup = append(sup, superseded{order: o, existing: existing})
	}
	return done, sup, nil
}

func queryInts(ctx context.Context, tx *ent.Tx, query string, args []any, each func(int64)) error {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return err
		}
		each(id)
	}
	return rows.Err()
}

// recordFailed writes a FAILED row for an order given up on, unless the order exists (then it
// was persisted after all and reports true). The row has a NULL slot, so it does not stop the
// user from buying again.
func (s *Service) recordFailed(ctx context.Context, voucherID int, o order) (persisted bool, err error) {
	var status sql.NullString
	rows, err := s.db.QueryContext(ctx, "SELECT status FROM tb_voucher_order WHERE id = ?", o.id)
	if err != nil {
		return false, err
	}
	for rows.Next() {
		if err := rows.Scan(&status); err != nil {
			rows.Close()
			return false, err
		}
	}
	rows.Close()
	if status.Valid {
		return status.String != "FAILED", nil
	}
	now := time.Now().UTC()
	_, err = s.db.ExecContext(ctx,
		"INSERT INTO tb_voucher_order (id, created_at, updated_at, user_id, voucher_id, status, slot) VALUES (?, ?, ?, ?, ?, 'FAILED', NULL)",
		o.id, o.at, now, o.user, voucherID)
	return false, err
}
