// Package testenv connects tests to the real services `make test` starts: Redis on loopback
// (a single node and a local 3-master Redis Cluster) and MariaDB with a fresh database per test. Nothing here is a mock; a missing service fails
// the test with the command that starts it.
package testenv

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/commalist"
)

func env(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// RedisAddr is the real Redis the tests use (SURGE_TEST_REDIS_ADDR, default 127.0.0.1:6379).
func RedisAddr() string { return env("SURGE_TEST_REDIS_ADDR", "127.0.0.1:6379") }

// Redis returns a client to the real Redis. Tests share it, so they use unique keys (see Phone).
func Redis(t testing.TB) redis.UniversalClient {
	t.Helper()
	c := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{RedisAddr()}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("real Redis at %s is not answering (%v): start it with scripts/ensure-redis.sh", RedisAddr(), err)
	}
	t.Cleanup(func() { _ = c.Close() })
	TrackKeys(t, c)
	return c
}

// ClusterAddrs are the seed nodes of the real Redis Cluster the tests use
// (SURGE_TEST_REDIS_CLUSTER_ADDRS, comma-separated, default 127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103;
// scripts/ensure-redis-cluster.sh starts that cluster and prints the variable).
func ClusterAddrs() []string {
	return commalist.Split(env("SURGE_TEST_REDIS_CLUSTER_ADDRS", "127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103"))
}

