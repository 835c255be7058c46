package redisfailover_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/redisfailover"
)

func TestTopologyError(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{redis.Nil, false},
		{context.Canceled, false},
		{context.DeadlineExceeded, false},
		{refused, true},
		{fmt.Errorf("wrapped: %w", refused), true},
		{io.EOF, true},
		{syscall.ECONNRESET, true},
		{net.ErrClosed, true},
		{redisError("READONLY You can't write against a read only replica."), true},
		{redisError("CLUSTERDOWN The cluster is down"), true},
		{redisError("LOADING Redis is loading the dataset in memory"), true},
		{redisError("MASTERDOWN Link with MASTER is down"), true},
		{redisError("WRONGTYPE Operation against a key holding the wrong kind of value"), false},
		{errors.New("some error of the caller's"), false},
	} {
		if got := redisfailover.TopologyError(c.err); got != c.want {
			t.Errorf("TopologyError(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

type redisError string

func (e redisError) Error() string { return string(e) }
func (redisError) RedisError()     {}

// A client of NewClient on an address that refused many connections uses a Redis that comes
// up there at once: go-redis alone, after PoolSize failed dials, stops dialling and probes the
// address once a second, so a promoted master (Sentinel) or a restarted node waited up to a
// second more.
func TestRefusedDialsDoNotDelayTheReturn(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close() // refused from now on
	addr := "127.0.0.1:" + strconv.Itoa(port)
	opts := &redis.UniversalOptions{Addrs: []string{addr}, PoolSize: 2, MaxRetries: -1}
	followed := redisfailover.NewClient(opts)
	defer followed.Close()
	plain := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{addr}, PoolSize: 2, MaxRetries: -1, DialerRetries: 1})
	defer plain.Close()
	ctx := context.Background()
	for range 10 {
		if followed.Ping(ctx).Err() == nil || plain.Ping(ctx).Err() == nil {
			t.Fatal("PING answered on a closed port")
		}
	}
	srv := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := srv.Start(); err != nil {
		t.Fatalf("redis-server: %v", err)
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	probe := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer probe.Close()
	for deadline := time.Now().Add(10 * time.Second); probe.Ping(ctx).Err() != nil; time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("redis-server did not come up")
		}
	}
	up := time.Now()
	firstOK := func(c redis.UniversalClient) time.Duration {
		for c.Ping(ctx).Err() != nil {
			time.Sleep(2 * time.Millisecond)
			if time.Since(up) > 5*time.Second {
				break
			}
		}
		return time.Since(up)
	}
	d := firstOK(followed)
	t.Logf("first PING answered %v after the server came up (a go-redis client alone: %v)", d.Round(time.Millisecond), firstOK(plain).Round(time.Millisecond))
	if d > 200*time.Millisecond {
		t.Errorf("the client of NewClient answered %v after the server came up, want at once", d.Round(time.Millisecond))
	}
}
