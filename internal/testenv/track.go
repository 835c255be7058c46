package testenv

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// LeftoverTTL is the TTL a test's keys get at its end if they have none: the developer's Redis
// (shared with other programs) keeps nothing of a test run for long, failed or not.
const LeftoverTTL = 10 * time.Minute

// maxTracked bounds the keys remembered per client (a bench test can write millions); past it
// the rest are left to the test's own cleanup.
const maxTracked = 200_000

// TrackKeys remembers every key rdb's commands name and, when the test ends (failed or not),
// gives those still without a TTL one of LeftoverTTL (EXPIRE … NX, so a TTL the code set is
// kept). Redis, Cluster and Another call it; a test that makes its own client calls it after
// creating the client, so that it runs before the client's Close.
func TrackKeys(t testing.TB, rdb redis.UniversalClient) {
	tr := &keyTracker{keys: map[string]struct{}{}}
	rdb.AddHook(tr)
	t.Cleanup(func() {
		keys := tr.take()
		if len(keys) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		secs := strconv.Itoa(int(LeftoverTTL / time.Second))
		for len(keys) > 0 {
			n := min(len(keys), 1000)
			pipe := rdb.Pipeline()
			for _, k := range keys[:n] {
				pipe.Do(ctx, "expire", k, secs, "nx")
			}
			if _, err := pipe.Exec(ctx); err != nil && ctx.Err() != nil {
				t.Logf("testenv: giving the test's keys a TTL: %v", err)
				return
			}
			keys = keys[n:]
		}
	})
}

type keyTracker struct {
	mu   sync.Mutex
	keys map[string]struct{}
}

func (tr *keyTracker) take() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	out := make([]string, 0, len(tr.keys))
	for k := range tr.keys {
		out = append(out, k)
	}
	tr.keys = map[string]struct{}{}
	return out
}

func (tr *keyTracker) record(cmd redis.Cmder) {
	args := cmd.Args()
	if len(args) < 2 {
		return
	}
	name := strings.ToLower(cmd.Name())
	var keys []any
	switch name {
	case "eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro":
		if len(args) < 3 {
			return
		}
		n, err := strconv.Atoi(fmt.Sprint(args[2]))
		if err != nil || n < 0 || 3+n > len(args) {
			return
		}
		keys = args[3 : 3+n]
	case "mset", "msetnx":
		for i := 1; i < len(args); i += 2 {
			keys = append(keys, args[i])
		}
	case "xgroup", "xinfo", "object", "memory", "bitop":
		keys = args[2:min(3, len(args))]
	case "expire", "pexpire", "del", "unlink", "publish", "spublish", "subscribe", "ssubscribe",
		"psubscribe", "script", "client", "config", "info", "cluster", "command", "hello", "ping",
		"flushall", "flushdb", "scan", "debug", "function", "select", "auth", "wait", "xread", "xreadgroup",
		"pubsub", "readonly", "shutdown", "save", "bgsave", "bgrewriteaof", "dbsize", "time", "lastsave", "swapdb", "keys", "randomkey":
		return
	default:
		keys = args[1:2]
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, k := range keys {
		if len(tr.keys) >= maxTracked {
			return
		}
		if s := toString(k); s != "" {
			tr.keys[s] = struct{}{}
		}
	}
}

func toString(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	}
	return ""
}

func (tr *keyTracker) DialHook(next redis.DialHook) redis.DialHook { return next }

func (tr *keyTracker) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		tr.record(cmd)
		return next(ctx, cmd)
	}
}

func (tr *keyTracker) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			tr.record(c)
		}
		return next(ctx, cmds)
	}
}

var _ redis.Hook = (*keyTracker)(nil)
