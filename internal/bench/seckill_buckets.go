package bench

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/commalist"
)

// BucketRun is one sale of a bench series over stock buckets (-buckets 1,3,6): the same users
// grab a fresh voucher split over Buckets buckets.
type BucketRun struct {
	Buckets       int       `json:"buckets"`
	VoucherID     int       `json:"voucher_id"`
	ThroughputRPS float64   `json:"throughput_rps"` // grabs answered per second
	AdmittedPerS  float64   `json:"admitted_per_s"`
	LatencyJSON   LatencyMS `json:"latency_ms"`
	Outcomes      Outcomes  `json:"outcomes"`
	// FalseSoldOuts are SOLD_OUT answers given before a grab sent later was admitted (the sale
	// still had a unit); Unsold is the stock left at the end although users were refused.
	FalseSoldOuts     int64   `json:"false_sold_outs"`
	FalseSoldOutShare float64 `json:"false_sold_out_share"` // of all answers
	Unsold            int     `json:"unsold_after_sold_out"`
	// Per Redis master during the grab phase: script calls (EVAL+EVALSHA, consumer's included)
	// and CPU (user+sys), and the busiest master's share of the calls.
	Masters          []MasterLoad `json:"masters,omitempty"`
	BusiestShare     float64      `json:"busiest_master_share"`
	RedisCPUPerGrabU float64      `json:"redis_cpu_us_per_admitted"` // all masters together
	Verification     Verification `json:"verification"`
}

// MasterLoad is one Redis master's share of a sale.
type MasterLoad struct {
	Addr        string  `json:"addr"`
	ScriptCalls int64   `json:"script_calls"`
	Share       float64 `json:"share"`
	CPUSeconds  float64 `json:"cpu_s"`
	CPUPerGrabU float64 `json:"cpu_us_per_admitted"`
}

// parseBuckets reads -buckets: a comma-separated list of bucket counts in 1..64.
func parseBuckets(s string) ([]int, error) {
	var out []int
	for _, f := range commalist.Split(s) {
		k, err := strconv.Atoi(f)
		if err != nil || k < 1 || k > 64 {
			return nil, fmt.Errorf("bench seckill: -buckets: %q is not a count in 1..64", f)
		}
		out = append(out, k)
	}
	if len(out) == 0 {
		return []int{1}, nil
	}
	return out, nil
}

// masterStat is what INFO says of one master at a moment.
type masterStat struct {
	calls int64
	cpu   float64
}

// masterStats reads every master's script calls (INFO commandstats: eval and evalsha) and CPU
// (INFO cpu: used_cpu_user + used_cpu_sys). A single node is one master.
func masterStats(ctx context.Context, rdb redis.UniversalClient) (map[string]masterStat, error) {
	out := map[string]masterStat{}
	read := func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "commandstats", "cpu").Result()
		if err != nil {
			return err
		}
		out[c.Options().Addr] = parseMasterStat(info)
		return nil
	}
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		var mu sync.Mutex // ForEachMaster calls fn concurrently
		err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			info, err := c.Info(ctx, "commandstats", "cpu").Result()
			if err != nil {
				return err
			}
			mu.Lock()
			out[c.Options().Addr] = parseMasterStat(info)
			mu.Unlock()
			return nil
		})
		return out, err
	}
	if c, ok := rdb.(*redis.Client); ok {
		return out, read(ctx, c)
	}
	return out, errors.New("bench seckill: unknown Redis client type")
}

func parseMasterStat(info string) masterStat {
	var s masterStat
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		name, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch name {
		case "cmdstat_evalsha", "cmdstat_eval":
			for _, kv := range strings.Split(rest, ",") {
				if v, found := strings.CutPrefix(kv, "calls="); found {
					n, _ := strconv.ParseInt(v, 10, 64)
					s.calls += n
				}
			}
		case "used_cpu_user", "used_cpu_sys":
			f, _ := strconv.ParseFloat(rest, 64)
			s.cpu += f
		}
	}
	return s
}