// Cluster returns a Cluster client to the real Redis Cluster, after checking that every master
// answers and reports cluster_state:ok. Tests share it, so they use unique keys (see Phone).
// Multi-key commands and scripts must keep their keys in one hash slot, or the cluster answers
// CROSSSLOT.
func Cluster(t testing.TB) redis.UniversalClient {
	t.Helper()
	addrs := ClusterAddrs()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	fail := func(format string, args ...any) {
		t.Helper()
		_ = c.Close()
		t.Fatalf("real Redis Cluster at %s %s: start it with scripts/ensure-redis-cluster.sh",
			strings.Join(addrs, ","), fmt.Sprintf(format, args...))
	}
	if err := c.Ping(ctx).Err(); err != nil {
		fail("is not answering (%v)", err)
	}
	err := c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		info, err := node.ClusterInfo(ctx).Result()
		if err != nil {
			return fmt.Errorf("%s: CLUSTER INFO: %w", node.Options().Addr, err)
		}
		if !strings.Contains(info, "cluster_state:ok") {
			return fmt.Errorf("%s: CLUSTER INFO does not say cluster_state:ok", node.Options().Addr)
		}
		return nil
	})
	if err != nil {
		fail("is not healthy (%v)", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	TrackKeys(t, c)
	return c
}

// EachRedis runs fn twice, as the subtests "single" (on Redis) and "cluster" (on Cluster), so a
// suite proves it works on a single node and on Redis Cluster alike.
func EachRedis(t *testing.T, fn func(t *testing.T, rdb redis.UniversalClient)) {
	t.Helper()
	t.Run("single", func(t *testing.T) { fn(t, Redis(t)) })
	t.Run("cluster", func(t *testing.T) { fn(t, Cluster(t)) })
}

// baseDSN points at the server with a user allowed to create surge_* databases
// (SURGE_TEST_MYSQL_DSN; scripts/ensure-mariadb.sh creates that user).
func baseDSN() string {
	return env("SURGE_TEST_MYSQL_DSN", "surge:surge@tcp(127.0.0.1:3306)/surge_test?parseTime=true")
}

// ExampleServices points the libraries' examples, which read REDIS_ADDR and MYSQL_DSN as their
// reader's program would, at the test suite's Redis and database. Call it from an init of the
// examples' test package.
func ExampleServices() {
	_ = os.Setenv("REDIS_ADDR", RedisAddr())
	_ = os.Setenv("MYSQL_DSN", baseDSN())
}

// MySQLConns is the most connections one pool of a test may open (SURGE_TEST_MYSQL_CONNS,
// default 6). go test runs two packages at once here and a test runs up to three servers, so
// the whole suite stays near 2 × 3 × 6 plus admin connections: it passes on a MariaDB with
// max_connections=80 that another client shares.
func MySQLConns() int {
	if n, err := strconv.Atoi(os.Getenv("SURGE_TEST_MYSQL_CONNS")); err == nil && n > 0 {
		return n
	}
	return 6
}

// staleOnce: one sweep of leftovers per test process is enough.
var staleOnce sync.Once

// staleAfter is the age past which a surge_test_* database is a crashed run's leftover.
const staleAfter = time.Hour

// MySQL creates a fresh database for the test and returns its DSN; the database is dropped
// when the test ends, failed or not. Databases a crashed run left behind (older than an hour)
// are dropped on the way. A server out of connections (Error 1040) is retried for a while
// before the test fails with what it said.
func MySQL(t testing.TB) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(baseDSN())
	if err != nil {
		t.Fatalf("SURGE_TEST_MYSQL_DSN: %v", err)
	}
	cfg.ParseTime = true
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	admin.SetMaxOpenConns(1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	name := fmt.Sprintf("surge_test_%d_%s", time.Now().Unix(), randHex(4)) // the time lets a later run tell a leftover
	create := func() error {
		_, err := admin.ExecContext(ctx, "CREATE DATABASE `"+name+"` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
		return err
	}
	if err := retryTooMany(ctx, create); err != nil {
		t.Fatalf("real MariaDB at %s: creating a test database: %v (start it with scripts/ensure-mariadb.sh)", cfg.Addr, err)
	}
	staleOnce.Do(func() { dropStale(ctx, admin) })
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		db, err := sql.Open("mysql", cfg.FormatDSN())
		if err != nil {
			return
		}
		defer db.Close()
		drop := func() error { _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`"); return err }
		if err := retryTooMany(ctx, drop); err != nil {
			t.Logf("testenv: dropping %s: %v", name, err)
		}
	})
	cfg.DBName = name
	return cfg.FormatDSN()
}

// retryTooMany runs fn until it succeeds, fails with another error than "too many
// connections" (1040, or 1203 for a user's limit), or ctx ends.
func retryTooMany(ctx context.Context, fn func() error) error {
	for pause := 50 * time.Millisecond; ; pause = min(2*pause, time.Second) {
		err := fn()
		var me *mysql.MySQLError
		if err == nil || !errors.As(err, &me) || (me.Number != 1040 && me.Number != 1203) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (still after %v)", err, context.Cause(ctx))
		case <-time.After(pause):
		}
	}
}

// dropStale drops surge_test_<unix seconds>_* databases older than staleAfter (a killed test
// run cannot clean up). Another run's young databases are left alone. Only the name is read:
// a join of information_schema's SCHEMATA and TABLES while other tests drop databases crashed
// MariaDB 10.11 (signal 11).
func dropStale(ctx context.Context, admin *sql.DB) {
	rows, err := admin.QueryContext(ctx, `SHOW DATABASES LIKE 'surge\\_test\\_%'`)
	if err != nil {
		return
	}
	var stale []string
	for rows.Next() {
		var name string
		if rows.Scan(&name) != nil {
			continue
		}
		created, _, ok := strings.Cut(strings.TrimPrefix(name, "surge_test_"), "_")
		if sec, err := strconv.ParseInt(created, 10, 64); ok && err == nil && time.Since(time.Unix(sec, 0)) > staleAfter {
			stale = append(stale, name)
		}
	}
	rows.Close()
	for _, n := range stale {
		_, _ = admin.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+n+"`")
	}
}

// Phone returns a random valid phone number so tests sharing one Redis never collide.
func Phone() string {
	n, _ := rand.Int(rand.Reader, big.NewInt(1_000_000_000))
	return fmt.Sprintf("19%09d", n.Int64())
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return strings.ToLower(hex.EncodeToString(b))
}

// Another returns a new client of the same kind and target as rdb, with its own connections:
// what another process of the same deployment would have. It is closed at cleanup.
func Another(t testing.TB, rdb redis.UniversalClient) redis.UniversalClient {
	t.Helper()
	var c redis.UniversalClient
	switch r := rdb.(type) {
	case *redis.ClusterClient:
		c = redis.NewClusterClient(&redis.ClusterOptions{Addrs: r.Options().Addrs})
	case *redis.Client:
		c = redis.NewClient(&redis.Options{Addr: r.Options().Addr})
	default:
		t.Fatalf("testenv.Another: unexpected client %T", rdb)
	}
	t.Cleanup(func() { _ = c.Close() })
	TrackKeys(t, c)
	return c
}
