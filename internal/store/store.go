// Package store opens the database (MySQL/MariaDB, or SQLite for the embedded default),
// migrates the schema and seeds demo data.
package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"github.com/go-sql-driver/mysql"
	"modernc.org/sqlite" // also registers driver "sqlite" (pure Go, no cgo)

	"github.com/surgekit/surge/ent"
	"github.com/surgekit/surge/ent/migrate"
	"github.com/surgekit/surge/idgen"
)

// DB is an ent client plus the *sql.DB under it (for health checks and raw batches).
type DB struct {
	Ent     *ent.Client
	SQL     *sql.DB
	Dialect string

	bounded *boundedConnector // MySQL: statements' time limits and kills
}

// Close closes the pool.
func (d *DB) Close() error {
	err := d.Ent.Close()
	if d.bounded != nil {
		err = errors.Join(err, d.bounded.Close())
	}
	return err
}

// Ping checks the database answers.
func (d *DB) Ping(ctx context.Context) error { return d.SQL.PingContext(ctx) }

// Opener makes the pool on a connector: sql.OpenDB (the default), or an instrumented one.
type Opener func(driver.Connector) *sql.DB

// opener is the last of open, or sql.OpenDB.
func opener(open []Opener) Opener {
	if len(open) > 0 && open[len(open)-1] != nil {
		return open[len(open)-1]
	}
	return sql.OpenDB
}

// dsnConnector opens connections of a driver that has no connector of its own.
type dsnConnector struct {
	dsn string
	drv driver.Driver
}

func (c dsnConnector) Connect(context.Context) (driver.Conn, error) { return c.drv.Open(c.dsn) }
func (c dsnConnector) Driver() driver.Driver                        { return c.drv }

// OpenSQLite opens (creating if needed) a SQLite file with foreign keys on, WAL and a busy
// timeout: without the last two, concurrent writers fail with SQLITE_BUSY.
func OpenSQLite(path string, open ...Opener) (*DB, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	dsn := "file:" + abs + "?_pragma=foreign_keys(1)&_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"
	db := opener(open)(dsnConnector{dsn: dsn, drv: &sqlite.Driver{}})
	db.SetMaxOpenConns(8)
	return wrap(db, dialect.SQLite), nil
}

// OpenMySQL opens a MySQL/MariaDB pool. parseTime, UTC and utf8mb4 are forced so that
// times and text round-trip whatever the DSN says. Arguments are interpolated by the driver
// (interpolateParams, unless the DSN sets it false): a statement with arguments is one round
// trip instead of a prepare, an execute and a close (see mysqlInterpolates). A statement run
// under a context deadline carries it as the server's time limit, and one whose context is
// cancelled while it runs is killed on the server (statements.go); stopping those takes one
// more connection, opened when needed.
func OpenMySQL(dsn string, open ...Opener) (*DB, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("store: invalid MySQL DSN: %w", err)
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	cfg.InterpolateParams = mysqlInterpolates(dsn)
	if err := cfg.Apply(mysql.Charset("utf8mb4", "utf8mb4_unicode_ci")); err != nil {
		return nil, fmt.Errorf("store: MySQL charset: %w", err)
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("store: MySQL connector: %w", err)
	}
	bounded := newBoundedConnector(conn)
	db := opener(open)(bounded)
	db.SetConnMaxLifetime(30 * time.Minute)
	db.SetConnMaxIdleTime(connMaxIdleTime)
	d := wrap(db, dialect.MySQL)
	d.bounded = bounded
	d.SetMaxConns(DefaultMaxConns)
	return d, nil
}

