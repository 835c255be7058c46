package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/commalist"
	"github.com/surgekit/surge/redisfailover"
)

// The failover setups: a Redis Cluster of 3 masters with a replica each, and a master with a
// replica watched by three Sentinels, which scripts/ensure-redis-failover.sh starts (make test
// does, through with-redis-failover.sh) and which tests may break: kill a master, fail it over,
// make its replica lag. A test holds a setup alone for its duration (a file lock shared by every
// test process), and the setup is made whole again when it ends (the killed node started again as
// a replica of the promoted one).

// ReplicaClusterAddrs are the seed nodes of the Cluster with replicas
// (SURGE_TEST_REDIS_REPLICA_CLUSTER_ADDRS, default 127.0.0.1:7111-7116).
func ReplicaClusterAddrs() []string {
	return commalist.Split(env("SURGE_TEST_REDIS_REPLICA_CLUSTER_ADDRS",
		"127.0.0.1:7111,127.0.0.1:7112,127.0.0.1:7113,127.0.0.1:7114,127.0.0.1:7115,127.0.0.1:7116"))
}

// SentinelAddrs are the Sentinels of the Sentinel setup (SURGE_TEST_REDIS_SENTINEL_ADDRS, default
// 127.0.0.1:26391-26393) and SentinelMaster the name they know its master by
// (SURGE_TEST_REDIS_SENTINEL_MASTER, default surge).
func SentinelAddrs() []string {
	return commalist.Split(env("SURGE_TEST_REDIS_SENTINEL_ADDRS", "127.0.0.1:26391,127.0.0.1:26392,127.0.0.1:26393"))
}

// SentinelMaster is the Sentinel setup's master name; see SentinelAddrs.
func SentinelMaster() string { return env("SURGE_TEST_REDIS_SENTINEL_MASTER", "surge") }

// Failover is a test's hold on one of the failover setups.
type Failover struct {
	// Addrs are what a client of the setup is given: the Cluster's seed nodes, or the Sentinels.
	Addrs []string
	// MasterName is the Sentinel setup's master name; empty for the Cluster.
	MasterName string

	t      testing.TB
	frozen []int // pids stopped with SIGSTOP, resumed at cleanup
}

// ReplicaCluster holds the Cluster with replicas for the test (waiting while another test holds
// it) and makes it whole again when the test ends.
func ReplicaCluster(t testing.TB) *Failover {
	return holdFailover(t, &Failover{Addrs: ReplicaClusterAddrs()})
}

// Sentinel holds the Sentinel setup for the test (waiting while another test holds it) and
// makes it whole again when the test ends.
func Sentinel(t testing.TB) *Failover {
	return holdFailover(t, &Failover{Addrs: SentinelAddrs(), MasterName: SentinelMaster()})
}

// Sentinel reports whether f is the Sentinel setup.
func (f *Failover) Sentinel() bool { return f.MasterName != "" }

// Options are the options of a client of the setup (redisfailover.NewClient takes them).
func (f *Failover) Options() *redis.UniversalOptions {
	return &redis.UniversalOptions{Addrs: f.Addrs, MasterName: f.MasterName, IsClusterMode: !f.Sentinel()}
}

