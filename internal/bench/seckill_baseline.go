package bench

import (
	"context"
	"encoding/csv"
	"fmt"
	"math/rand/v2"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/app"
	"github.com/surgekit/surge/lua"
	"github.com/surgekit/surge/seckill"
)

// baselineStock is the stock of the throwaway voucher: never sold out by a baseline run.
const baselineStock = 1_000_000_000_000

// seckillBaseline runs `redis-benchmark -c 50 -n n -r 100000000 --csv EVALSHA <grab script>` on
// a throwaway voucher of the run's prefix (huge stock, open window, random distinct users),
// against the node that owns the voucher's slot (the single node, or that Cluster master), and
// deletes the voucher's keys after. It returns the rate, the p50, how many admissions the
// script really made (a sanity check: error replies would be "fast" too), the command run, or
// a note saying why there is no figure.
func seckillBaseline(ctx context.Context, st *stateAccess, cfg app.Config, n int) (rps, p50 float64, admitted int64, cmdline, note string) {
	path, err := exec.LookPath("redis-benchmark")
	if err != nil {
		return 0, 0, 0, "", "redis-benchmark not on PATH"
	}
	vid := 1<<52 + rand.IntN(1<<30) // no database voucher has such an id
	k := seckill.KeysOf(st.prefix, vid)
	var node *redis.Client
	switch c := st.rdb.(type) {
	case *redis.Client:
		node = c
	case *redis.ClusterClient:
		if node, err = c.MasterForKey(ctx, k.Meta); err != nil {
			return 0, 0, 0, "", "finding the Cluster node of the throwaway voucher: " + err.Error()
		}
	default:
		return 0, 0, 0, "", fmt.Sprintf("unsupported Redis client %T", st.rdb)
	}
	defer func() { _ = unlink(ctx, node, k.Meta, k.Stock, k.Buyers, k.Orders) }()
	now := time.Now().UnixMilli()
	_, err = node.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, k.Meta, "begin", 0, "end", now+int64(24*time.Hour/time.Millisecond), "on", 1)
		p.Set(ctx, k.Stock, baselineStock, 0)
		return nil
	})
	if err != nil {
		return 0, 0, 0, "", "creating the throwaway voucher: " + err.Error()
	}
	sha, err := lua.LoadGrab(ctx, node)
	if err != nil {
		return 0, 0, 0, "", "loading the script: " + err.Error()
	}
	host, port, err := net.SplitHostPort(node.Options().Addr)
	if err != nil {
		return 0, 0, 0, "", err.Error()
	}
	args := []string{"-h", host, "-p", port}
	if cfg.RedisPassword != "" {
		args = append(args, "-a", cfg.RedisPassword, "--no-auth-warning")
	}
	args = append(args, "-c", "50", "-n", strconv.Itoa(n), "-r", "100000000", "--csv",
		"EVALSHA", sha, "4", k.Meta, k.Stock, k.Buyers, k.Orders, strconv.FormatInt(now, 10), "__rand_int__", "281474976710657")
	cmdline = "redis-benchmark " + strings.Join(args, " ")
	if cfg.RedisPassword != "" {
		cmdline = strings.Replace(cmdline, cfg.RedisPassword, "***", 1)
	}
	bctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	b, err := exec.CommandContext(bctx, path, args...).Output()
	if err != nil {
		return 0, 0, 0, cmdline, fmt.Sprintf("redis-benchmark failed: %v", err)
	}
	recs, err := csv.NewReader(strings.NewReader(string(b))).ReadAll()
	if err != nil || len(recs) < 2 || len(recs[len(recs)-1]) < 5 {
		return 0, 0, 0, cmdline, fmt.Sprintf("unrecognised redis-benchmark output: %.200q", b)
	}
	last := recs[len(recs)-1]
	rps, _ = strconv.ParseFloat(last[1], 64)
	p50, _ = strconv.ParseFloat(last[4], 64)
	left, err := node.Get(ctx, k.Stock).Int64()
	if err == nil {
		admitted = baselineStock - left
	}
	if admitted < int64(n)*9/10 {
		return 0, 0, admitted, cmdline, fmt.Sprintf("the script admitted only %d of %d calls: not a valid baseline", admitted, n)
	}
	return rps, p50, admitted, cmdline, ""
}