// mysqlInterpolates reports whether the driver should interpolate a DSN's statement arguments:
// yes unless the DSN turns it off. It is safe with the utf8mb4 connection charset forced here
// (the driver refuses it with the multibyte charsets where escaping is unsafe, and follows
// NO_BACKSLASH_ESCAPES). Measured with surge bench drain, interleaved with the prepared
// statements: the consumer wrote 46-67k rows/s against 44-48k, and its CPU per 1 000 rows
// fell from 8.2-10.2 to 6.4-8.6 ms.
func mysqlInterpolates(dsn string) bool {
	_, query, _ := strings.Cut(dsn, "?")
	values, err := url.ParseQuery(query)
	if err != nil {
		return true
	}
	on, err := strconv.ParseBool(values.Get("interpolateParams"))
	return err != nil || on // unset (ParseDSN has refused a value that is no boolean)
}

// DefaultMaxConns is the default bound of a MySQL pool. MariaDB and MySQL allow 151
// connections by default (max_connections): three servers then hold at most 96, and one more
// pool of this size (the test suite's, a tool's) still fits, with room for consoles.
const DefaultMaxConns = 32

// connMaxIdleTime closes connections left idle that long, so that a server past its peak gives
// them back to the database.
const connMaxIdleTime = time.Minute

// SetMaxConns bounds the pool to n open connections (n <= 0: DefaultMaxConns), all of which
// may stay idle until connMaxIdleTime: under load no connection is closed and reopened.
// Past n, queries wait for a free connection (bounded by their context).
func (d *DB) SetMaxConns(n int) {
	if n <= 0 {
		n = DefaultMaxConns
	}
	d.SQL.SetMaxOpenConns(n)
	d.SQL.SetMaxIdleConns(n)
}

func wrap(db *sql.DB, d string) *DB {
	drv := &budgetDriver{Driver: entsql.OpenDB(d, db), mysql: d == dialect.MySQL}
	return &DB{Ent: ent.NewClient(ent.Driver(drv)), SQL: db, Dialect: d}
}

// Migrate creates or updates the schema: columns and indexes are added, indexes the schema
// no longer declares are dropped, columns are never dropped. It also gives a new database its
// deployment id (DeploymentID).
func (d *DB) Migrate(ctx context.Context) error {
	unlock, err := d.migrationLock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if err := d.Ent.Schema.Create(ctx, migrate.WithDropIndex(true)); err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	if err := d.Epochs().CreateTable(ctx); err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	return d.ensureDeploymentID(ctx)
}

// Epochs is the deployment's store of id counter fences (idgen.SQLEpochs, table
// idgen.DefaultEpochTable, created by Migrate).
func (d *DB) Epochs() *idgen.SQLEpochs {
	s, err := idgen.NewSQLEpochs(d.SQL, "")
	if err != nil {
		panic(err) // only for a bad table name, and the default is good
	}
	return s
}

// migrationWait bounds how long a server waits for another one migrating the same database.
const migrationWait = 2 * time.Minute

// migrationLock serialises the migrations of one MySQL database (a named lock, GET_LOCK, held
// by one connection): ent's migration is not safe to run concurrently, and servers of a new
// deployment started together would fail with "table already exists". The lock is released
// when the migration ends, or when its connection does. SQLite needs none: its file is one
// process's embedded database.
func (d *DB) migrationLock(ctx context.Context) (unlock func(), err error) {
	if d.Dialect != dialect.MySQL {
		return func() {}, nil
	}
	conn, err := d.SQL.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: migrate: %w", err)
	}
	const name = "CONCAT('surge_migrate:', SHA1(DATABASE()))" // names are server-wide, ≤ 64 characters
	var got sql.NullInt64
	err = conn.QueryRowContext(ctx, "SELECT GET_LOCK("+name+", ?)", int(migrationWait.Seconds())).Scan(&got)
	if err == nil && got.Int64 != 1 {
		err = fmt.Errorf("another server has been migrating this database for over %v", migrationWait)
	}
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("store: migrate: waiting for the migration lock: %w", err)
	}
	return func() {
		_, _ = conn.ExecContext(context.Background(), "DO RELEASE_LOCK("+name+")")
		_ = conn.Close()
	}, nil
}
