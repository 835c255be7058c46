package store_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/surgekit/surge/internal/store"
	"github.com/surgekit/surge/internal/testenv"
)

// Issue 23, item 5: go-sql-driver gives a cancelled statement up on its side only (it closes
// the connection); the server ran on until the statement ended by itself. A statement whose
// context is cancelled must stop on the server too, and no other statement with it.
func TestCancelledStatementStopsOnTheServer(t *testing.T) {
	dsn := testenv.MySQL(t)
	db := mustOpen(t)(store.OpenMySQL(dsn))
	db.SetMaxConns(testenv.MySQLConns())
	watch := processList(t, dsn)
	marker := "cancelled_" + randomName()

	// A statement on another connection of the pool, running through the cancellation.
	bystander := make(chan error, 1)
	go func() {
		var interrupted int
		err := db.SQL.QueryRowContext(context.Background(), "SELECT SLEEP(2)").Scan(&interrupted)
		if err == nil && interrupted != 0 {
			err = errors.New("SLEEP(2) was interrupted")
		}
		bystander <- err
	}()

	ctx, cancel := context.WithCancel(context.Background()) // no deadline: no server-side limit
	done := make(chan error, 1)
	go func() {
		var x int
		done <- db.SQL.QueryRowContext(ctx, "SELECT SLEEP(60) AS "+marker).Scan(&x)
	}()
	watch.waitRunning(marker, 10*time.Second)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled statement returned %v", err)
	}
	start := time.Now()
	if !watch.waitGone(marker, 2*time.Second) {
		t.Fatalf("the cancelled statement still runs on the server %v after its cancellation", time.Since(start).Round(time.Millisecond))
	}
	t.Logf("the cancelled statement left the server's process list %v after its cancellation", time.Since(start).Round(time.Millisecond))
	if err := <-bystander; err != nil {
		t.Errorf("a statement on another connection: %v", err)
	}
	var one int
	if err := db.SQL.QueryRow("SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("the pool after a cancellation: %v", err)
	}
}

// A statement run under a deadline carries it to the server as the statement's own time limit:
// with the network frozen (neither the client's close nor a KILL can reach the server), the
// server still stops it at the deadline.
func TestStatementDeadlineIsTheServersLimit(t *testing.T) {
	dsn := testenv.MySQL(t)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewProxy(t, cfg.Addr)
	cfg.Addr = proxy.Addr
	db := mustOpen(t)(store.OpenMySQL(cfg.FormatDSN()))
	db.SetMaxConns(testenv.MySQLConns())
	watch := processList(t, dsn) // directly, not through the proxy
	marker := "deadline_" + randomName()

	const deadline = time.Second
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		var x int
		done <- db.SQL.QueryRowContext(ctx, "SELECT SLEEP(60) AS "+marker).Scan(&x)
	}()
	watch.waitRunning(marker, deadline)
	proxy.Freeze()
	defer proxy.Thaw()
	if err := <-done; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("statement past its deadline returned %v", err)
	}
	if !watch.waitGone(marker, deadline+2*time.Second-time.Since(start)) {
		t.Fatalf("the statement still runs on the server %v after it started, its deadline %v", time.Since(start).Round(time.Millisecond), deadline)
	}
	t.Logf("the statement was gone from the server when checked %v after it started (deadline %v)", time.Since(start).Round(time.Millisecond), deadline)
}

// Without the network in the way, the server's limit comes first (it is the time left less a
// margin): the statement fails with the server's timeout error, and its connection stays in
// the pool instead of being closed and killed. Three tries, for a machine so loaded that the
// client's deadline could come first once.
func TestStatementTimeoutKeepsTheConnection(t *testing.T) {
	db := mustOpen(t)(store.OpenMySQL(testenv.MySQL(t)))
	db.SetMaxConns(1)
	var x int
	if err := db.SQL.QueryRow("SELECT 1").Scan(&x); err != nil {
		t.Fatal(err)
	}
	for try := 1; ; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := db.SQL.QueryRowContext(ctx, "SELECT SLEEP(?)", 60).Scan(&x) // prepared: the other path
		cancel()
		if store.IsStatementTimeout(err) {
			if st := db.SQL.Stats(); st.OpenConnections != 1 || try == 1 && st.MaxIdleClosed+st.MaxIdleTimeClosed+st.MaxLifetimeClosed != 0 {
				t.Errorf("pool after a statement timeout: %+v", st)
			}
			return
		}
		if !errors.Is(err, context.DeadlineExceeded) || try == 3 {
			t.Fatalf("SLEEP(60) under a 1 s deadline, try %d: %v; want the server's timeout error", try, err)
		}
	}
}

type processes struct {
	t  *testing.T
	db *sql.DB
}

// processList watches the server's statements through a connection of its own.
func processList(t *testing.T, dsn string) processes {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = db.Close() })
	return processes{t: t, db: db}
}

// running reports whether a statement holding marker runs on the server.
func (p processes) running(marker string) bool {
	p.t.Helper()
	var n int
	err := p.db.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE ? AND ID <> CONNECTION_ID()",
		"%"+marker+"%").Scan(&n)
	if err != nil {
		p.t.Fatal(err)
	}
	return n > 0
}

func (p processes) waitRunning(marker string, within time.Duration) {
	p.t.Helper()
	for deadline := time.Now().Add(within); !p.running(marker); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			p.t.Fatalf("statement %s not running on the server within %v", marker, within)
		}
	}
}

func (p processes) waitGone(marker string, within time.Duration) bool {
	p.t.Helper()
	for deadline := time.Now().Add(within); p.running(marker); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

func randomName() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Arguments are interpolated by the driver: a statement with arguments is one round trip (no
// server-side prepare), and what it sends comes back byte for byte. A DSN that turns
// interpolateParams off gets prepared statements.
func TestStatementArgumentsAreInterpolated(t *testing.T) {
	dsn := testenv.MySQL(t)
	prepares := func(t *testing.T, dsn string) int {
		db := mustOpen(t)(store.OpenMySQL(dsn))
		db.SetMaxConns(1)
		ctx := context.Background()
		conn, err := db.SQL.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		count := func() int {
			var name string
			var n int
			if err := conn.QueryRowContext(ctx, "SHOW SESSION STATUS LIKE 'Com_stmt_prepare'").Scan(&name, &n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		before := count()
		tricky := "it's \\ \"quoted\" \x00 ü 漢字 😀 ' OR '1'='1"
		var back string
		var when time.Time
		at := time.Date(2026, 11, 28, 9, 42, 22, 0, time.UTC)
		if err := conn.QueryRowContext(ctx, "SELECT ?, CAST(? AS DATETIME)", tricky, at).Scan(&back, &when); err != nil {
			t.Fatal(err)
		}
		if back != tricky {
			t.Fatalf("sent %q, read back %q", tricky, back)
		}
		if !when.Equal(at) {
			t.Fatalf("sent %v, read back %v", at, when)
		}
		return count() - before
	}
	if n := prepares(t, dsn); n != 0 {
		t.Errorf("a statement with arguments prepared %d statements on the server, want 0 (interpolated)", n)
	}
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	if n := prepares(t, dsn+sep+"interpolateParams=false"); n != 1 {
		t.Errorf("with interpolateParams=false: %d statements prepared, want 1", n)
	}
}
