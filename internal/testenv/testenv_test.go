package testenv_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	_ "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/testenv"
)

// TestClusterContract spells out what Cluster promises the suites that run on it: three masters
// sharing all 16384 slots, one slot per hash tag, and different tags spread over the masters,
// so a script whose keys do not share a tag fails with CROSSSLOT instead of passing by luck.
func TestClusterContract(t *testing.T) {
	ctx := context.Background()
	rdb := testenv.Cluster(t)

	// The masters and the slot ranges each one serves.
	slots, err := rdb.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	masters := map[string]bool{}
	covered := 0
	for _, s := range slots {
		masters[s.Nodes[0].Addr] = true
		covered += s.End - s.Start + 1
	}
	if len(masters) != 3 || covered != 16384 {
		t.Fatalf("cluster has %d masters covering %d slots, want 3 masters covering 16384", len(masters), covered)
	}
	owner := func(slot int64) string {
		for _, s := range slots {
			if int64(s.Start) <= slot && slot <= int64(s.End) {
				return s.Nodes[0].Addr
			}
		}
		t.Fatalf("slot %d is not served", slot)
		return ""
	}
	keySlot := func(key string) int64 {
		t.Helper()
		n, err := rdb.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			t.Fatalf("CLUSTER KEYSLOT %s: %v", key, err)
		}
		return n
	}

	// Keys sharing a hash tag share a slot, whatever surrounds the tag.
	tagged := []string{"login:code:{13800000000}", "login:send:{13800000000}:gap", "login:send:{13800000000}:day"}
	for _, k := range tagged[1:] {
		if a, b := keySlot(tagged[0]), keySlot(k); a != b {
			t.Errorf("%s is in slot %d but %s in slot %d", tagged[0], a, k, b)
		}
	}

	// {a}, {b} and {c} land on three different masters.
	seen := map[string]string{}
	for _, k := range []string{"{a}", "{b}", "{c}"} {
		slot := keySlot(k)
		addr := owner(slot)
		if prev, dup := seen[addr]; dup {
			t.Errorf("%s (slot %d) and %s are both on %s, want them spread over the masters", k, slot, prev, addr)
		}
		seen[addr] = k
	}

	// The cluster enforces it: a script over two tags is refused, one over one tag runs.
	sfx := ":" + testenv.Phone()
	script := redis.NewScript(`redis.call('SET', KEYS[1], 1, 'PX', 10000) redis.call('SET', KEYS[2], 1, 'PX', 10000) return 1`)
	err = script.Run(ctx, rdb, []string{"testenv:{a}" + sfx, "testenv:{b}" + sfx}).Err()
	if err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Errorf("script over keys in two slots: got %v, want a CROSSSLOT error", err)
	}
	if err := script.Run(ctx, rdb, []string{"testenv:{a}:x" + sfx, "testenv:{a}:y" + sfx}).Err(); err != nil {
		t.Errorf("script over keys sharing a hash tag: %v", err)
	}
}

func TestEachRedisRunsSingleAndCluster(t *testing.T) {
	var ran []string
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		_, isCluster := rdb.(*redis.ClusterClient)
		ran = append(ran, t.Name()[strings.LastIndex(t.Name(), "/")+1:])
		if want := strings.HasSuffix(t.Name(), "/cluster"); isCluster != want {
			t.Errorf("%s got a %T", t.Name(), rdb)
		}
		if err := rdb.Ping(context.Background()).Err(); err != nil {
			t.Error(err)
		}
	})
	if strings.Join(ran, ",") != "single,cluster" {
		t.Fatalf("subtests ran: %v, want single,cluster", ran)
	}
}

// TestPrivateMySQL: a private MariaDB keeps its data over a stop and over a crash, refuses
// connections while down, and comes back on the same address.
func TestPrivateMySQL(t *testing.T) {
	m := testenv.PrivateMySQL(t)
	db, err := sql.Open("mysql", m.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxIdleConns(0)
	if _, err := db.Exec("CREATE TABLE t (id INT PRIMARY KEY) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	count := func() (int, error) {
		var n int
		err := db.QueryRow("SELECT COUNT(*) FROM t").Scan(&n)
		return n, err
	}
	for i, restart := range []func(){m.Stop, m.Kill} {
		if _, err := db.Exec("INSERT INTO t VALUES (?)", i); err != nil {
			t.Fatal(err)
		}
		restart()
		if _, err := count(); err == nil {
			t.Fatal("the private MariaDB answered while stopped")
		}
		m.Start()
		if n, err := count(); err != nil || n != i+1 {
			t.Fatalf("after restart %d: %d rows, %v; want %d", i, n, err, i+1)
		}
	}
}

// TestRedisServerRestart: with AOF (fsync always), a private redis-server keeps what it
// acknowledged over a graceful stop and over a crash.
func TestRedisServerRestart(t *testing.T) {
	r := testenv.StartRedis(t, "--appendonly", "yes", "--appendfsync", "always")
	c := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer c.Close()
	ctx := context.Background()
	for i, restart := range []func(){r.Term, r.Kill} {
		if err := c.Incr(ctx, "n").Err(); err != nil {
			t.Fatal(err)
		}
		restart()
		if c.Ping(ctx).Err() == nil {
			t.Fatal("redis answered while stopped")
		}
		r.Start()
		if n, err := c.Get(ctx, "n").Int(); err != nil || n != i+1 {
			t.Fatalf("after restart %d: n = %d, %v; want %d", i, n, err, i+1)
		}
	}
}