// runBucketSeries runs one sale per bucket count of -buckets with the same users, and reports
// each: the K = 1 sale is the baseline of the same run.
func runBucketSeries(ctx context.Context, ip *inprocess, st *stateAccess, o seckillOpts, users []*simUser, out *output, res *SeckillResult, began time.Time) error {
	if st == nil || !st.lua {
		return errors.New("bench seckill: -buckets needs the lua strategy and access to Redis")
	}
	var runs []BucketRun
	var violations []string
	for _, k := range o.buckets {
		run, err := bucketSale(ctx, ip, st, o, users, k, out)
		if err != nil {
			return err
		}
		for _, v := range run.Verification.Violations {
			violations = append(violations, fmt.Sprintf("K=%d: %s", k, v))
		}
		runs = append(runs, run)
	}
	res.BucketRuns = runs
	last := runs[len(runs)-1]
	res.VoucherID, res.ThroughputRPS, res.LatencyJSON, res.Outcomes = last.VoucherID, last.ThroughputRPS, last.LatencyJSON, last.Outcomes
	res.Verification = Verification{OK: len(violations) == 0, Violations: violations, InitialStock: o.stock}
	res.Baseline.Note = "bucket series: the K=1 sale of this run is the baseline"
	res.OK = res.Verification.OK
	out.printf("  K   grabs/s  admitted/s  p99 ms  busiest master  false sold-outs  unsold  Redis CPU µs/admitted  invariants\n")
	for _, r := range runs {
		out.printf("  %-3d %7.0f  %10.0f  %6.2f  %13.1f%%  %15d  %6d  %21.1f  %v\n", r.Buckets, r.ThroughputRPS, r.AdmittedPerS,
			r.LatencyJSON.P99, 100*r.BusiestShare, r.FalseSoldOuts, r.Unsold, r.RedisCPUPerGrabU, r.Verification.OK)
	}
	res.ElapsedMS = ms(time.Since(began))
	if err := out.json(res); err != nil {
		return err
	}
	if !res.OK {
		return fmt.Errorf("bench seckill: %d invariant(s) violated: %s", len(violations), strings.Join(violations, "; "))
	}
	return nil
}

// bucketSale runs one sale of a voucher with k buckets and measures it.
func bucketSale(ctx context.Context, ip *inprocess, st *stateAccess, o seckillOpts, users []*simUser, k int, out *output) (BucketRun, error) {
	run := BucketRun{Buckets: k}
	ip.buckets = k
	ip.startConsumer(ctx)
	now := time.Now()
	vid, err := ip.createVoucher(ctx, o.stock, now.Add(-time.Minute), now.Add(o.timeout+time.Hour))
	if err != nil {
		return run, fmt.Errorf("bench seckill: creating the voucher (buckets %d): %w", k, err)
	}
	run.VoucherID = vid
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := ip.endSale(cctx, vid, o.keep); err != nil {
			fmt.Fprintf(out.errw, "bench seckill: closing the sale of voucher %d: %v\n", vid, err)
		}
	}()
	out.printf("  K=%d: voucher %d (stock %d)\n", k, vid, o.stock)
	before, err := masterStats(ctx, st.rdb)
	if err != nil {
		return run, err
	}
	ld := fire(ctx, ip, users, vid, o, out)
	after, err := masterStats(ctx, st.rdb)
	if err != nil {
		return run, err
	}
	var one SeckillResult
	one.SeriesStepMS = 100
	ld.fill(&one)
	run.ThroughputRPS, run.LatencyJSON, run.Outcomes = one.ThroughputRPS, one.LatencyJSON, one.Outcomes
	if ld.elapsed > 0 {
		run.AdmittedPerS = float64(one.Outcomes.Admitted) / ld.elapsed.Seconds()
	}
	run.FalseSoldOuts = ld.falseSoldOuts()
	if one.Grabs > 0 {
		run.FalseSoldOutShare = float64(run.FalseSoldOuts) / float64(one.Grabs)
	}
	fillMasters(&run, before, after, one.Outcomes.Admitted)

	drained := waitDrained(ctx, st, vid, k, o.drainTimeout)
	in := verifyInput{voucherID: vid, initial: o.stock, users: make([]int, len(users)), orders: make([]int64, len(users)),
		already: make([]int64, len(users)), served: make([]bool, len(users)), outcomes: one.Outcomes,
		dupAdmissions: ld.dupAdmissions.Load(), drainTimeout: o.drainTimeout, drained: drained, buckets: k}
	for i, u := range users {
		in.users[i] = u.id
		in.orders[i] = ld.orderOf[i].Load()
		in.already[i] = ld.alreadyOf[i].Load()
		in.served[i] = ld.served[i].Load()
	}
	run.Verification = verify(ctx, st, in)
	if one.Outcomes.SoldOut > 0 {
		run.Unsold = run.Verification.StockDB
	}
	printVerification(out, run.Verification)
	return run, nil
}

// fillMasters computes each master's share of the script calls and CPU per admitted grab.
func fillMasters(run *BucketRun, before, after map[string]masterStat, admitted int64) {
	var total int64
	var cpu float64
	for addr, a := range after {
		b := before[addr]
		m := MasterLoad{Addr: addr, ScriptCalls: a.calls - b.calls, CPUSeconds: a.cpu - b.cpu}
		if admitted > 0 {
			m.CPUPerGrabU = 1e6 * m.CPUSeconds / float64(admitted)
		}
		total += m.ScriptCalls
		cpu += m.CPUSeconds
		run.Masters = append(run.Masters, m)
	}
	sort.Slice(run.Masters, func(i, j int) bool { return run.Masters[i].Addr < run.Masters[j].Addr })
	for i := range run.Masters {
		if total > 0 {
			run.Masters[i].Share = float64(run.Masters[i].ScriptCalls) / float64(total)
			run.BusiestShare = max(run.BusiestShare, run.Masters[i].Share)
		}
	}
	if admitted > 0 {
		run.RedisCPUPerGrabU = 1e6 * cpu / float64(admitted)
	}
}
