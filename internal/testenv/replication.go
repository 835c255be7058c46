package testenv

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Replication and failover of private servers: a replica, the lag that a failover can lose
// writes to, the promotion; and a private Cluster whose masters have replicas.

// admin runs fn with a short-lived client to r.
func (r *RedisServer) admin(fn func(ctx context.Context, c *redis.Client) error) error {
	c := redis.NewClient(&redis.Options{Addr: r.Addr, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return fn(ctx, c)
}

// Do runs one command on r (a fresh connection), failing the test on an error.
func (r *RedisServer) Do(args ...any) any {
	r.t.Helper()
	var v any
	err := r.admin(func(ctx context.Context, c *redis.Client) (err error) {
		v, err = c.Do(ctx, args...).Result()
		return err
	})
	if err != nil {
		r.t.Fatalf("%v on %s: %v", args, r.Addr, err)
	}
	return v
}

// info is the named section of INFO on r.
func (r *RedisServer) info(section string) string {
	r.t.Helper()
	s, _ := r.Do("info", section).(string)
	return s
}

// StartReplica starts a private redis-server replicating master and waits until it is in
// sync: its link is up, the master counts it online, and it acknowledged a write (WAIT). The
// master is set to sync at once (repl-diskless-sync-delay 0; Redis 7 waits 5 s by default for
// more replicas to join).
func StartReplica(t testing.TB, master *RedisServer, args ...string) *RedisServer {
	t.Helper()
	master.Do("config", "set", "repl-diskless-sync-delay", "0")
	host, port, _ := strings.Cut(master.Addr, ":")
	r := StartRedis(t, append([]string{"--replicaof", host, port}, args...)...)
	waitFor(t, 10*time.Second, func() error {
		if !strings.Contains(r.info("replication"), "master_link_status:up") {
			return fmt.Errorf("replica %s: link to %s not up", r.Addr, master.Addr)
		}
		if !strings.Contains(master.info("replication"), "state=online") {
			return fmt.Errorf("master %s: replica %s not online", master.Addr, r.Addr)
		}
		return nil
	})
	waitReplicated(t, master, 1, "testenv:replicated")
	return r
}

// waitReplicated writes key on master and waits until n replicas have it. After a diskless
// sync the master streams writes to a replica only once the replica's first ACK came (it
// sends one a second): until then a WAIT can take up to 1 s.
func waitReplicated(t testing.TB, master *RedisServer, n int, key string) {
	t.Helper()
	var acks int64
	err := master.admin(func(ctx context.Context, c *redis.Client) error {
		var wait *redis.IntCmd
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.Incr(ctx, key)
			wait = redis.NewIntCmd(ctx, "wait", n, 2000) // within go-redis' 3 s ReadTimeout
			return p.Process(ctx, wait)
		})
		acks = wait.Val()
		return err
	})
	if err != nil || acks < int64(n) {
		t.Fatalf("master %s: %d of %d replicas acknowledged a write in 2 s (%v)", master.Addr, acks, n, err)
	}
}

// Lag makes replica fall behind master for good: the replica is frozen (SIGSTOP) and the
// master drops its replication link (CLIENT KILL TYPE replica), so nothing written to master
// from now on reaches it. A frozen replica alone does not lag: what the master sends
// meanwhile waits in its socket buffer and is applied on SIGCONT.
func Lag(t testing.TB, master, replica *RedisServer) {
	t.Helper()
	replica.Freeze()
	master.Do("client", "kill", "type", "replica")
	if s := master.info("replication"); !strings.Contains(s, "connected_slaves:0") {
		t.Fatalf("master %s still has replicas after CLIENT KILL TYPE replica:\n%s", master.Addr, s)
	}
}

// Promote makes r a master, as a failover does: it is thawed and told REPLICAOF NO ONE.
func (r *RedisServer) Promote() {
	r.t.Helper()
	r.Thaw()
	r.Do("replicaof", "no", "one")
}

