package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// PrivateRedis starts a throwaway redis-server on a free loopback port, for tests that stop
// or break Redis without disturbing the shared one. stop kills it (also done at cleanup).
func PrivateRedis(t testing.TB, args ...string) (addr string, stop func()) {
	t.Helper()
	r := StartRedis(t, args...)
	return r.Addr, r.Kill
}

// RedisServer is a private redis-server that a test can kill, stop and start again on the
// same port and directory (so an AOF or RDB file survives the restart).
type RedisServer struct {
	Addr string // 127.0.0.1:port
	Dir  string // its working directory (--dir): where AOF and RDB files go

	t    testing.TB
	argv []string
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// StartRedis starts a private redis-server on a free loopback port with its own directory,
// no persistence unless args say otherwise (later arguments win, e.g. "--appendonly", "yes"),
// and waits until it answers. It is killed at cleanup.
func StartRedis(t testing.TB, args ...string) *RedisServer {
	t.Helper()
	port := freePort(t)
	r := &RedisServer{Addr: fmt.Sprintf("127.0.0.1:%d", port), Dir: t.TempDir(), t: t}
	r.argv = append([]string{"--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", r.Dir}, args...)
	r.Start()
	t.Cleanup(func() { r.Thaw(); r.Kill() })
	return r
}

// Start starts the server again (same port, directory and arguments) and waits until it
// answers PING, which it does only once its AOF or RDB file is loaded.
func (r *RedisServer) Start() {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		r.t.Fatal("testenv: redis-server already running")
	}
	cmd := exec.Command("redis-server", r.argv...)
	if err := cmd.Start(); err != nil {
		r.t.Fatalf("starting redis-server (scripts/ensure-redis.sh installs it): %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	c := redis.NewClient(&redis.Options{Addr: r.Addr, MaxRetries: -1})
	defer c.Close()
	err := waitChild(cmd, done, 30*time.Second, 20*time.Millisecond, func() error { return c.Ping(context.Background()).Err() })
	switch {
	case errors.Is(err, errChildExited):
		r.t.Fatalf("private redis-server on %s exited at start (port taken?)", r.Addr)
	case err != nil:
		r.t.Fatalf("private redis-server did not start: %v", err)
	}
	r.cmd, r.done = cmd, done
}

// Kill sends SIGKILL (a crash: no final write) and waits for the exit. No-op if stopped.
func (r *RedisServer) Kill() { r.signal(syscall.SIGKILL) }

// Term sends SIGTERM (a graceful shutdown: Redis flushes its AOF, and writes its RDB if
// configured to) and waits for the exit. No-op if stopped.
func (r *RedisServer) Term() { r.signal(syscall.SIGTERM) }

func (r *RedisServer) signal(sig syscall.Signal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return
	}
	stopChild(r.cmd, r.done, sig, 30*time.Second)
	r.cmd = nil
}

// Freeze stops the server with SIGSTOP: it keeps its connections open and answers nothing,
// the way a hung Redis (a long fork, a stalled VM, a paused container) behaves. Thaw resumes
// it; cleanup thaws it before the kill.
func (r *RedisServer) Freeze() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		_ = r.cmd.Process.Signal(syscall.SIGSTOP)
	}
}

// Thaw resumes a frozen server (SIGCONT). No-op if it runs.
func (r *RedisServer) Thaw() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		_ = r.cmd.Process.Signal(syscall.SIGCONT)
	}
}

// Snapshot saves the dataset (SAVE) and keeps a copy of the RDB file under name; Restore
// brings it back. Together they stand for a failover to a replica that lagged behind, or an
// AOF that lost its tail: Redis comes back with an older state than its clients last saw.
func (r *RedisServer) Snapshot(name string) {
	r.t.Helper()
	c := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer c.Close()
	if err := c.Save(context.Background()).Err(); err != nil {
		r.t.Fatalf("SAVE on %s: %v", r.Addr, err)
	}
	b, err := os.ReadFile(filepath.Join(r.Dir, "dump.rdb"))
	if err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(r.Dir, "snapshot-"+name+".rdb"), b, 0o600); err != nil {
		r.t.Fatal(err)
	}
}

// Restore kills the server and starts it again on the snapshot taken under name (a new
// process: Redis's run_id changes, as on a failover). The server must not run with AOF.
func (r *RedisServer) Restore(name string) {
	r.t.Helper()
	b, err := os.ReadFile(filepath.Join(r.Dir, "snapshot-"+name+".rdb"))
	if err != nil {
		r.t.Fatal(err)
	}
	r.Thaw()
	r.Kill()
	if err := os.WriteFile(filepath.Join(r.Dir, "dump.rdb"), b, 0o600); err != nil {
		r.t.Fatal(err)
	}
	r.Start()
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
