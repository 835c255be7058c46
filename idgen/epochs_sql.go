package idgen

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"time"
)

// DefaultEpochTable is the table SQLEpochs keeps its fences in unless told otherwise.
const DefaultEpochTable = "idgen_epochs"

// SQLEpochs is an EpochStore in a SQL database: MySQL/MariaDB (InnoDB) or SQLite, through
// database/sql with '?' placeholders. It keeps one row per name (a prefix under its
// namespace): the latest fence, whether a generator has claimed it, and when it was recorded.
// CreateTable creates the table if it does not exist.
//
// Holding a fence while it is applied is a write lock on its row (MySQL) or on the database
// (SQLite) for the length of one Redis call; it happens only when a counter is fenced.
type SQLEpochs struct {
	db    *sql.DB
	table string
}

var tableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// NewSQLEpochs returns an epoch store on db in table ("" for DefaultEpochTable).
func NewSQLEpochs(db *sql.DB, table string) (*SQLEpochs, error) {
	if db == nil {
		return nil, errors.New("idgen: NewSQLEpochs: nil database")
	}
	if table == "" {
		table = DefaultEpochTable
	}
	if !tableName.MatchString(table) {
		return nil, fmt.Errorf("idgen: epoch table name %q: letters, digits and underscores only", table)
	}
	return &SQLEpochs{db: db, table: table}, nil
}

// CreateTable creates the store's table if it does not exist.
func (s *SQLEpochs) CreateTable(ctx context.Context) error {
	_, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+s.table+` (
		name VARCHAR(191) NOT NULL PRIMARY KEY,
		fence BIGINT NOT NULL,
		claimed INTEGER NOT NULL DEFAULT 0,
		applied BIGINT NOT NULL DEFAULT 0,
		recorded_ms BIGINT NOT NULL
	)`)
	if err != nil {
		return fmt.Errorf("idgen: creating table %s: %w", s.table, err)
	}
	return nil
}

// Advance implements EpochStore: the row's fence stays if no one has claimed it and it is at
// least atLeast (concurrent callers share it), else it becomes max(fence + 1, atLeast),
// unclaimed. One UPDATE computes it, so concurrent calls serialise on the row. A name's first
// fence first creates its row, outside that transaction (seed).
func (s *SQLEpochs) Advance(ctx context.Context, name string, atLeast int64) (int64, error) {
	for attempt := 1; ; attempt++ {
		f, err := s.advance(ctx, name, atLeast)
		if !errors.Is(err, errNoRow) {
			return f, err
		}
		if attempt == 3 {
			return 0, fmt.Errorf("idgen: recording a first fence of %s: the row is not there after it was created", name)
		}
		if err := s.seed(ctx, name); err != nil {
			return 0, err
		}
	}
}

// errNoRow: a name has no row yet.
var errNoRow = errors.New("idgen: no fence row")

// seed creates a name's row, as a fence of 0 already claimed, so that the next advance gives
// atLeast. It runs alone (autocommit): a transaction that had found no row and then inserted
// one would hold a gap lock (InnoDB) while concurrent first fences of other names insert
// theirs, and two such transactions deadlock. Another caller may create the row first: its
// duplicate key is no failure, and the caller's next advance reads the row either way.
func (s *SQLEpochs) seed(ctx context.Context, name string) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO `+s.table+` (name, fence, claimed, applied, recorded_ms) VALUES (?, 0, 1, 0, ?)`,
		name, time.Now().UnixMilli())
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("idgen: recording a first fence of %s: %w", name, err)
	}
	return nil // a duplicate, or a failure the next advance reports
}

func (s *SQLEpochs) advance(ctx context.Context, name string, atLeast int64) (fence int64, err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	// MySQL evaluates SET left to right with the new values: fence first, so its CASE still
	// reads the old claimed; claimed takes a constant.
	_, err = tx.ExecContext(ctx, `UPDATE `+s.table+` SET
		fence = CASE WHEN claimed = 0 AND fence >= ? THEN fence WHEN fence + 1 > ? THEN fence + 1 ELSE ? END,
		claimed = 0, recorded_ms = ? WHERE name = ?`, atLeast, atLeast, atLeast, time.Now().UnixMilli(), name)
	if err != nil {
		return 0, fmt.Errorf("idgen: advancing fence of %s: %w", name, err)
	}
	err = tx.QueryRowContext(ctx, `SELECT fence FROM `+s.table+` WHERE name = ?`, name).Scan(&fence)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, errNoRow
	}
	if err != nil {
		return 0, fmt.Errorf("idgen: reading fence of %s: %w", name, err)
	}
	if err = tx.Commit(); err != nil {
		return 0, fmt.Errorf("idgen: recording fence of %s: %w", name, err)
	}
	return fence, nil
}

// Apply implements EpochStore: one statement claims the fence (committed at once, so that no
// one else applies it, even if this process dies after the Redis call), then a transaction
// whose first statement write-locks the row, only if it still holds the fence, runs apply and
// commits. If apply fails, the transaction stays open (the lock held) until holdUntil, in the
// background.
func (s *SQLEpochs) Apply(ctx context.Context, name string, fence int64, holdUntil time.Time, apply func(context.Context) error) error {
	res, err := s.db.ExecContext(ctx, `UPDATE `+s.table+` SET claimed = 1 WHERE name = ? AND fence = ? AND claimed = 0`, name, fence)
	if err != nil {
		return fmt.Errorf("idgen: claiming fence %d of %s: %w", fence, name, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return ErrFenceTaken
	}
	// The lock outlives ctx when apply fails (see below): the transaction has its own context.
	txCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	tx, err := s.db.BeginTx(txCtx, nil)
	if err != nil {
		cancel()
		return fmt.Errorf("idgen: holding fence %d of %s: %w", fence, name, err)
	}
	end := func(commit bool) error {
		defer cancel()
		if commit {
			return tx.Commit()
		}
		return tx.Rollback()
	}
	res, err = tx.ExecContext(ctx, `UPDATE `+s.table+` SET applied = applied + 1 WHERE name = ? AND fence = ?`, name, fence)
	if err != nil {
		_ = end(false)
		return fmt.Errorf("idgen: holding fence %d of %s: %w", fence, name, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		_ = end(false)
		return ErrFenceTaken
	}
	if err := apply(ctx); err != nil {
		go func() {
			time.Sleep(time.Until(holdUntil))
			_ = end(false)
		}()
		return err
	}
	if err := end(true); err != nil {
		return fmt.Errorf("idgen: releasing fence %d of %s: %w", fence, name, err)
	}
	return nil
}

// Latest implements EpochStore.
func (s *SQLEpochs) Latest(ctx context.Context, name string) (int64, error) {
	var fence int64
	err := s.db.QueryRowContext(ctx, `SELECT fence FROM `+s.table+` WHERE name = ?`, name).Scan(&fence)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("idgen: reading fence of %s: %w", name, err)
	}
	return fence, nil
}
