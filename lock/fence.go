package lock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Execer runs a statement: *sql.DB, *sql.Tx and *sql.Conn are Execers.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// FenceArg stands for the fencing token among GuardedExec's arguments: pass it wherever the
// statement takes the token, as an ordinary ? argument. The query is never rewritten, so no
// SQL is parsed and quoting cannot go wrong.
var FenceArg fenceArg

type fenceArg struct{}

// GuardedExec runs a write guarded by a fencing token (Lock.Fence) and returns ErrStaleFence
// when it changed no row. The row keeps the token of its last writer in a column; the
// statement writes only if its token is not smaller, and stores it:
//
//	GuardedExec(ctx, db, "UPDATE stock SET qty = ?, fence = ? WHERE id = ? AND fence <= ?",
//		fence, qty, lock.FenceArg, id, lock.FenceArg)
//
// Every FenceArg in args is replaced by fence; at least one is required. A holder that lost
// its lock without noticing (a long GC pause, a stalled network, a Redis that lost its data)
// and writes late carries a smaller token than the holder after it, so its write is refused
// instead of overwriting newer work; the holder of the greatest token may write as often as
// it likes (<=, not <).
//
// MySQL/MariaDB report changed rows, not matched ones, by default: a write that sets every
// column to the value it already has reports 0 rows and is refused as stale although it
// matched. That errs on the safe side; to count matched rows instead, open the database with
// the driver's clientFoundRows=true. 0 rows also means the row does not exist.
//
// Prefer Lock.GuardedExec, which also refuses to write once the lock is no longer valid.
func GuardedExec(ctx context.Context, db Execer, query string, fence int64, args ...any) (sql.Result, error) {
	bound, err := bindFence(fence, args)
	if err != nil {
		return nil, err
	}
	res, err := db.ExecContext(ctx, query, bound...)
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

// bindFence is args with every FenceArg replaced by fence.
func bindFence(fence int64, args []any) ([]any, error) {
	bound := make([]any, len(args))
	fences := 0
	for i, a := range args {
		if _, ok := a.(fenceArg); ok {
			a = fence
			fences++
		}
		bound[i] = a
	}
	if fences == 0 {
		return nil, errors.New("lock: GuardedExec: no lock.FenceArg among the arguments: the write would not be guarded")
	}
	return bound, nil
}
