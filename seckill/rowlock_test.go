package seckill_test

import (
	"context"
	stdsql "database/sql"

	_ "github.com/go-sql-driver/mysql"
	"sync"
	"testing"
	"time"

	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/seckill"
)

// TestWarmUnderRowLockWhileConsumersFillThePool: a warm holds the voucher's row lock in
// MySQL while it reads the database; the consumer's batches of the same voucher (one per
// stock bucket, one per process) wait on that row lock, each holding a pooled connection.
// When they take the whole pool, a warm that reads through the pool waits for a connection
// that only its own lock would free: before, it sat until MariaDB's lock wait timeout (50 s)
// failed the batches, and every grab that had to read the database meanwhile timed out
// ("reading voucher: context deadline exceeded", TestBucketMasterFlushed under a full make
// test). Now a warm reads through the connection that holds the lock.
func TestWarmUnderRowLockWhileConsumersFillThePool(t *testing.T) {
	rdb := testenv.Redis(t)
	e := newEnv(t, rdb)
	const pool, k = 2, 3
	e.db.SetMaxConns(pool)
	s := e.service(seckill.Options{})
	e.consume(s)
	v := e.bucketVoucher(300, k)
	ctx := context.Background()
	if err := s.Warm(ctx, v); err != nil {
		t.Fatal(err)
	}
	users := e.users(60)

	watch, err := stdsql.Open("mysql", e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close()
	watch.SetMaxOpenConns(1)

	var once sync.Once
	waiting := 0
	restore := seckill.SetWarmHeldHook(func() {
		once.Do(func() {
			// The warm holds the row lock and one connection: admit orders in every bucket,
			// and wait until the consumer's batches hold the rest of the pool, waiting on
			// that lock.
			for _, u := range users {
				if _, err := s.Grab(ctx, u, v); err != nil {
					t.Errorf("grab by user %d: %v", u, err)
				}
			}
			deadline := time.Now().Add(15 * time.Second)
			for waiting < pool-1 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
				waiting = lockWaits(t, watch)
			}
		})
	})
	defer restore()

	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	start := time.Now()
	if err := s.Warm(wctx, v); err != nil {
		t.Fatalf("warm while the consumer's batches wait on its row lock: %v after %v", err, time.Since(start).Round(time.Millisecond))
	}
	if waiting < pool-1 {
		t.Fatalf("%d transactions waited on the voucher's row lock during the warm, want the rest of the pool, %d", waiting, pool-1)
	}
	restore()
	e.bucketsDrained(v, k, 30*time.Second)
	if st := e.state(v); st.orders != len(users) || st.dbStock != 300-len(users) {
		t.Errorf("after the warm: %d orders, stock %d in MySQL; want %d, %d", st.orders, st.dbStock, len(users), 300-len(users))
	}
}

// lockWaits counts the statements of the test's database waiting on a row lock: the row-lock
// reads running (a user sees its own threads without the PROCESS privilege).
func lockWaits(t *testing.T, db *stdsql.DB) int {
	t.Helper()
	var n int
	err := db.QueryRow(`SELECT COUNT(*) FROM information_schema.PROCESSLIST
		WHERE DB = DATABASE() AND COMMAND = 'Query' AND INFO LIKE 'SELECT%FOR UPDATE%'`).Scan(&n)
	if err != nil {
		t.Errorf("counting lock waits: %v", err)
	}
	return n
}
