package faults_test

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

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/redisfailover"
)

// faultTarget is the Redis a failover test breaks: one of the failover setups
// (*testenv.Failover), or a Redis without replicas whose node is restarted (restarted).
type faultTarget interface {
	Client(t testing.TB) redis.UniversalClient
	MasterOf(key string) (master, replica string)
	Promotion(addr string, within time.Duration) <-chan time.Time
	Kill(addr string)
	Failover(replica string)
	Lag(master, replica string) (resume func())
	ReplicationOffset(addr string) int64
	String() string
}

// restarted is a Redis without replicas, a single node or a Cluster of masters only, on ports
// of its own: Kill kills the node (kill -9) and starts it again half a second later, with its
// data (an AOF, appendfsync always). Its "promotion" is the moment the node answers again:
// nothing takes over meanwhile, its data is unavailable until then.
type restarted struct {
	t       testing.TB
	addrs   []string
	restart func(addr string) // starts a killed node again and waits until it serves
}

// singleNode is a private redis-server, restarted on the same port.
func singleNode(t testing.TB) faultTarget {
	r := testenv.StartRedis(t, "--appendonly", "yes", "--appendfsync", "always")
	return &restarted{t: t, addrs: []string{r.Addr}, restart: func(string) { r.Kill(); r.Start() }}
}

// mastersOnly is a private Redis Cluster of 3 masters (scripts/ensure-redis-cluster.sh on
// free ports, stopped at cleanup), whose killed node is started again by the same script.
func mastersOnly(t testing.TB) faultTarget {
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	var ports []string
	for len(ports) < 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		bus, berr := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000))
		_ = ln.Close()
		if berr == nil {
			_ = bus.Close()
			ports = append(ports, strconv.Itoa(port))
		}
	}
	env := append(os.Environ(), "SURGE_CLUSTER_PORTS="+strings.Join(ports, " "), "SURGE_CLUSTER_DIR="+t.TempDir(), "SURGE_CLUSTER_APPENDONLY=yes")
	script := func(name string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "scripts", name))
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
	}
	script("ensure-redis-cluster.sh")
	t.Cleanup(func() { script("stop-redis-cluster.sh") })
	r := &restarted{t: t, restart: func(string) { script("ensure-redis-cluster.sh") }}
	for _, p := range ports {
		r.addrs = append(r.addrs, "127.0.0.1:"+p)
	}
	return r
}

func (r *restarted) cluster() bool { return len(r.addrs) > 1 }

func (r *restarted) Client(t testing.TB) redis.UniversalClient {
	c := redisfailover.NewClient(&redis.UniversalOptions{Addrs: r.addrs})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// MasterOf is the node holding key; it has no replica: the second answer names it again.
func (r *restarted) MasterOf(key string) (string, string) {
	if !r.cluster() {
		return r.addrs[0], r.addrs[0]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := testenv.SlotMaster(ctx, r.addrs[0], key)
	if err != nil {
		r.t.Fatal(err)
	}
	return m, m
}

// Promotion watches addr from now on and sends when, once it stopped answering, it answers
// PING again (closed if that takes longer than within).
func (r *restarted) Promotion(addr string, within time.Duration) <-chan time.Time {
	out := make(chan time.Time, 1)
	go func() {
		defer close(out)
		c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1, DialTimeout: time.Second, ReadTimeout: time.Second})
		defer c.Close()
		down := false
		for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			err := c.Ping(ctx).Err()
			cancel()
			switch {
			case err != nil:
				down = true
			case down:
				out <- time.Now()
				return
			}
		}
	}()
	return out
}

// Kill kills the node, and starts it again half a second later.
func (r *restarted) Kill(addr string) {
	testenv.KillRedis(r.t, addr)
	time.Sleep(500 * time.Millisecond)
	r.restart(addr)
}

func (r *restarted) Failover(string) { r.t.Fatal("a Redis without replicas has no failover") }
func (r *restarted) Lag(string, string) func() {
	r.t.Fatal("a Redis without replicas has no replica")
	return nil
}
func (r *restarted) ReplicationOffset(string) int64 { return 0 }

func (r *restarted) String() string {
	if r.cluster() {
		return fmt.Sprintf("a Cluster of masters only (%s)", strings.Join(r.addrs, ","))
	}
	return "a single node (" + r.addrs[0] + ")"
}
