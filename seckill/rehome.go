package seckill

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/surgekit/surge/ent"
)

// When Redis loses state (a flush, a failover to a replica that lagged, an AOF that lost its
// tail) three things can reach the database that a healthy Redis never sends:
//   - an order whose id was issued before and is now another order's row (the id counter went
//     back): it is re-homed, stored under a fresh id with an alias from the id its user was told;
//   - an order of a user who already holds one of the voucher (the buyers hash forgot them): it
//     is superseded by that order, with an alias from its id to it, and its unit goes back;
//   - an order a consumer was writing when its entry vanished from the stream: it is recorded
//     FAILED (a rebuild may already have counted without it).
// The user finds each under the id they were told (Service.Order follows aliases), and every
// one is counted. None is acknowledged without a row, an alias, a dead letter or a FAILED row.

// maxRehomeTries bounds the fresh ids drawn for one re-homed order: a fresh id can itself be
// taken only while the id counter is behind, which a rebuild corrects.
const maxRehomeTries = 3

// standing is how an admitted order stands in the database.
type standing int

const (
	standsNowhere   standing = iota // no row, no alias: not written yet
	standsOwn                       // a live row under its own id, of its user and voucher
	standsElsewhere                 // an alias leads to a live order under another id
	standsFailed                    // recorded FAILED (under its id, or where its alias leads)
	standsTaken                     // its id is another order's row, and no alias leads anywhere
)

// trace is how one order stands.
type trace struct {
	standing   standing
	via        int64 // standsElsewhere: the order standing for it
	superseded bool  // standsElsewhere: the user's other order, not a re-homed copy
}

// Alias reasons, as stored.
const (
	aliasRehomed    = "REHOMED"
	aliasSuperseded = "SUPERSEDED"
)

type orderRow struct {
	user, voucher int
	failed        bool
}

type aliasKey struct {
	user int
	id   int64
}

type aliasRow struct {
	to                 int64
	superseded, failed bool
}

// traceOrders finds how each order of a voucher stands in the database: two queries for the
// whole batch (the rows under the orders' ids, the aliases from them).
func (s *Service) traceOrders(ctx context.Context, q sqlRunner, voucherID int, orders []order) ([]trace, error) {
	ids := make([]any, len(orders))
	for i, o := range orders {
		ids[i] = o.id
	}
	in := placeholders(len(orders))
	rows := map[int64]orderRow{}
	err := scanRows(ctx, q, "SELECT id, user_id, voucher_id, status FROM tb_voucher_order WHERE id IN ("+in+")", ids,
		func(r *sql.Rows) error {
			var id int64
			var row orderRow
			var status string
			err := r.Scan(&id, &row.user, &row.voucher, &status)
			row.failed = status == "FAILED"
			rows[id] = row
			return err
		})
	if err != nil {
		return nil, fmt.Errorf("seckill: reading orders: %w", err)
	}
	aliases := map[aliasKey]aliasRow{}
	err = scanRows(ctx, q, "SELECT a.user_id, a.admitted_id, a.order_id, a.reason, o.status FROM tb_voucher_order_alias a"+
		" JOIN tb_voucher_order o ON o.id = a.order_id WHERE a.voucher_id = ? AND a.admitted_id IN ("+in+")",
		append([]any{voucherID}, ids...),
		func(r *sql.Rows) error {
			var k aliasKey
			var a aliasRow
			var reason, status string
			err := r.Scan(&k.user, &k.id, &a.to, &reason, &status)
			a.superseded, a.failed = reason == aliasSuperseded, status == "FAILED"
			aliases[k] = a
			return err
		})
	if err != nil {
		return nil, fmt.Errorf("seckill: reading order aliases: %w", err)
	}
	out := make([]trace, len(orders))
	for i, o := range orders {
		out[i] = classify(o, voucherID, rows, aliases)
	}
	return out, nil
}

// classify tells how an order of a voucher stands, given the rows under the ids in question
// and the aliases from them.
func classify(o order, voucherID int, rows map[int64]orderRow, aliases map[aliasKey]aliasRow) trace {
	if a, ok := aliases[aliasKey{o.user, o.id}]; ok {
		if a.failed {
			return trace{standing: standsFailed}
		}
		return trace{standing: standsElsewhere, via: a.to, superseded: a.superseded}
	}
	row, ok := rows[o.id]
	switch {
	case !ok:
		return trace{standing: standsNowhere}
	case row.user != o.user || row.voucher != voucherID:
		return trace{standing: standsTaken}
	case row.failed:
		return trace{standing: standsFailed}
	}
	return trace{standing: standsOwn}
}

// rehomeIn settles, in tx, an order that could not be inserted under its id: if the user
// holds a live order of the voucher, the order is superseded by it; otherwise, if its id is
// another order's (taken), it is stored under a fresh id. Either way an alias leads from the
// id the user was told to the order standing for it.
func (s *Service) rehomeIn(ctx context.Context, tx *ent.Tx, voucherID int, o order, taken bool) (relinked, error) {
	existing, err := liveOrderOf(ctx, tx, o.user, voucherID)
	if err != nil {
		return relinked{}, err
	}
	if existing != 0 {
		s.log.Warn("order superseded by the user's existing order", "voucher", voucherID, "order", o.id, "existing", existing, "user", o.user)
		return relinked{order: o, to: existing, superseded: true}, s.insertAlias(ctx, tx, voucherID, o, existing, aliasSuperseded)
	}
	if !taken {
		return relinked{}, fmt.Errorf("seckill: order %d was neither inserted nor a duplicate", o.id)
	}
	id, err := s.freshRowIn(ctx, tx, voucherID, o, "CREATED")
	if err != nil {
		return relinked{}, err
	}
	s.log.Error("order id already taken by another order (Redis lost the id counter): order re-homed under a fresh id",
		"voucher", voucherID, "order", o.id, "new_id", id, "user", o.user)
	return relinked{order: o, to: id}, nil
}

