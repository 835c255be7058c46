// Package scripts_test checks the service scripts and the Makefile's use of them against real
// processes: a Redis Cluster of the test's own on free ports, never the shared one.
package scripts_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// clusterPorts finds three free loopback ports whose cluster bus ports (port + 10000) are free
// too.
func clusterPorts(t *testing.T) []int { return freePorts(t, 3, true) }

// freePorts finds n free loopback ports, with bus: whose cluster bus ports (port + 10000) are
// free too.
func freePorts(t *testing.T, n int, bus bool) []int {
	t.Helper()
	var ports []int
	var held []net.Listener
	defer func() {
		for _, ln := range held {
			_ = ln.Close()
		}
	}()
	for tries := 0; len(ports) < n && tries < 400; tries++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, ln)
		port := ln.Addr().(*net.TCPAddr).Port
		if bus {
			if port+10000 > 65535 {
				continue
			}
			b, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000))
			if err != nil {
				continue
			}
			held = append(held, b)
		}
		ports = append(ports, port)
	}
	if len(ports) < n {
		t.Fatalf("no %d free ports", n)
	}
	return ports
}

// clusterEnv is the environment of the scripts for a cluster of the test's own: its ports and
// a node directory in the test's temporary directory.
type clusterEnv struct {
	ports []int
	dir   string
}

func (c clusterEnv) vars() []string {
	var ps []string
	for _, p := range c.ports {
		ps = append(ps, strconv.Itoa(p))
	}
	return []string{"SURGE_CLUSTER_PORTS=" + strings.Join(ps, " "), "SURGE_CLUSTER_DIR=" + c.dir}
}

func (c clusterEnv) addrs() string {
	var as []string
	for _, p := range c.ports {
		as = append(as, "127.0.0.1:"+strconv.Itoa(p))
	}
	return strings.Join(as, ",")
}

// running reports how many of the cluster's nodes answer PING.
func (c clusterEnv) running(t *testing.T) int {
	t.Helper()
	n := 0
	for _, p := range c.ports {
		conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(p), time.Second)
		if err != nil {
			continue
		}
		_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
		_, _ = conn.Write([]byte("PING\r\n"))
		buf := make([]byte, 16)
		if k, _ := conn.Read(buf); strings.HasPrefix(string(buf[:k]), "+PONG") {
			n++
		}
		_ = conn.Close()
	}
	return n
}

// script runs scripts/<name> with the cluster's environment.
func (c clusterEnv) script(t *testing.T, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", name)
	cmd.Env = append(os.Environ(), c.vars()...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", name, err, out)
	}
	return string(out)
}

// newCluster is a cluster environment whose nodes, if any run when the test ends, are stopped
// (stop-redis-cluster.sh on the test's own ports: the shared cluster is never touched).
func newCluster(t *testing.T) clusterEnv {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redis-server is not installed (scripts/ensure-redis.sh installs it): %v", err)
	}
	c := clusterEnv{ports: clusterPorts(t), dir: t.TempDir()}
	t.Cleanup(func() {
		if c.running(t) > 0 {
			c.script(t, "stop-redis-cluster.sh")
		}
	})
	return c
}

// makeTest runs `make test` with go replaced by a script that records what the tests would
// see (SURGE_TEST_REDIS_CLUSTER_ADDRS, and how many of the cluster's nodes answer) and exits
// with goExit; the targets before the tests (services, vet) are not run. It returns what was
// recorded and make's error.
func makeTest(t *testing.T, c clusterEnv, goExit int) (seenAddrs string, seenRunning int, err error) {
	t.Helper()
	dir := t.TempDir()
	record := filepath.Join(dir, "seen")
	fakeGo := filepath.Join(dir, "go")
	var check []string
	for _, p := range c.ports {
		check = append(check, fmt.Sprintf(`redis-cli -h 127.0.0.1 -p %d ping 2>/dev/null | grep -q PONG && n=$((n+1))`, p))
	}
	script := "#!/usr/bin/env bash\nn=0\n" + strings.Join(check, "\n") +
		"\nprintf '%s\\n%s\\n' \"${SURGE_TEST_REDIS_CLUSTER_ADDRS:-}\" \"$n\" > " + strconv.Quote(record) +
		"\nexit " + strconv.Itoa(goExit) + "\n"
	if err := os.WriteFile(fakeGo, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// -o: the prerequisites that install and start the other services, and vet, are taken
	// as done (services is the target's name before issue 23).
	cmd := exec.CommandContext(ctx, "make", "-C", "..", "-o", "test-services", "-o", "services", "-o", "vet", "test", "GO="+fakeGo)
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SURGE_TEST_REDIS_CLUSTER_ADDRS=") && !strings.HasPrefix(kv, "MAKEFLAGS=") {
			env = append(env, kv)
		}
	}
	// The failover setups are with-redis-failover.sh's (TestWithRedisFailover): named here so
	// that it starts nothing.
	cmd.Env = append(env, c.vars()...)
	cmd.Env = append(cmd.Env, "SURGE_TEST_REDIS_REPLICA_CLUSTER_ADDRS=127.0.0.1:1", "SURGE_TEST_REDIS_SENTINEL_ADDRS=127.0.0.1:1")
	out, err := cmd.CombinedOutput()
	t.Logf("make test:\n%s", out)
	b, rerr := os.ReadFile(record)
	if rerr != nil {
		t.Fatalf("the tests did not run: %v", rerr)
	}
	lines := strings.Split(string(b), "\n")
	seenRunning, _ = strconv.Atoi(lines[1])
	return lines[0], seenRunning, err
}

