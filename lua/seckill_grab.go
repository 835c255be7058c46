package lua

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// seckillGrab admits buyers to a flash sale (stock, one order per user, sale window), one or
// many grabs of one voucher per call, and appends their orders to the voucher's stream, or
// says why not; every check that can fail comes before the first write.
var seckillGrab = load("seckill_grab.lua")

// GrabOutcome is what seckill_grab.lua answered for one grab. To add one, return its code
// from the script and name it in grabOutcomes: package seckill turns any refusal into an
// error, a metric label and an API code by that name (seckill/refusal.go).
type GrabOutcome int64

// The outcomes, as the script codes them.
const (
	GrabAdmitted     GrabOutcome = 0 // admitted: the order is in the stream
	GrabNotReady     GrabOutcome = 1 // Redis does not hold the sale (never warmed, or lost)
	GrabNotStarted   GrabOutcome = 2 // before the sale window
	GrabEnded        GrabOutcome = 3 // after it, or the voucher is off sale
	GrabSoldOut      GrabOutcome = 4 // no unit left
	GrabAlreadyBuyer GrabOutcome = 5 // the user holds an order of the voucher (GrabReply.Holder)
)

// grabOutcomes names every outcome the script may answer; a code not listed is a malformed
// reply. The names are stable: they label the surge_seckill_grabs_total metric.
var grabOutcomes = map[GrabOutcome]string{
	GrabAdmitted:     "admitted",
	GrabNotReady:     "not_ready",
	GrabNotStarted:   "not_started",
	GrabEnded:        "ended",
	GrabSoldOut:      "sold_out",
	GrabAlreadyBuyer: "already_purchased",
}

// GrabOutcomes lists every outcome the script may answer.
func GrabOutcomes() []GrabOutcome {
	out := make([]GrabOutcome, 0, len(grabOutcomes))
	for o := range grabOutcomes {
		out = append(out, o)
	}
	return out
}

// String is the outcome's stable name ("sold_out").
func (o GrabOutcome) String() string {
	if name, ok := grabOutcomes[o]; ok {
		return name
	}
	return "outcome_" + strconv.FormatInt(int64(o), 10)
}

// GrabRequest is one user's grab in a call: the order id it would be admitted under.
type GrabRequest struct {
	User  int
	Order int64
}

// GrabReply is the script's answer for one grab.
type GrabReply struct {
	Outcome   GrabOutcome
	StockLeft int64 // GrabAdmitted: units left after this call's admissions up to this grab
	Holder    int64 // GrabAlreadyBuyer: the order the user holds
}

// Grab runs seckill_grab.lua for grabs of one voucher at now, in one call: one reply per grab,
// in order. A grab sent again with the same order id (a retry after a lost reply) is answered
// GrabAdmitted again, not admitted twice.
func Grab(ctx context.Context, rdb redis.Scripter, keys SeckillKeys, now time.Time, grabs []GrabRequest) ([]GrabReply, error) {
	keyList, args := grabCall(keys, now, grabs)
	res, err := seckillGrab.Run(ctx, rdb, keyList, args...).Slice()
	return parseGrab(res, err, len(grabs))
}

// QueuedGrab is a Grab call queued on a pipeline; read its replies after the pipeline ran.
type QueuedGrab struct {
	cmd  *redis.Cmd
	keys []string
	args []any
	n    int
}

// QueueGrab queues Grab on a pipeline (by EVALSHA: one round trip for many calls).
func QueueGrab(ctx context.Context, p redis.Pipeliner, keys SeckillKeys, now time.Time, grabs []GrabRequest) *QueuedGrab {
	keyList, args := grabCall(keys, now, grabs)
	return &QueuedGrab{cmd: seckillGrab.EvalSha(ctx, p, keyList, args...), keys: keyList, args: args, n: len(grabs)}
}

// NoScript reports whether Redis did not have the script cached: the call ran nothing, and
// Replies runs it again.
func (q *QueuedGrab) NoScript() bool { return redis.HasErrorPrefix(q.cmd.Err(), "NOSCRIPT") }

// Replies reads the call's replies once its pipeline ran. A script Redis did not have cached
// (first use on a node, a restart) failed before running anything, so it is run again here
// on rdb; that is no retry of a grab.
func (q *QueuedGrab) Replies(ctx context.Context, rdb redis.Scripter) ([]GrabReply, error) {
	res, err := q.cmd.Slice()
	if q.NoScript() {
		res, err = seckillGrab.Run(ctx, rdb, q.keys, q.args...).Slice()
	}
	return parseGrab(res, err, q.n)
}

func grabCall(k SeckillKeys, now time.Time, grabs []GrabRequest) ([]string, []any) {
	args := make([]any, 0, 1+2*len(grabs))
	args = append(args, now.UnixMilli())
	for _, g := range grabs {
		args = append(args, g.User, g.Order)
	}
	return []string{k.Meta, k.Stock, k.Buyers, k.Orders}, args
}

// parseGrab reads {code1, value1, code2, value2, ...} for n grabs.
func parseGrab(res []any, err error, n int) ([]GrabReply, error) {
	if err != nil {
		return nil, err
	}
	if len(res) != 2*n {
		return nil, malformed("seckill_grab.lua", res)
	}
	out := make([]GrabReply, n)
	for i := range out {
		r, ok := parseGrabPair(res[2*i], res[2*i+1])
		if !ok {
			return nil, malformed("seckill_grab.lua", res)
		}
		out[i] = r
	}
	return out, nil
}

func parseGrabPair(code, value any) (GrabReply, bool) {
	c, ok := code.(int64)
	if _, known := grabOutcomes[GrabOutcome(c)]; !ok || !known {
		return GrabReply{}, false
	}
	r := GrabReply{Outcome: GrabOutcome(c)}
	switch r.Outcome {
	case GrabAdmitted:
		r.StockLeft, ok = value.(int64)
		return r, ok && r.StockLeft >= 0
	case GrabAlreadyBuyer:
		s, _ := value.(string)
		id, err := strconv.ParseInt(s, 10, 64)
		r.Holder = id
		return r, err == nil && id > 0
	}
	return r, true
}

// LoadGrab loads seckill_grab.lua into rdb's script cache and returns its SHA1, for tools
// that send EVALSHA themselves (the bench's redis-benchmark baseline). Its reply format is
// the one Grab reads.
func LoadGrab(ctx context.Context, rdb redis.Scripter) (string, error) {
	return seckillGrab.Load(ctx, rdb).Result()
}
