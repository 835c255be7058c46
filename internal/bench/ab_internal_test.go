package bench

import (
	"io"
	"testing"
)

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

// noteGrabs pairs each round of each server with floor2's round of the same number.
func TestABNoteGrabs(t *testing.T) {
	step := func(rps, p99 float64, round int) StepResult {
		return StepResult{ThroughputRPS: rps, Latency: TailMS{P99: p99}, Round: round}
	}
	target := func(kind string, rounds ...StepResult) HTTPTargetResult {
		return HTTPTargetResult{Kind: kind, Steps: []StepResult{{Rounds: rounds}}}
	}
	r := HTTPResult{Targets: []HTTPTargetResult{
		target("floor0", step(9000, 1, 1), step(9000, 1, 2)),
		target("floor2", step(1000, 10, 1), step(2000, 20, 2)),
		target("target", step(900, 20, 1), step(1000, 30, 2)),
		target("target", step(1100, 5, 1), step(2200, 40, 2)),
	}}
	ab := &abRun{o: abOpts{closed: 200, rate: 2000}, out: &output{w: io.Discard}, figures: map[string]*ABFigure{}}
	ab.builds = [2]abBuild{{name: "ref"}, {name: "work"}}
	for _, mode := range []string{"closed", "open"} {
		if err := ab.noteGrabs(mode, r); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string][2][]float64{
		"grabs: answers/s ÷ floor2's (closed loop, 200 workers)": {{0.9, 0.5}, {1.1, 1.1}},
		"grabs: p99 ÷ floor2's (open loop, 2000/s)":              {{2, 1.5}, {0.5, 2}},
	}
	for name, w := range want {
		f := ab.figures[name]
		if f == nil {
			t.Fatalf("no figure %q: %v", name, ab.order)
		}
		if !equalFloats(f.Ref, w[0]) || !equalFloats(f.WorkTree, w[1]) {
			t.Errorf("%s: ref %v work %v, want %v %v", name, f.Ref, f.WorkTree, w[0], w[1])
		}
	}
	r.Targets = r.Targets[:3]
	if err := ab.noteGrabs("open", r); err == nil {
		t.Error("a result without the second server's rounds was taken")
	}
}

func equalFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
