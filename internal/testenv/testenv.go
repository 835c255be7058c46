// Package testenv connects tests to the real services `make test` starts: Redis on loopback
// (a single node and a local 3-master Redis Cluster) and MariaDB with a fresh database per test. Nothing here is a mock; a missing service fails
// the test with the command that starts it.
package testenv

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"math/big"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
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
		t.Fatalf("real Redis at %s is not answering (%v): run `make test` or scripts/ensure-redis.sh", RedisAddr(), err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// ClusterAddrs are the seed nodes of the real Redis Cluster the tests use
// (SURGE_TEST_REDIS_CLUSTER_ADDRS, comma-separated, default 127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103;
// scripts/ensure-redis-cluster.sh starts that cluster and prints the variable).
func ClusterAddrs() []string {
	var addrs []string
	for _, a := range strings.Split(env("SURGE_TEST_REDIS_CLUSTER_ADDRS", "127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103"), ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	return addrs
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
		t.Fatalf("real Redis Cluster at %s %s: run `make test` or scripts/ensure-redis-cluster.sh",
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

// MySQL creates a fresh database for the test and returns its DSN; the database is dropped
// when the test ends.
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
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := admin.PingContext(ctx); err != nil {
		t.Fatalf("real MariaDB at %s is not answering (%v): run `make test` or scripts/ensure-mariadb.sh", cfg.Addr, err)
	}
	name := "surge_test_" + randHex(6)
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE `"+name+"` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		t.Fatalf("creating test database: %v", err)
	}
	t.Cleanup(func() {
		db, err := sql.Open("mysql", cfg.FormatDSN())
		if err == nil {
			_, _ = db.Exec("DROP DATABASE IF EXISTS `" + name + "`")
			_ = db.Close()
		}
	})
	cfg.DBName = name
	return cfg.FormatDSN()
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
	return c
}