// freshRowIn inserts the order's row with a status under a fresh id, and an alias from its
// own id to it; it returns the fresh id.
func (s *Service) freshRowIn(ctx context.Context, q sqlRunner, voucherID int, o order, status string) (int64, error) {
	// Its id was issued twice: the counter lost counts. Raise fences it above that id first.
	if err := s.ids.Raise(ctx, o.id); err != nil {
		return 0, fmt.Errorf("seckill: raising the order id counter above %d: %w", o.id, err)
	}
	for try := 0; try < maxRehomeTries; try++ {
		id, err := s.ids.Next(ctx)
		if err != nil {
			return 0, fmt.Errorf("seckill: a fresh id for order %d: %w", o.id, err)
		}
		moved := o
		moved.id = id
		n, err := s.insertOrders(ctx, q, voucherID, []order{moved}, status)
		if err != nil {
			return 0, err
		}
		if n == 1 {
			return id, s.insertAlias(ctx, q, voucherID, o, id, aliasRehomed)
		}
	}
	return 0, fmt.Errorf("seckill: no free id for order %d after %d fresh ids", o.id, maxRehomeTries)
}

// ensureFailedIn records an order FAILED unless it stands somewhere already: under its own
// id, or, if that id is another order's, under a fresh id that an alias leads to. It reports
// whether it wrote a record.
func (s *Service) ensureFailedIn(ctx context.Context, q sqlRunner, voucherID int, o order, tr trace) (bool, error) {
	switch tr.standing {
	case standsNowhere:
		n, err := s.insertOrders(ctx, q, voucherID, []order{o}, "FAILED")
		return n == 1, err
	case standsTaken:
		_, err := s.freshRowIn(ctx, q, voucherID, o, "FAILED")
		return err == nil, err
	}
	return false, nil
}

// recordFailed records an order given up on as FAILED (see ensureFailedIn), holding the
// voucher's row lock so that no batch commit lands meanwhile, and returns how it stood: an
// order that stands as a live order was persisted after all.
func (s *Service) recordFailed(ctx context.Context, voucherID int, o order) (trace, error) {
	var tr trace
	err := s.inVoucherTx(ctx, voucherID, func(tx *ent.Tx) error {
		traces, err := s.traceOrders(ctx, tx, voucherID, []order{o})
		if err != nil {
			return err
		}
		tr = traces[0]
		_, err = s.ensureFailedIn(ctx, tx, voucherID, o, tr)
		return err
	})
	return tr, err
}

// recordLost records FAILED the orders of a batch whose entries vanished from the stream
// while this consumer wrote them (Redis lost them: a flush, a restart without persistence, a
// failover): a rebuild may already have counted without them, so writing them now could
// oversell; dropping them would leave their users with an order id that leads nowhere. It
// checks again, holding the voucher's row lock, that each entry is gone and its order
// nowhere in the database, and returns how many it recorded.
func (s *Service) recordLost(ctx context.Context, voucherID int, gone []order) (int, error) {
	recorded := 0
	err := s.inVoucherTx(ctx, voucherID, func(tx *ent.Tx) error {
		recorded = 0
		present, err := s.inStream(ctx, s.keys(voucherID).Orders, gone)
		if err != nil {
			return err
		}
		traces, err := s.traceOrders(ctx, tx, voucherID, gone)
		if err != nil {
			return err
		}
		for i, o := range gone {
			if present[i] {
				continue
			}
			wrote, err := s.ensureFailedIn(ctx, tx, voucherID, o, traces[i])
			if err != nil {
				return err
			}
			if wrote {
				recorded++
				s.log.Error("order lost with Redis's state while being written: recorded FAILED",
					"voucher", voucherID, "order", o.id, "user", o.user)
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	s.m.lost.Add(float64(recorded))
	return recorded, nil
}

// inVoucherTx runs fn in a transaction that holds the voucher's row lock (MySQL) and commits
// it if fn succeeds. With SQLite the caller serialises on the voucher's Redis lock instead.
func (s *Service) inVoucherTx(ctx context.Context, voucherID int, fn func(tx *ent.Tx) error) error {
	tx, err := s.db.Tx(ctx)
	if err != nil {
		return err
	}
	if s.opts.Dialect == "mysql" {
		if err := lockRowIn(ctx, tx, voucherID); err != nil {
			_ = tx.Rollback()
			return err
		}
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// insertAlias writes the alias from the id a user was told to the order standing for it.
func (s *Service) insertAlias(ctx context.Context, q sqlRunner, voucherID int, o order, to int64, reason string) error {
	_, err := q.ExecContext(ctx, s.ignoringDuplicates(
		"INSERT INTO tb_voucher_order_alias (user_id, voucher_id, admitted_id, order_id, reason, created_at) VALUES (?, ?, ?, ?, ?, ?)"),
		o.user, voucherID, o.id, to, reason, o.at)
	return err
}

// liveOrderOf returns the user's live order of the voucher (the one holding the slot), or 0.
func liveOrderOf(ctx context.Context, q sqlRunner, userID, voucherID int) (int64, error) {
	var id int64
	err := scanRows(ctx, q, "SELECT id FROM tb_voucher_order WHERE user_id = ? AND voucher_id = ? AND slot = 1",
		[]any{userID, voucherID}, func(r *sql.Rows) error { return r.Scan(&id) })
	return id, err
}

// scanRows runs a query and calls each for every row.
func scanRows(ctx context.Context, q sqlRunner, query string, args []any, each func(*sql.Rows) error) error {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := each(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

func placeholders(n int) string { return strings.TrimSuffix(strings.Repeat("?,", n), ",") }