// Client is a client of the setup that follows failovers (redisfailover.NewClient), closed at
// cleanup.
func (f *Failover) Client(t testing.TB) redis.UniversalClient {
	t.Helper()
	c := redisfailover.NewClient(f.Options())
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func (f *Failover) String() string {
	if f.Sentinel() {
		return "the Sentinel setup (" + strings.Join(f.Addrs, ",") + ", master " + f.MasterName + ")"
	}
	return "the Cluster with replicas (" + strings.Join(f.Addrs, ",") + ")"
}

// failoverLockWait bounds the wait for another test's hold on a setup.
const failoverLockWait = 10 * time.Minute

func holdFailover(t testing.TB, f *Failover) *Failover {
	t.Helper()
	f.t = t
	name := "cluster"
	if f.Sentinel() {
		name = "sentinel"
	}
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "surge-failover-"+name+".lock"), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(failoverLockWait)
	for syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		if time.Now().After(deadline) {
			_ = lock.Close()
			t.Fatalf("another test held %s for %v", f, failoverLockWait)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Cleanup(func() {
		f.restore()
		_ = lock.Close() // releases the lock
	})
	if err := f.healthy(); err != nil {
		// A test process killed half-way leaves a node down: make it whole first.
		f.restore()
		if err := f.healthy(); err != nil {
			t.Fatalf("%s is not healthy (%v): start it with scripts/ensure-redis-failover.sh", f, err)
		}
	}
	return f
}

// healthy checks that the setup's master (every master, on the Cluster) has its replica with
// the link up.
func (f *Failover) healthy() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	masters := f.masters(ctx)
	if len(masters) == 0 {
		return fmt.Errorf("no master answers")
	}
	for _, m := range masters {
		if _, err := f.replicaOf(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

// masters lists the setup's masters (host:port).
func (f *Failover) masters(ctx context.Context) []string {
	if f.Sentinel() {
		if m, err := f.sentinelMaster(ctx); err == nil {
			return []string{m}
		}
		return nil
	}
	for _, a := range f.Addrs {
		c := redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1})
		shards, err := c.ClusterShards(ctx).Result()
		_ = c.Close()
		if err != nil {
			continue
		}
		var out []string
		for _, s := range shards {
			for _, n := range s.Nodes {
				if n.Role == "master" && n.Health == "online" {
					out = append(out, hostPort(n.IP, n.Port))
				}
			}
		}
		return out
	}
	return nil
}

func hostPort(host string, port int64) string { return host + ":" + strconv.FormatInt(port, 10) }

func (f *Failover) sentinelMaster(ctx context.Context) (string, error) {
	var last error
	for _, a := range f.Addrs {
		s := redis.NewSentinelClient(&redis.Options{Addr: a, MaxRetries: -1})
		addr, err := s.GetMasterAddrByName(ctx, f.MasterName).Result()
		_ = s.Close()
		if err == nil && len(addr) == 2 {
			return addr[0] + ":" + addr[1], nil
		}
		last = err
	}
	return "", fmt.Errorf("no Sentinel names master %s: %v", f.MasterName, last)
}

// replicaOf is the replica of master whose link is up, from the master's INFO replication.
func (f *Failover) replicaOf(ctx context.Context, master string) (string, error) {
	info, err := nodeInfo(ctx, master, "replication")
	if err != nil {
		return "", err
	}
	for i := 0; ; i++ {
		line := info["slave"+strconv.Itoa(i)] // ip=127.0.0.1,port=7114,state=online,offset=…,lag=0
		if line == "" {
			return "", fmt.Errorf("master %s has no replica online", master)
		}
		kv := map[string]string{}
		for _, p := range strings.Split(line, ",") {
			k, v, _ := strings.Cut(p, "=")
			kv[k] = v
		}
		if kv["state"] == "online" {
			return kv["ip"] + ":" + kv["port"], nil
		}
	}
}

// nodeInfo is a section of INFO of one node, as fields.
func nodeInfo(ctx context.Context, addr, section string) (map[string]string, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	s, err := c.Info(ctx, section).Result()
	if err != nil {
		return nil, fmt.Errorf("INFO %s on %s: %w", section, addr, err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(s, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = v
		}
	}
	return out, nil
}

// MasterOf returns the master holding key (the Sentinel setup's only master) and its replica.
func (f *Failover) MasterOf(key string) (master, replica string) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var err error
	if f.Sentinel() {
		master, err = f.sentinelMaster(ctx)
	} else {
		master, err = f.slotMaster(ctx, key)
	}
	if err == nil {
		replica, err = f.replicaOf(ctx, master)
	}
	if err != nil {
		f.t.Fatalf("%s: finding the master of %q: %v", f, key, err)
	}
	return master, replica
}

func (f *Failover) slotMaster(ctx context.Context, key string) (string, error) {
	return SlotMaster(ctx, f.Addrs[0], key)
}

// SlotMaster is the master that serves key, as the Cluster node at seed says.
func SlotMaster(ctx context.Context, seed, key string) (string, error) {
	c := redis.NewClient(&redis.Options{Addr: seed, MaxRetries: -1})
	defer c.Close()
	slot, err := c.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		return "", err
	}
	shards, err := c.ClusterShards(ctx).Result()
	if err != nil {
		return "", err
	}
	for _, s := range shards {
		for _, r := range s.Slots {
			if slot < r.Start || slot > r.End {
				continue
			}
			for _, n := range s.Nodes {
				if n.Role == "master" {
					return hostPort(n.IP, n.Port), nil
				}
			}
		}
	}
	return "", fmt.Errorf("no master serves slot %d", slot)
}

// pidOf is the process id of the local redis-server at addr, checked to be one.
func pidOf(t testing.TB, addr string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := nodeInfo(ctx, addr, "server")
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(info["process_id"])
	if err != nil {
		t.Fatalf("%s: INFO server has no process_id", addr)
	}
	if comm, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm"); strings.TrimSpace(string(comm)) != "redis-server" {
		t.Fatalf("%s: process %d is not a local redis-server", addr, pid)
	}
	return pid
}

// Kill kills the Redis at addr with SIGKILL (a crash: no final write, connections reset) and
// waits until its port refuses connections.
func (f *Failover) Kill(addr string) { KillRedis(f.t, addr) }

