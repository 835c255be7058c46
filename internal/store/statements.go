package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/go-sql-driver/mysql"
)

// Statements on MySQL and MariaDB get two bounds besides the driver's own, which only abandons
// a statement on its side (it closes the connection when the context ends) and leaves it
// running on the server: a filter over a large table went on for seconds after its request
// had been cancelled or had answered TIMEOUT.
//
//   - A server-side time limit: a statement run under a context deadline (every request has
//     one) is sent with that deadline as the server's own limit, so the server stops it even
//     when the client cannot reach it any more. MariaDB: SET STATEMENT max_statement_time=s
//     FOR …, on SELECT, INSERT, UPDATE, DELETE, REPLACE and WITH; MySQL: the optimizer hint
//     MAX_EXECUTION_TIME(ms), which MySQL applies to SELECT only. The limit is the time left,
//     less a tenth of it (at most statementMargin): the server then ends the statement just
//     before the client would, with an error (ER_STATEMENT_TIMEOUT), and the connection stays
//     usable instead of being closed and opened again. A statement drawing on a request's
//     budget (budget.go) gets the budget's time left instead when that is less. Statements
//     without either (a migration waiting for its lock, the consumer's writes once
//     persisted) get none. A
//     statement prepared explicitly (DB.PrepareContext) keeps the limit of the context it was
//     prepared under: prepare without a deadline what is to be run more than once.
//   - A cancellation reaches the server: when the driver gives up a connection in the middle of
//     a statement (its context was cancelled: a client went away, the server shuts down), the
//     connection's thread is killed (KILL <id>) through a connection of its own, opened when
//     needed and closed after a minute unused.
const (
	statementMargin = 100 * time.Millisecond
	killTimeout     = 5 * time.Second
)

// Errors of a statement stopped by its server-side limit.
const (
	erStatementTimeout = 1969 // MariaDB ER_STATEMENT_TIMEOUT
	erQueryTimeout     = 3024 // MySQL ER_QUERY_TIMEOUT
)

// IsStatementTimeout reports whether err is a statement stopped by its server-side time
// limit: the request's deadline, as the server counted it.
func IsStatementTimeout(err error) bool {
	var my *mysql.MySQLError
	return errors.As(err, &my) && (my.Number == erStatementTimeout || my.Number == erQueryTimeout)
}

// mysqlConn is what go-sql-driver's connections implement, and so what the wrapper must.
type mysqlConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.QueryerContext
	driver.ExecerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
	driver.NamedValueChecker
}

// boundedConnector opens go-sql-driver connections that bound their statements (see above).
type boundedConnector struct {
	driver.Connector
	killer *sql.DB // one connection, opened when needed, on the plain connector
}

func newBoundedConnector(c driver.Connector) *boundedConnector {
	killer := sql.OpenDB(c)
	killer.SetMaxOpenConns(1)
	killer.SetMaxIdleConns(1)
	killer.SetConnMaxIdleTime(connMaxIdleTime)
	return &boundedConnector{Connector: c, killer: killer}
}

func (c *boundedConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	inner, ok := conn.(mysqlConn)
	if !ok {
		_ = conn.Close()
		return nil, fmt.Errorf("store: unexpected MySQL driver connection %T", conn)
	}
	b := &boundedConn{mysqlConn: inner, kill: c.kill}
	if err := b.identify(ctx); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return b, nil
}

// kill ends a server thread whose connection the driver gave up, in the background: Close
// must not wait for it. It is best effort (the thread may have ended already: "unknown thread
// id"); a statement with a deadline is also stopped by its server-side limit.
func (c *boundedConnector) kill(id uint64) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), killTimeout)
		defer cancel()
		_, _ = c.killer.ExecContext(ctx, "KILL "+strconv.FormatUint(id, 10))
	}()
}

func (c *boundedConnector) Close() error { return c.killer.Close() }

// boundedConn is one connection: its server thread id, and which server it talks to.
type boundedConn struct {
	mysqlConn
	id      uint64
	mariaDB bool
	kill    func(id uint64)
}

