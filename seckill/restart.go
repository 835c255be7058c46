package seckill

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// restartWatch notices that Redis restarted or failed over: the run_id of a server (of each
// master, on a Cluster) changed. Only then can a voucher's state be stale (lua.SaleState), so
// the consumer checks its live vouchers then, and at its start, instead of every second: one
// INFO per master and second, whatever the number of vouchers.
type restartWatch struct {
	rdb  redis.UniversalClient
	last string // the run_ids seen last ("" before the first answer)
	seen bool
}

var runIDPattern = regexp.MustCompile(`run_id:([0-9a-f]+)`)

// changed reports whether the run_ids differ from the last ones read (true at the first
// answer). A server that does not answer, or has no run_id (the embedded miniredis, whose
// state is always current), changes nothing.
func (w *restartWatch) changed(ctx context.Context) bool {
	ids, ok := w.runIDs(ctx)
	if !ok || (w.seen && ids == w.last) {
		return false
	}
	w.last, w.seen = ids, true
	return true
}

func (w *restartWatch) runIDs(ctx context.Context) (string, bool) {
	info := func(ctx context.Context, c *redis.Client) (string, bool) {
		s, err := bounded(ctx, c, func(ctx context.Context) (string, error) { return c.Info(ctx, "server").Result() })
		m := runIDPattern.FindStringSubmatch(s)
		return strings.Join(m[min(len(m), 1):], ""), err == nil && m != nil
	}
	switch c := w.rdb.(type) {
	case *redis.Client:
		return info(ctx, c)
	case *redis.ClusterClient:
		var mu sync.Mutex
		var ids []string
		ok := true
		err := c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
			id, good := info(ctx, n)
			mu.Lock()
			defer mu.Unlock()
			ids, ok = append(ids, id), ok && good
			return nil
		})
		slices.Sort(ids)
		return strings.Join(ids, ","), ok && err == nil
	}
	return "", false
}
