package bench

import "testing"

// A repeated step holds the p99 bound when most of its rounds do, whichever round stalled,
// and the highest rate held in every round is told apart from the majority's.
func TestRepeatedStepHoldsByMajority(t *testing.T) {
	round := func(rate, p99 float64, errs int64) StepResult {
		s := StepResult{Rate: rate, Scheduled: 1000, Sent: 1000, Latency: TailMS{N: 1000, P99: p99}, Errors: map[string]int64{}}
		if errs > 0 {
			s.Errors["timeout"] = errs
		}
		return s
	}
	const bound = 25
	steps := []StepResult{
		medianRound([]StepResult{round(1000, 2, 0), round(1000, 3, 0), round(1000, 400, 0)}, bound),  // one stall
		medianRound([]StepResult{round(2000, 9, 0), round(2000, 8, 50), round(2000, 10, 0)}, bound),  // failures in one
		medianRound([]StepResult{round(3000, 30, 0), round(3000, 12, 0), round(3000, 90, 0)}, bound), // most over
		medianRound([]StepResult{round(4000, 5, 0), round(4000, 5, 0), round(4000, 5, 0)}, bound),    // after a failed rate
	}
	for i, want := range []struct {
		p99  float64
		held int
	}{{3, 2}, {9, 2}, {30, 1}, {5, 3}} {
		if s := steps[i]; s.Latency.P99 != want.p99 || s.RoundsHeld != want.held || len(s.Rounds) != 3 {
			t.Errorf("step %d: p99 %v, %d rounds held of %d; want %v, %d of 3", i, s.Latency.P99, s.RoundsHeld, len(s.Rounds), want.p99, want.held)
		}
	}
	g := &grabTarget{res: HTTPTargetResult{Kind: "target", Steps: steps}}
	compare(httpOpts{p99Max: bound, repeat: 3}, []*grabTarget{g})
	if g.res.MaxRateP99OK != 2000 || g.res.MaxRateEveryRound != 0 {
		t.Errorf("max rate %v (want 2000: the majority held up to it), every round %v (want 0: the first rate stalled once)",
			g.res.MaxRateP99OK, g.res.MaxRateEveryRound)
	}
	// Even rounds: the upper median, so that a tie never favours the server.
	if s := medianRound([]StepResult{round(1000, 2, 0), round(1000, 40, 0)}, bound); s.Latency.P99 != 40 || s.holds(bound) {
		t.Errorf("two rounds, one over: p99 %v, holds %v; want 40, false", s.Latency.P99, s.holds(bound))
	}
}

// A closed loop's steps give their answers per second as a multiple of floor2's, the median
// round's against floor2's median round.
func TestClosedLoopThroughputAgainstFloor2(t *testing.T) {
	step := func(rps ...float64) StepResult {
		var rounds []StepResult
		for _, r := range rps {
			rounds = append(rounds, StepResult{Workers: 200, Sent: 1000, ThroughputRPS: r})
		}
		return medianRound(rounds, 25)
	}
	f2 := &grabTarget{res: HTTPTargetResult{Kind: "floor2", Steps: []StepResult{step(7000, 7300, 8000)}}}
	ours := &grabTarget{res: HTTPTargetResult{Kind: "target", Steps: []StepResult{step(9900, 2000, 9000)}}}
	compare(httpOpts{p99Max: 25, closed: 200, repeat: 3}, []*grabTarget{f2, ours})
	if got := ours.res.Steps[0].ThroughputVsFloor2; got != round3(9000.0/7300) {
		t.Errorf("answers/s %v× floor2's, want %v (9 000 against 7 300, the medians)", got, round3(9000.0/7300))
	}
}

// A target is a URL, or name=URL; a URL's own "=" (in its query) does not make a name.
func TestSplitTarget(t *testing.T) {
	for _, c := range []struct{ in, name, url string }{
		{"http://127.0.0.1:8080", "", "http://127.0.0.1:8080"},
		{"before=http://127.0.0.1:8080", "before", "http://127.0.0.1:8080"},
		{"http://h:1/query?a=b", "", "http://h:1/query?a=b"},
		{"=http://h:1", "", "=http://h:1"},
	} {
		if name, url := splitTarget(c.in); name != c.name || url != c.url {
			t.Errorf("splitTarget(%q) = %q, %q; want %q, %q", c.in, name, url, c.name, c.url)
		}
	}
}
