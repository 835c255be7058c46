package lock

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// Execer runs a statement: *sql.DB, *sql.Tx and *sql.Conn are Execers.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// GuardedExec runs a write guarded by a fencing token (Lock.Fence) and returns ErrStaleFence
// when it changed no row. The row keeps the token of its last writer in a column; the
// statement writes only if its token is not smaller, and stores it:
//
//	UPDATE stock SET qty = ?, fence = :fence WHERE id = ? AND fence <= :fence
//
// Every :fence in query is bound to fence (as a ? parameter, in place); the ? placeholders
// take args in order. A holder that lost its lock without noticing (a long GC pause, a stalled
// network, a Redis that lost its data) and writes late carries a smaller token than the
// holder after it, so its write is refused instead of overwriting newer work; the holder of
// the greatest token may write as often as it likes (<=, not <).
//
// MySQL/MariaDB report changed rows, not matched ones, by default: a write that sets every
// column to the value it already has reports 0 rows and is refused as stale although it
// matched. That errs on the safe side; to count matched rows instead, open the database with
// the driver's clientFoundRows=true. 0 rows also means the row does not exist.
//
// Prefer Lock.GuardedExec, which also refuses to write once the lock is no longer valid.
func GuardedExec(ctx context.Context, db Execer, query string, fence int64, args ...any) (sql.Result, error) {
	q, bound, err := bindFence(query, fence, args)
	if err != nil {
		return nil, err
	}
	res, err := db.ExecContext(ctx, q, bound...)
	if err != nil {
		return nil, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return res, err
	}
	if n == 0 {
		return res, fmt.Errorf("%w: fence %d", ErrStaleFence, fence)
	}
	return res, nil
}

// GuardedExec is the package's GuardedExec with the lock's fence (its first name's, for a
// multi-lock), run only while the lock is Valid: a lock whose lease has run out (the holder
// was paused past it, say) returns an ErrLockLost and writes nothing, even before its
// Context is cancelled.
//
// Between that check and the write reaching the database the holder can still be paused, the
// lock expire and a new holder write: that window is what the fence closes, since the new
// holder's token is greater and its write makes this one stale.
func (l *Lock) GuardedExec(ctx context.Context, db Execer, query string, args ...any) (sql.Result, error) {
	if !l.Valid() {
		if l == nil {
			return nil, ErrNotOwner
		}
		return nil, lost("%s is no longer valid: not writing", l.Name())
	}
	return GuardedExec(ctx, db, query, l.Fence(), args...)
}

// bindFence turns every :fence into ? bound to fence and interleaves it with args, skipping
// quoted strings and identifiers.
func bindFence(query string, fence int64, args []any) (string, []any, error) {
	const marker = ":fence"
	var b strings.Builder
	bound := make([]any, 0, len(args)+2)
	next, fences := 0, 0
	var quote byte
	for i := 0; i < len(query); i++ {
		ch := query[i]
		switch {
		case quote != 0:
			if ch == '\\' && quote != '`' && i+1 < len(query) {
				b.WriteByte(ch)
				i++
				ch = query[i]
			} else if ch == quote {
				quote = 0
			}
		case ch == '\'' || ch == '"' || ch == '`':
			quote = ch
		case ch == '?':
			if next >= len(args) {
				return "", nil, fmt.Errorf("lock: GuardedExec: more ? than args (%d)", len(args))
			}
			bound = append(bound, args[next])
			next++
		case strings.HasPrefix(query[i:], marker) && !isIdent(query, i+len(marker)):
			b.WriteByte('?')
			bound = append(bound, fence)
			fences++
			i += len(marker) - 1
			continue
		}
		b.WriteByte(ch)
	}
	if next != len(args) {
		return "", nil, fmt.Errorf("lock: GuardedExec: %d args for %d ? placeholders", len(args), next)
	}
	if fences == 0 {
		return "", nil, fmt.Errorf("lock: GuardedExec: query has no :fence")
	}
	return b.String(), bound, nil
}

func isIdent(s string, i int) bool {
	if i >= len(s) {
		return false
	}
	c := s[i]
	return c == '_' || c == '$' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}
