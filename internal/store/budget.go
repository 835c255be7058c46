package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	entsql "entgo.io/ent/dialect/sql"
)

// A Budget is the database time the statements of one request may take together: a request
// deadline alone lets a filter that no index bounds read a whole table for seconds, and
// aliases multiply such statements. The statements run through ent with a budgeted context
// (WithBudget) run one at a time, each under the time left as its limit: on MySQL and MariaDB
// the server's own (SET STATEMENT max_statement_time, MAX_EXECUTION_TIME; the request's
// deadline still applies when it is nearer), on SQLite an interruption (the driver interrupts
// a statement whose context ends). Each statement is charged the time the client waited for
// it: the call that sends it, and each fetch of its rows (the server's work on it runs then,
// with the network's and the driver's share), not the wait for a pooled connection nor what
// the caller does with each row (under a loaded CPU that was most of a cheap statement's time,
// and cut requests that had used no database CPU). A statement cut by the budget, and every
// statement after it, fails with ErrBudgetSpent. So the request's statements hold the
// database for about the budget at most, one core at a time. Statements inside a
// transaction are not charged (a budget is for reads), only bounded by the deadline.
type Budget struct {
	total time.Duration
	gate  chan struct{} // held by the statement that runs
	left  time.Duration // guarded by gate
}

// NewBudget returns a budget of d of database time.
func NewBudget(d time.Duration) *Budget {
	return &Budget{total: d, left: d, gate: make(chan struct{}, 1)}
}

// ErrBudgetSpent is the error of a statement stopped, or not run, because its request used up
// its database time budget.
var ErrBudgetSpent = errors.New("the request's database time budget is spent")

// IsBudgetSpent reports whether err is a statement stopped, or not run, by its budget.
func IsBudgetSpent(err error) bool { return errors.Is(err, ErrBudgetSpent) }

type budgetKey struct{}

// WithBudget returns ctx whose statements through ent draw on b.
func WithBudget(ctx context.Context, b *Budget) context.Context {
	return context.WithValue(ctx, budgetKey{}, b)
}

// WithoutBudget returns ctx whose statements draw on no budget: for a load that serves other
// requests too (a cache's, shared by every caller of a key).
func WithoutBudget(ctx context.Context) context.Context {
	return context.WithValue(ctx, budgetKey{}, (*Budget)(nil))
}

func budgetOf(ctx context.Context) *Budget {
	b, _ := ctx.Value(budgetKey{}).(*Budget)
	return b
}

// budgetDriver is ent's driver with budgets applied to the statements whose context has one.
type budgetDriver struct {
	*entsql.Driver
	mysql bool // the limit is the server's; else a context deadline
}

func (d *budgetDriver) Query(ctx context.Context, query string, args, v any) error {
	b := budgetOf(ctx)
	if b == nil {
		return d.Driver.Query(ctx, query, args, v)
	}
	s, err := d.start(ctx, b)
	if err != nil {
		return err
	}
	if err := s.timed(func() error { return (entsql.Conn{ExecQuerier: s.conn}).Query(s.ctx, query, args, v) }); err != nil {
		return s.end(err)
	}
	rows, ok := v.(*entsql.Rows)
	if !ok { // entsql.Conn.Query accepts nothing else
		return s.end(fmt.Errorf("store: unexpected rows %T", v))
	}
	rows.ColumnScanner = &budgetRows{ColumnScanner: rows.ColumnScanner, s: s}
	return nil
}

func (d *budgetDriver) Exec(ctx context.Context, query string, args, v any) error {
	b := budgetOf(ctx)
	if b == nil {
		return d.Driver.Exec(ctx, query, args, v)
	}
	s, err := d.start(ctx, b)
	if err != nil {
		return err
	}
	return s.end(s.timed(func() error { return (entsql.Conn{ExecQuerier: s.conn}).Exec(s.ctx, query, args, v) }))
}

// budgeted is one statement drawing on a budget.
type budgeted struct {
	b        *Budget
	conn     *sql.Conn
	ctx      context.Context
	cancel   context.CancelFunc
	waited   time.Duration // its charge so far
	byBudget bool          // the budget left, not the deadline, is its limit
	once     sync.Once
}

// timed runs a call that waits for the database, adding its time to the statement's charge.
func (s *budgeted) timed(call func() error) error {
	start := time.Now()
	err := call()
	s.waited += time.Since(start)
	return err
}

// start waits for the request's other statement to end, then takes a connection. With
// nothing left it fails at once: nothing is sent.
func (d *budgetDriver) start(ctx context.Context, b *Budget) (*budgeted, error) {
	select {
	case b.gate <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if b.left <= 0 {
		<-b.gate
		return nil, b.spent(nil)
	}
	conn, err := d.DB().Conn(ctx)
	if err != nil {
		<-b.gate
		return nil, err
	}
	s := &budgeted{b: b, conn: conn, ctx: ctx}
	deadline, bounded := deadlineLimit(ctx)
	s.byBudget = !bounded || b.left < deadline
	if d.mysql {
		s.ctx = context.WithValue(ctx, statementLimitKey{}, b.left)
	} else {
		s.ctx, s.cancel = context.WithTimeout(ctx, b.left)
	}
	return s, nil
}

// end charges the statement's time, gives its connection back and lets the next statement
// run; err, when the budget cut the statement, says so.
func (s *budgeted) end(err error) error {
	err = s.check(err)
	s.once.Do(func() {
		if IsBudgetSpent(err) {
			s.b.left = 0
		} else {
			s.b.left -= s.waited
		}
		if s.cancel != nil {
			s.cancel()
		}
		_ = s.conn.Close()
		<-s.b.gate
	})
	return err
}

// check makes err ErrBudgetSpent when the budget's limit is what stopped the statement: the
// server's time limit on MySQL, the interruption on SQLite.
func (s *budgeted) check(err error) error {
	if err == nil || !s.byBudget || IsBudgetSpent(err) {
		return err
	}
	if IsStatementTimeout(err) || s.cancel != nil && s.ctx.Err() == context.DeadlineExceeded {
		return s.b.spent(err)
	}
	return err
}

func (b *Budget) spent(cause error) error {
	if cause == nil {
		return fmt.Errorf("store: %w (%v)", ErrBudgetSpent, b.total)
	}
	return fmt.Errorf("store: %w (%v): %w", ErrBudgetSpent, b.total, cause)
}

// budgetRows charges its fetches to its statement and ends the statement when closed (ent
// always closes its rows); a cut that came while the rows were read is reported as the
// budget's.
type budgetRows struct {
	entsql.ColumnScanner
	s *budgeted
}

func (r *budgetRows) Next() bool {
	more := false
	_ = r.s.timed(func() error { more = r.ColumnScanner.Next(); return nil })
	return more
}

func (r *budgetRows) NextResultSet() bool {
	more := false
	_ = r.s.timed(func() error { more = r.ColumnScanner.NextResultSet(); return nil })
	return more
}

func (r *budgetRows) Err() error { return r.s.check(r.ColumnScanner.Err()) }

func (r *budgetRows) Close() error {
	err := r.s.timed(r.ColumnScanner.Close) // what the driver still reads of the result
	_ = r.s.end(r.ColumnScanner.Err())      // what stopped the rows, if anything
	return err
}
