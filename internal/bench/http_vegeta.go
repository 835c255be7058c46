package bench

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// VegetaResult is vegeta's report of the same load on the same target, run right after ours.
// Its latencies are from each request's actual send (vegeta does not correct for a request
// sent late), which agrees with ours while neither tool runs out of senders.
type VegetaResult struct {
	Command       string  `json:"command"`
	Requests      int     `json:"requests"`
	RateRPS       float64 `json:"rate_rps"`       // requests sent per second
	ThroughputRPS float64 `json:"throughput_rps"` // successes per second, to the last answer
	Success       float64 `json:"success"`        // share of 2xx/3xx answers
	P50           float64 `json:"p50_ms"`
	P90           float64 `json:"p90_ms"`
	P99           float64 `json:"p99_ms"`
	Max           float64 `json:"max_ms"`
	Error         string  `json:"error,omitempty"`
}

// runVegeta runs `vegeta attack` with the step's rate (or workers), duration, bound and
// timeout against g, every user's grab as one target in turn, then `vegeta report -type json`.
func runVegeta(ctx context.Context, bin string, g *grabTarget, st loadStep) *VegetaResult {
	res := &VegetaResult{}
	dir, err := os.MkdirTemp("", "surge-bench-vegeta-")
	if err != nil {
		res.Error = err.Error()
		return res
	}
	defer os.RemoveAll(dir)
	var targets bytes.Buffer
	enc := json.NewEncoder(&targets)
	body := base64.StdEncoding.EncodeToString(g.body)
	for _, tok := range g.tokens {
		_ = enc.Encode(map[string]any{"method": "POST", "url": g.res.URL, "body": body, "header": map[string][]string{
			"Content-Type": {"application/json"}, "Accept": {"application/json"}, "Authorization": {"Bearer " + tok}}})
	}
	tf, rf := filepath.Join(dir, "targets.json"), filepath.Join(dir, "results.bin")
	if err := os.WriteFile(tf, targets.Bytes(), 0o600); err != nil {
		res.Error = err.Error()
		return res
	}
	args := []string{"attack", "-format", "json", "-targets", tf, "-duration", st.duration.String(), "-timeout", st.timeout.String(), "-output", rf}
	if st.rate > 0 {
		args = append(args, "-rate", strconv.FormatFloat(st.rate, 'f', -1, 64)+"/1s", "-max-workers", strconv.Itoa(st.maxInFlight))
	} else {
		args = append(args, "-rate", "0", "-workers", strconv.Itoa(st.workers), "-max-workers", strconv.Itoa(st.workers))
	}
	res.Command = bin + " " + strings.Join(args, " ")
	var stderr bytes.Buffer
	attack := exec.CommandContext(ctx, bin, args...)
	attack.Stderr = &stderr
	if err := attack.Run(); err != nil {
		res.Error = fmt.Sprintf("vegeta attack: %v: %s", err, strings.TrimSpace(stderr.String()))
		return res
	}
	report, err := exec.CommandContext(ctx, bin, "report", "-type", "json", rf).Output()
	if err != nil {
		res.Error = fmt.Sprintf("vegeta report: %v", err)
		return res
	}
	var r struct {
		Latencies struct {
			P50 int64 `json:"50th"`
			P90 int64 `json:"90th"`
			P99 int64 `json:"99th"`
			Max int64 `json:"max"`
		} `json:"latencies"`
		Requests   int     `json:"requests"`
		Rate       float64 `json:"rate"`
		Throughput float64 `json:"throughput"`
		Success    float64 `json:"success"`
	}
	if err := json.Unmarshal(report, &r); err != nil {
		res.Error = fmt.Sprintf("vegeta report: %v: %.200s", err, report)
		return res
	}
	nsToMS := func(ns int64) float64 { return float64(ns/1000) / 1000 }
	res.Requests, res.RateRPS, res.ThroughputRPS, res.Success = r.Requests, round3(r.Rate), round3(r.Throughput), r.Success
	res.P50, res.P90, res.P99, res.Max = nsToMS(r.Latencies.P50), nsToMS(r.Latencies.P90), nsToMS(r.Latencies.P99), nsToMS(r.Latencies.Max)
	return res
}

func printVegeta(out *output, v *VegetaResult) {
	if v.Error != "" {
		out.printf("  %-30s %s\n", "  (vegeta)", v.Error)
		return
	}
	out.printf("  %-30s %8s %8d %7s %6s %8.0f %9.0f %8.3f %8.3f %8.3f %8s %8.3f  success %.4f\n", "  (vegeta, same step)", "", v.Requests, "", "",
		v.RateRPS, v.ThroughputRPS, v.P50, v.P90, v.P99, "", v.Max, v.Success)
}
