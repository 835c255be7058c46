package bench

import (
	"context"
	"database/sql"

	"github.com/redis/go-redis/v9"
)

// SetHookAfterDrain makes the seckill scenario run fn after the order stream drained and
// before the checks, so a test can tamper with the state; it returns the undo.
func SetHookAfterDrain(fn func(ctx context.Context, db *sql.DB, rdb redis.UniversalClient, prefix string, voucherID int)) func() {
	testHookAfterDrain = fn
	return func() { testHookAfterDrain = nil }
}