// BlockedClients is how many clients of r are blocked in a command (WAIT, BLPOP...).
func (r *RedisServer) BlockedClients() int {
	r.t.Helper()
	var n int
	for line := range strings.SplitSeq(r.info("clients"), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "blocked_clients:"); ok {
			_, _ = fmt.Sscan(v, &n)
		}
	}
	return n
}

// PrivateCluster is a throwaway Redis Cluster: masters, each with its replicas, on private
// servers a test may freeze, lag or kill.
type PrivateCluster struct {
	Masters  []*RedisServer
	Replicas [][]*RedisServer // Replicas[i] replicate Masters[i]
}

// StartCluster starts a private Redis Cluster of masters masters, each with replicas replicas,
// the slots split evenly among the masters in order, and waits until every node says
// cluster_state:ok and every replica is in sync. It takes a few seconds.
func StartCluster(t testing.TB, masters, replicas int) *PrivateCluster {
	t.Helper()
	node := func() *RedisServer {
		return StartRedis(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000",
			"--repl-diskless-sync-delay", "0")
	}
	pc := &PrivateCluster{}
	var all []*RedisServer
	for range masters {
		m := node()
		pc.Masters = append(pc.Masters, m)
		all = append(all, m)
	}
	for range masters {
		var rs []*RedisServer
		for range replicas {
			r := node()
			rs = append(rs, r)
			all = append(all, r)
		}
		pc.Replicas = append(pc.Replicas, rs)
	}
	host, port, _ := strings.Cut(all[0].Addr, ":")
	for _, n := range all[1:] {
		n.Do("cluster", "meet", host, port)
	}
	for i, m := range pc.Masters {
		m.Do("cluster", "addslotsrange", i*16384/masters, (i+1)*16384/masters-1)
	}
	waitFor(t, 20*time.Second, func() error {
		for _, n := range all {
			if s, _ := n.Do("cluster", "nodes").(string); strings.Count(strings.TrimSpace(s), "\n")+1 != len(all) {
				return fmt.Errorf("%s does not know every node yet", n.Addr)
			}
		}
		return nil
	})
	for i, m := range pc.Masters {
		id, _ := m.Do("cluster", "myid").(string)
		for _, r := range pc.Replicas[i] {
			r.Do("cluster", "replicate", id)
		}
	}
	waitFor(t, 30*time.Second, func() error {
		for _, n := range all {
			if s, _ := n.Do("cluster", "info").(string); !strings.Contains(s, "cluster_state:ok") {
				return fmt.Errorf("%s: not cluster_state:ok", n.Addr)
			}
		}
		for _, rs := range pc.Replicas {
			for _, r := range rs {
				if !strings.Contains(r.info("replication"), "master_link_status:up") {
					return fmt.Errorf("replica %s not in sync", r.Addr)
				}
			}
		}
		return nil
	})
	for i, m := range pc.Masters {
		waitReplicated(t, m, replicas, keyOn(t, m, i*16384/masters, (i+1)*16384/masters-1))
	}
	return pc
}

// keyOn is a key whose slot is in [first, last], found by asking node (CLUSTER KEYSLOT).
func keyOn(t testing.TB, node *RedisServer, first, last int) string {
	t.Helper()
	for i := 0; ; i++ {
		key := fmt.Sprintf("testenv:replicated:%d", i)
		if slot, _ := node.Do("cluster", "keyslot", key).(int64); int(slot) >= first && int(slot) <= last {
			return key
		}
	}
}

// Client returns a ClusterClient on the cluster (closed at cleanup); opts may be nil.
func (pc *PrivateCluster) Client(t testing.TB, opts *redis.ClusterOptions) *redis.ClusterClient {
	t.Helper()
	if opts == nil {
		opts = &redis.ClusterOptions{}
	}
	o := *opts
	for _, m := range pc.Masters {
		o.Addrs = append(o.Addrs, m.Addr)
	}
	c := redis.NewClusterClient(&o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// waitFor polls ready every 20 ms until it answers nil, failing the test with its last error
// after within.
func waitFor(t testing.TB, within time.Duration, ready func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := ready()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
