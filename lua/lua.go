// Package lua holds every Redis script of the project, one file per concern, embedded at build
// time. Each script's keys arrive in KEYS (never built inside the script) and share one hash
// tag, so the scripts run unchanged on Redis Cluster.
//
// Every script has one typed wrapper, in the Go file of its concern (cache.go, bloom.go,
// lock.go, login.go, idgen.go, seckill_*.go): arguments in, a reply with named outcomes out,
// and a reply that cannot be read is an error (ErrMalformedReply), never an outcome. Most
// wrappers return a Call, which runs at once (Run) or in a pipeline (Queue, then
// Pending.Result). The scripts themselves are unexported: nothing outside can swap one.
package lua

import (
	"embed"

	"github.com/redis/go-redis/v9"
)

//go:embed *.lua
var files embed.FS

// load joins the named files into one script, in order: shared Lua functions (such as
// lock_fence.lua) first, the script's own file last. Redis has no include.
func load(names ...string) *redis.Script {
	var src []byte
	for _, name := range names {
		b, err := files.ReadFile(name)
		if err != nil {
			panic("lua: missing embedded script " + name)
		}
		src = append(src, b...)
	}
	return redis.NewScript(string(src))
}
