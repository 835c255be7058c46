package testenv

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// PrivateRedis starts a throwaway redis-server on a free loopback port, for tests that stop
// or break Redis without disturbing the shared one. stop kills it (also done at cleanup).
func PrivateRedis(t testing.TB, args ...string) (addr string, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	argv := append([]string{"--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir()}, args...)
	cmd := exec.Command("redis-server", argv...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting redis-server (scripts/ensure-redis.sh installs it): %v", err)
	}
	addr = fmt.Sprintf("127.0.0.1:%d", port)
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatal("private redis-server did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}
	t.Cleanup(stop)
	return addr, stop
}
