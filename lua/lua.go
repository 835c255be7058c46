// Package lua holds every Redis script of the project, one file per concern, embedded at build
// time. Each script's keys arrive in KEYS (never built inside the script) and share one hash
// tag, so the scripts run unchanged on Redis Cluster.
package lua

import (
	"embed"

	"github.com/redis/go-redis/v9"
)

//go:embed *.lua
var files embed.FS

func load(name string) *redis.Script {
	src, err := files.ReadFile(name)
	if err != nil {
		panic("lua: missing embedded script " + name)
	}
	return redis.NewScript(string(src))
}

var (
	// LoginSendCode stores a fresh login code if the phone's send limits allow it.
	LoginSendCode = load("login_send_code.lua")
	// LoginVerifyCode checks a login code, counting wrong tries and burning the code on success.
	LoginVerifyCode = load("login_verify_code.lua")

	// CacheLease reads a cache entry or takes the lease to load it.
	CacheLease = load("cache_lease.lua")
	// CacheFill writes a loaded value back if the lease is still held (stale-set protection).
	CacheFill = load("cache_fill.lua")
	// CacheRelease gives a lease back after a failed load.
	CacheRelease = load("cache_release.lua")
	// CacheSet sets or deletes a value and revokes any lease.
	CacheSet = load("cache_set.lua")
)