// Issue 23, item 8: `make test` starts a cluster on SURGE_CLUSTER_PORTS when none runs there,
// hands its address to the tests, and stops it afterwards, passed or failed.
func TestMakeTestStopsTheClusterItStarted(t *testing.T) {
	for _, goExit := range []int{0, 3} {
		t.Run("go exits "+strconv.Itoa(goExit), func(t *testing.T) {
			c := newCluster(t)
			addrs, running, err := makeTest(t, c, goExit)
			if addrs != c.addrs() || running != 3 {
				t.Errorf("the tests saw SURGE_TEST_REDIS_CLUSTER_ADDRS=%q and %d nodes up; want %s and 3", addrs, running, c.addrs())
			}
			if (err == nil) != (goExit == 0) {
				t.Errorf("make test: %v, but the tests exited %d", err, goExit)
			}
			if n := c.running(t); n != 0 {
				t.Errorf("%d nodes of the cluster make test started still run after it", n)
			}
		})
	}
}

// Issue 23, item 8: a cluster that was running before `make test` (other programs may be
// using it) is used and left running.
func TestMakeTestLeavesARunningClusterRunning(t *testing.T) {
	c := newCluster(t)
	if out := c.script(t, "ensure-redis-cluster.sh"); !strings.Contains(out, "SURGE_CLUSTER_STARTED=") {
		t.Errorf("ensure-redis-cluster.sh does not say which nodes it started: %s", out)
	}
	addrs, running, err := makeTest(t, c, 0)
	if err != nil || addrs != c.addrs() || running != 3 {
		t.Errorf("make test: %v; the tests saw %q and %d nodes up; want %s and 3", err, addrs, running, c.addrs())
	}
	if n := c.running(t); n != 3 {
		t.Errorf("after make test %d of the 3 nodes that ran before it still run", n)
	}
	// ensure says it started nothing the second time.
	if out := c.script(t, "ensure-redis-cluster.sh"); !strings.Contains(out, "SURGE_CLUSTER_STARTED='' ") {
		t.Errorf("a second ensure-redis-cluster.sh claims to have started nodes: %s", out)
	}
}

// runHeld starts with-redis-cluster.sh on the cluster with a command that says it runs (the
// file up appears) and then waits until the file release exists; done is closed when the
// script has exited.
func runHeld(t *testing.T, c clusterEnv, name string) (release func(), done chan struct{}) {
	t.Helper()
	dir := t.TempDir()
	up, rel := filepath.Join(dir, "up"), filepath.Join(dir, "release")
	cmd := exec.Command("bash", "with-redis-cluster.sh", "bash", "-c",
		fmt.Sprintf("touch %q; while [ ! -e %q ]; do sleep 0.05; done", up, rel))
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SURGE_TEST_REDIS_CLUSTER_ADDRS=") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, c.vars()...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done = make(chan struct{})
	go func() {
		defer close(done)
		if err := cmd.Wait(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		t.Logf("%s:\n%s", name, out.String())
	}()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(up); err == nil {
			break
		}
		select {
		case <-done:
			t.Fatalf("%s ended before its command ran", name)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: its command did not start", name)
		}
	}
	return func() {
		if err := os.WriteFile(rel, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		<-done
	}, done
}

// Two `make test` runs at once on one machine share the cluster the first one started: it
// is stopped when the last of them ends, whichever ends first, never while one still tests.
func TestRunsAtOnceShareTheCluster(t *testing.T) {
	for _, starterEndsFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("starter ends first %v", starterEndsFirst), func(t *testing.T) {
			c := newCluster(t)
			releaseA, _ := runHeld(t, c, "first run (starts the cluster)")
			releaseB, _ := runHeld(t, c, "second run (finds it running)")
			first, second := releaseA, releaseB
			if !starterEndsFirst {
				first, second = releaseB, releaseA
			}
			first()
			if n := c.running(t); n != 3 {
				t.Fatalf("after one run ended, %d of 3 nodes run while the other run still uses them", n)
			}
			second()
			if n := c.running(t); n != 0 {
				t.Errorf("after both runs ended, %d nodes the first one started still run", n)
			}
		})
	}
}
