package bench

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// loadStep is one measured step of load on one target: an open loop at rate (requests
// scheduled at fixed times, whatever the answers do), or, with rate 0, a closed loop of
// workers that each send their next request when the last one is answered.
//
// Why the open loop: a closed loop slows down with the server, so a server that stalls for
// half a second delays one request per worker and the rest of its clients simply do not send
// (coordinated omission): the stall all but vanishes from its percentiles. Real buyers keep
// arriving during a stall. The open loop keeps the schedule and measures each request from the
// time it was due, so every request due during a stall carries the wait.
type loadStep struct {
	rate     float64 // open loop: requests per second
	workers  int     // closed loop (rate 0): senders, each waiting for its answer
	duration time.Duration
	// maxInFlight bounds the open loop's requests in flight. A request due while all are
	// taken waits for one (noSlot) and is sent late; its latency still counts from when it
	// was due.
	maxInFlight int
	timeout     time.Duration // per request
}

// shot is one request's record.
type shot struct {
	due     time.Duration // when it was due, from the step's start (closed loop: when it was sent)
	lag     time.Duration // how long after due it was sent
	latency time.Duration // from due to its answer or error
	class   string        // an outcome ("admitted"...) or an error kind ("timeout"...)
}

// shooter sends request number i and classifies what came back.
type shooter func(ctx context.Context, i int) string

// stepRun is what a step recorded.
type stepRun struct {
	shots     []shot    // the requests sent, each answered or failed
	scheduled int       // open loop: requests due within the step
	notSent   int       // open loop: due within the step but not sent before it ended (+ grace)
	noSlot    int       // open loop: due while every sender was taken (waiting for a free one)
	start     time.Time // shots' due times count from it
	elapsed   time.Duration
	inFlight  int // most requests in flight at once
}

// Bounds of an open-loop step.
const (
	// lateAfter is how far past its time a request may be sent and still count as on
	// schedule: the timer and the goroutine hand-off take some microseconds, more on a busy
	// machine.
	lateAfter = time.Millisecond
	// maxShots bounds one step's requests (their records stay in memory: 48 bytes each).
	maxShots = 2_000_000
)

// maxNap bounds one sleep of the schedule, so that a cancelled step stops soon at low rates.
const maxNap = 20 * time.Millisecond

// sendGrace is how long past its end a step still sends requests that came due within it
// (late: all slots were taken, or this process was starved); what is left is notSent.
func sendGrace(d time.Duration) time.Duration { return max(100*time.Millisecond, d/10) }

// runStep runs one step; request numbers start at first (which user's session, in turn).
func runStep(ctx context.Context, st loadStep, first int, shoot shooter) *stepRun {
	if st.rate > 0 {
		return runOpen(ctx, st, first, shoot)
	}
	return runClosed(ctx, st, first, shoot)
}

// inFlight counts the requests in flight and remembers the most at once.
type inFlight struct{ now, most atomic.Int64 }

func (f *inFlight) add() {
	n := f.now.Add(1)
	for m := f.most.Load(); n > m && !f.most.CompareAndSwap(m, n); m = f.most.Load() {
	}
}

func (f *inFlight) done() { f.now.Add(-1) }

// runOpen sends request i at start + i/rate from a pool of maxInFlight senders; the schedule
// does not wait for answers, only (past the bound) for a free sender.
func runOpen(ctx context.Context, st loadStep, first int, shoot shooter) *stepRun {
	n := min(int(st.rate*st.duration.Seconds()), maxShots)
	dueAt := func(i int) time.Duration { return time.Duration(float64(i) * float64(time.Second) / st.rate) }
	shots := make([]shot, n)
	jobs := make(chan int) // unbuffered: a send succeeds only when a sender is free
	var flying inFlight
	var wg sync.WaitGroup
	var last atomic.Int64                          // the last answer, from start
	start := time.Now().Add(10 * time.Millisecond) // once the senders below wait for work
	for range min(st.maxInFlight, n) {
		wg.Go(func() {
			for i := range jobs {
				due := start.Add(dueAt(i))
				flying.add()
				sent := time.Now()
				rctx, cancel := context.WithTimeout(ctx, st.timeout)
				class := shoot(rctx, first+i)
				cancel()
				done := time.Now()
				flying.done()
				// Measured from due, not from sent: the wait for a sender is part of the latency.
				shots[i] = shot{due: dueAt(i), lag: sent.Sub(due), latency: done.Sub(due), class: class}
				for at := int64(done.Sub(start)); ; {
					l := last.Load()
					if at <= l || last.CompareAndSwap(l, at) {
						break
					}
				}
			}
		})
	}
	run := &stepRun{scheduled: n, start: start}
	stopAt := time.NewTimer(time.Until(start.Add(st.duration + sendGrace(st.duration))))
	defer stopAt.Stop()
	sent := 0
	// blockedUntil is when the last wait for a free sender ended: a request due before it
	// was due while every sender was taken.
	var blockedUntil time.Time
schedule:
	for i := range n {
		due := start.Add(dueAt(i))
		for wait := time.Until(due); wait > 0; wait = time.Until(due) {
			if ctx.Err() != nil {
				break schedule
			}
			nap(min(wait, maxNap))
		}
		if !due.After(blockedUntil) {
			run.noSlot++
		}
		select {
		case jobs <- i:
		default:
			if due.After(blockedUntil) {
				run.noSlot++
			}
			select {
			case jobs <- i:
			case <-ctx.Done():
				break schedule
			case <-stopAt.C:
				break schedule
			}
			blockedUntil = time.Now()
		}
		sent++
	}
	close(jobs)
	wg.Wait()
	run.notSent = n - sent
	// Requests are handed out in order, so the first `sent` are the ones that went.
	run.shots = shots[:sent]
	run.elapsed = time.Duration(last.Load())
	run.inFlight = int(flying.most.Load())
	return run
}

// runClosed runs workers that each send, wait for the answer, and send again, for the
// step's duration. Latency is from each request's actual send: what a closed loop reports.
func runClosed(ctx context.Context, st loadStep, first int, shoot shooter) *stepRun {
	var next atomic.Int64
	var mu sync.Mutex
	var all []shot
	var flying inFlight
	start := time.Now()
	stop := start.Add(st.duration)
	var wg sync.WaitGroup
	for range st.workers {
		wg.Go(func() {
			var mine []shot
			for ctx.Err() == nil && time.Now().Before(stop) {
				i := int(next.Add(1) - 1)
				flying.add()
				sent := time.Now()
				rctx, cancel := context.WithTimeout(ctx, st.timeout)
				class := shoot(rctx, first+i)
				cancel()
				flying.done()
				mine = append(mine, shot{due: sent.Sub(start), latency: time.Since(sent), class: class})
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return &stepRun{shots: all, start: start, elapsed: time.Since(start), inFlight: int(flying.most.Load())}
}

// TailMS is a latency distribution in milliseconds, tail included.
type TailMS struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99_9"`
	Max  float64 `json:"max"`
}

// tailOf summarises latencies (sorted in place).
func tailOf(lat []time.Duration) TailMS {
	if len(lat) == 0 {
		return TailMS{}
	}
	slices.Sort(lat)
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	at := func(q float64) float64 { return ms(lat[min(len(lat)-1, int(q*float64(len(lat))))]) }
	return TailMS{N: len(lat), Mean: ms(sum / time.Duration(len(lat))), P50: at(0.50), P90: at(0.90), P99: at(0.99),
		P999: at(0.999), Max: ms(lat[len(lat)-1])}
}
