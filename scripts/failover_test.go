package scripts_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// failoverEnv is the environment of the failover setups' scripts on ports and directories of
// the test's own: the shared setups (7111-7116, 7121-7122, 26391-26393) are never touched.
type failoverEnv struct {
	cluster, data, sentinels []int
	clusterDir, sentinelDir  string
}

func newFailoverEnv(t *testing.T) failoverEnv {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redis-server is not installed (scripts/ensure-redis.sh installs it): %v", err)
	}
	e := failoverEnv{cluster: freePorts(t, 6, true), data: freePorts(t, 2, false), sentinels: freePorts(t, 3, false),
		clusterDir: t.TempDir(), sentinelDir: t.TempDir()}
	t.Cleanup(func() {
		if e.running(t) > 0 {
			e.script(t, "stop-redis-failover.sh")
		}
	})
	return e
}

func join(ports []int, sep, prefix string) string {
	var s []string
	for _, p := range ports {
		s = append(s, prefix+strconv.Itoa(p))
	}
	return strings.Join(s, sep)
}

func (e failoverEnv) vars() []string {
	return []string{
		"SURGE_REPLICA_CLUSTER_PORTS=" + join(e.cluster, " ", ""), "SURGE_REPLICA_CLUSTER_DIR=" + e.clusterDir,
		"SURGE_SENTINEL_DATA_PORTS=" + join(e.data, " ", ""), "SURGE_SENTINEL_PORTS=" + join(e.sentinels, " ", ""),
		"SURGE_SENTINEL_DIR=" + e.sentinelDir, "SURGE_SENTINEL_MASTER=scripts-test",
	}
}

// environ is the process environment without the variables that name setups to use, plus vars.
func (e failoverEnv) environ() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SURGE_TEST_REDIS_REPLICA_CLUSTER_ADDRS=") && !strings.HasPrefix(kv, "SURGE_TEST_REDIS_SENTINEL_") {
			env = append(env, kv)
		}
	}
	return append(env, e.vars()...)
}

// running counts the processes of both setups that answer PING.
func (e failoverEnv) running(t *testing.T) int {
	t.Helper()
	c := clusterEnv{ports: append(append(append([]int{}, e.cluster...), e.data...), e.sentinels...)}
	return c.running(t)
}

func (e failoverEnv) script(t *testing.T, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{name}, args...)...)
	cmd.Env = e.environ()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", name, err, out)
	}
	return string(out)
}

// TestWithRedisFailover: with-redis-failover.sh starts the Cluster with replicas and the
// Sentinel setup when none runs, hands their addresses to its command, and stops them when the
// command ends. Inside, the setup's master is killed (kill -9): once its replica is promoted,
// ensure-redis-failover.sh starts it again as the new master's replica, the state the failover
// tests leave behind.
func TestWithRedisFailover(t *testing.T) {
	e := newFailoverEnv(t)
	dir := t.TempDir()
	seen := filepath.Join(dir, "seen")
	kill := fmt.Sprintf(`
set -e
printf '%%s\n%%s\n%%s\n' "$SURGE_TEST_REDIS_REPLICA_CLUSTER_ADDRS" "$SURGE_TEST_REDIS_SENTINEL_ADDRS" "$SURGE_TEST_REDIS_SENTINEL_MASTER" > %[1]q
pid=$(redis-cli -p %[2]d info server | tr -d '\r' | sed -n 's/^process_id://p')
kill -9 "$pid"
# Sentinel retries a failed election after twice its failover-timeout (3 s): under load the
# promotion has taken over 10 s.
for i in $(seq 600); do
	[ "$(redis-cli -p %[3]d role 2>/dev/null | head -1)" = master ] && break
	sleep 0.05
done
[ "$(redis-cli -p %[3]d role 2>/dev/null | head -1)" = master ] || { echo "no replica promoted within 30 s" >&2; exit 1; }
bash ensure-redis-failover.sh >> %[1]q
redis-cli -p %[2]d role | head -3 | tr '\n' ' ' >> %[1]q
`, seen, e.data[0], e.data[1])
	out := e.script(t, "with-redis-failover.sh", "bash", "-c", kill)
	t.Logf("with-redis-failover.sh:\n%s", out)
	b, err := os.ReadFile(seen)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 5 {
		t.Fatalf("the command recorded %q", b)
	}
	if want := join(e.cluster, ",", "127.0.0.1:"); lines[0] != want {
		t.Errorf("SURGE_TEST_REDIS_REPLICA_CLUSTER_ADDRS=%q, want %q", lines[0], want)
	}
	if want := join(e.sentinels, ",", "127.0.0.1:"); lines[1] != want || lines[2] != "scripts-test" {
		t.Errorf("SURGE_TEST_REDIS_SENTINEL_ADDRS=%q, _MASTER=%q, want %q and scripts-test", lines[1], lines[2], want)
	}
	if !strings.Contains(lines[3], fmt.Sprintf("SURGE_SENTINEL_STARTED='%d'", e.data[0])) {
		t.Errorf("ensure-redis-failover.sh after the kill did not start the killed master alone: %s", lines[3])
	}
	if want := fmt.Sprintf("slave 127.0.0.1 %d", e.data[1]); strings.TrimSpace(lines[4]) != want {
		t.Errorf("the killed master came back as %q, want %q (a replica of the promoted one)", lines[4], want)
	}
	if n := e.running(t); n != 0 {
		t.Errorf("%d processes with-redis-failover.sh started still run after it", n)
	}
}
