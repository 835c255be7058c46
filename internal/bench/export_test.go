package bench

import (
	"context"
	"database/sql"
	"time"

	"github.com/redis/go-redis/v9"
)

// SetHookAfterDrain makes the seckill scenario run fn after the order stream drained and
// before the checks, so a test can tamper with the state; it returns the undo.
func SetHookAfterDrain(fn func(ctx context.Context, db *sql.DB, rdb redis.UniversalClient, prefix string, voucherID int)) func() {
	testHookAfterDrain = fn
	return func() { testHookAfterDrain = nil }
}

// Shot is one request of a load loop, as the http scenario records it.
type Shot struct {
	Due, Lag, Latency time.Duration
	Class             string
}

// LoopRun is what one step of a load loop recorded.
type LoopRun struct {
	Shots                      []Shot
	Start                      time.Time // Shots' Due count from it
	Scheduled, NotSent, NoSlot int
	MostInFlight               int
	P50, P99, Max              time.Duration
}

// OpenLoop runs the http scenario's open loop (rate > 0) or closed loop (workers > 0) with
// shoot, for tests of the schedule itself.
func OpenLoop(ctx context.Context, rate float64, workers int, d time.Duration, maxInFlight int, shoot func(ctx context.Context, i int) string) LoopRun {
	run := runStep(ctx, loadStep{rate: rate, workers: workers, duration: d, maxInFlight: maxInFlight, timeout: 10 * time.Second}, 0, shoot)
	out := LoopRun{Start: run.start, Scheduled: run.scheduled, NotSent: run.notSent, NoSlot: run.noSlot, MostInFlight: run.inFlight}
	lat := make([]time.Duration, 0, len(run.shots))
	for _, s := range run.shots {
		out.Shots = append(out.Shots, Shot{Due: s.due, Lag: s.lag, Latency: s.latency, Class: s.class})
		lat = append(lat, s.latency)
	}
	t := tailOf(lat)
	msd := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	out.P50, out.P99, out.Max = msd(t.P50), msd(t.P99), msd(t.Max)
	return out
}