// identify reads the connection's thread id (for KILL) and the server's flavour (for the
// form of the time limit).
func (c *boundedConn) identify(ctx context.Context) error {
	rows, err := c.mysqlConn.QueryContext(ctx, "SELECT CONNECTION_ID(), VERSION()", nil)
	if err != nil {
		return fmt.Errorf("store: identifying a connection: %w", err)
	}
	defer rows.Close()
	v := make([]driver.Value, 2)
	if err := rows.Next(v); err != nil {
		return fmt.Errorf("store: identifying a connection: %w", err)
	}
	if c.id, err = strconv.ParseUint(text(v[0]), 10, 64); err != nil {
		return fmt.Errorf("store: connection id %q: %w", text(v[0]), err)
	}
	c.mariaDB = strings.Contains(text(v[1]), "MariaDB")
	return nil
}

func text(v driver.Value) string {
	if b, ok := v.([]byte); ok {
		return string(b)
	}
	return fmt.Sprint(v)
}

// Close kills the connection's server thread when the driver gave the connection up (it is
// no longer valid: a cancelled statement, a broken network), since the server may still be
// running its last statement; a connection closed in order just says goodbye.
func (c *boundedConn) Close() error {
	if !c.mysqlConn.IsValid() {
		c.kill(c.id)
	}
	return c.mysqlConn.Close()
}

func (c *boundedConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	return c.mysqlConn.QueryContext(ctx, c.limited(ctx, query), args)
}

func (c *boundedConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	return c.mysqlConn.ExecContext(ctx, c.limited(ctx, query), args)
}

// PrepareContext is where statements with arguments go when the DSN turns interpolateParams
// off (the driver skips QueryContext and ExecContext for them): the limit is part of the
// statement prepared for this one call.
func (c *boundedConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return c.mysqlConn.PrepareContext(ctx, c.limited(ctx, query))
}

// limited is query with its context's deadline, or its budget's time left when that is less,
// as the server's time limit; query itself when there is neither, or no limit for that kind
// of statement.
func (c *boundedConn) limited(ctx context.Context, query string) string {
	limit, ok := deadlineLimit(ctx)
	if budget, has := ctx.Value(statementLimitKey{}).(time.Duration); has && (!ok || budget < limit) {
		limit, ok = budget, true
	}
	if !ok {
		return query
	}
	return limitStatement(query, limit, c.mariaDB)
}

// statementLimitKey holds a statement's budget (budget.go) in its context.
type statementLimitKey struct{}

// deadlineLimit is the server-side limit that ctx's deadline gives a statement: the time
// left, less a tenth of it (at most statementMargin); false without a deadline, or past it
// (the driver refuses a statement then).
func deadlineLimit(ctx context.Context) (time.Duration, bool) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return 0, false
	}
	left := time.Until(deadline)
	if left <= 0 {
		return 0, false
	}
	return left - min(left/10, statementMargin), true
}

// limitStatement prefixes query with a server-side limit of d: MariaDB's SET STATEMENT on
// data statements, MySQL's MAX_EXECUTION_TIME hint (SELECT only).
func limitStatement(query string, d time.Duration, mariaDB bool) string {
	trimmed := strings.TrimLeftFunc(query, unicode.IsSpace)
	verb := trimmed
	if end := strings.IndexFunc(trimmed, func(r rune) bool { return !unicode.IsLetter(r) }); end >= 0 {
		verb = trimmed[:end]
	}
	verb = strings.ToUpper(verb)
	ms := max(d.Milliseconds(), 1)
	if !mariaDB {
		if verb != "SELECT" {
			return query
		}
		return fmt.Sprintf("SELECT /*+ MAX_EXECUTION_TIME(%d) */%s", ms, trimmed[len("SELECT"):])
	}
	switch verb {
	case "SELECT", "INSERT", "UPDATE", "DELETE", "REPLACE", "WITH":
		return fmt.Sprintf("SET STATEMENT max_statement_time=%d.%03d FOR %s", ms/1000, ms%1000, query)
	}
	return query
}