// KillRedis kills the local redis-server at addr with SIGKILL and waits until it is gone.
func KillRedis(t testing.TB, addr string) {
	t.Helper()
	pid := pidOf(t, addr)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 %d (%s): %v", pid, addr, err)
	}
	for deadline := time.Now().Add(10 * time.Second); syscall.Kill(pid, 0) == nil; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) still runs 10 s after SIGKILL", addr, pid)
		}
	}
}

// Failover has the setup promote replica in a coordinated failover: CLUSTER FAILOVER on the
// replica, or SENTINEL FAILOVER (Sentinel picks the replica: the setup has one).
func (f *Failover) Failover(replica string) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var err error
	if f.Sentinel() {
		// A replica that came back (restore) is a candidate only once Sentinel has read its
		// INFO, which it does every 10 s outside a failover: until then it answers
		// NOGOODSLAVE, so ask again.
		s := redis.NewSentinelClient(&redis.Options{Addr: f.Addrs[0]})
		for err = s.Failover(ctx, f.MasterName).Err(); err != nil && strings.Contains(err.Error(), "NOGOODSLAVE") && ctx.Err() == nil; err = s.Failover(ctx, f.MasterName).Err() {
			time.Sleep(200 * time.Millisecond)
		}
		_ = s.Close()
	} else {
		c := redis.NewClient(&redis.Options{Addr: replica})
		err = c.ClusterFailover(ctx).Err()
		_ = c.Close()
	}
	if err != nil {
		f.t.Fatalf("%s: failover to %s: %v", f, replica, err)
	}
}

// Promotion watches addr from now on and sends, once, the time it first reports role master (the
// promotion: every time measured after a failover is counted from it). It gives up after within.
func (f *Failover) Promotion(addr string, within time.Duration) <-chan time.Time {
	out := make(chan time.Time, 1)
	go func() {
		c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
		defer c.Close()
		for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			role, err := c.Do(ctx, "ROLE").Slice()
			cancel()
			if err == nil && len(role) > 0 && role[0] == "master" {
				out <- time.Now()
				return
			}
		}
		close(out)
	}()
	return out
}

// Lag makes replica fall behind master: it is frozen (SIGSTOP) and its link cut on the master
// (CLIENT KILL TYPE replica), so what the master accepts from now on does not reach it; a
// frozen replica alone does not lag (the writes wait in its socket and are applied on SIGCONT).
// Resume (and cleanup) thaws it: it reconnects, and catches up unless its master is gone by
// then, in which case a failover promotes it with what it had. To have a lagging replica
// promoted: Lag, writes, Kill(master), then resume at once. Keep the freeze under a second on
// the Sentinel setup: Sentinel does not promote a replica it found down for its
// down-after-milliseconds (1000), and tries again only 6 s later (twice failover-timeout);
// the Cluster's replicas take over however stale (cluster-replica-validity-factor 0).
func (f *Failover) Lag(master, replica string) (resume func()) {
	f.t.Helper()
	pid := pidOf(f.t, replica)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		f.t.Fatal(err)
	}
	f.frozen = append(f.frozen, pid)
	c := redis.NewClient(&redis.Options{Addr: master})
	defer c.Close()
	if err := c.Do(context.Background(), "CLIENT", "KILL", "TYPE", "replica").Err(); err != nil {
		f.t.Fatalf("CLIENT KILL TYPE replica on %s: %v", master, err)
	}
	return func() { _ = syscall.Kill(pid, syscall.SIGCONT) }
}

// ReplicationOffset is addr's replication offset (master_repl_offset): a master's minus its
// promoted replica's is what the promotion lost.
func (f *Failover) ReplicationOffset(addr string) int64 {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := nodeInfo(ctx, addr, "replication")
	if err != nil {
		f.t.Fatal(err)
	}
	n, err := strconv.ParseInt(info["master_repl_offset"], 10, 64)
	if err != nil {
		f.t.Fatalf("%s: INFO replication has no master_repl_offset", addr)
	}
	return n
}

// restore thaws what Lag froze and has scripts/ensure-redis-failover.sh start what is down (a
// killed master comes back as a replica of the one promoted) and wait until the setup is whole.
func (f *Failover) restore() {
	for _, pid := range f.frozen {
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
	f.frozen = nil
	root, err := ModuleRoot()
	if err != nil {
		f.t.Errorf("restoring %s: %v", f, err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "scripts", "ensure-redis-failover.sh"))
	if out, err := cmd.CombinedOutput(); err != nil {
		f.t.Errorf("restoring %s: scripts/ensure-redis-failover.sh: %v\n%s", f, err, out)
	}
}

// ModuleRoot is the directory of the module's go.mod, above the working directory.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}
