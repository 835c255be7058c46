package bench

import (
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"os"
	"strings"
	"time"
)

// writeReport writes a self-contained HTML page (inline CSS and SVG, no external URL): the
// configuration, the figures, a latency histogram, throughput over time, the outcome counts,
// the verification and the baseline ratio.
func writeReport(path string, res *SeckillResult, ld *load) error {
	cfg, _ := json.MarshalIndent(map[string]any{
		"mode": res.Mode, "targets": res.Targets, "redis": res.Redis, "database": res.Database, "strategy": res.Strategy, "consumer": res.Consumer,
		"namespace": res.Namespace, "users": res.Users, "attempts": res.Attempts, "concurrency": res.Concurrency,
		"stock": res.Stock, "voucher": res.VoucherID, "run": res.Run,
	}, "", "  ")
	oc := res.Outcomes.list()
	type bar struct {
		Name string
		N    int64
		W    float64
	}
	var outcomes []bar
	var most int64 = 1
	for _, n := range oc {
		most = max(most, n)
	}
	for i, n := range oc {
		outcomes = append(outcomes, bar{outcomeNames[i], n, 400 * float64(n) / float64(most)})
	}
	data := map[string]any{
		"R":         res,
		"Config":    string(cfg),
		"Hist":      template.HTML(histogramSVG(ld.lat)),
		"Series":    template.HTML(seriesSVG(res.Series, res.SeriesStepMS)),
		"Outcomes":  outcomes,
		"Generated": time.Now().UTC().Format(time.RFC3339),
	}
	var b strings.Builder
	if err := reportTmpl.Execute(&b, data); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// histogramSVG draws the latencies (sorted) in 40 bins from 0 to the p99.9, the rest in a
// last "more" bin.
func histogramSVG(lat []time.Duration) string {
	const w, h, bins = 720.0, 220.0, 40
	if len(lat) == 0 {
		return "<p>no samples</p>"
	}
	top := lat[min(len(lat)-1, int(0.999*float64(len(lat))))]
	if top <= 0 {
		top = time.Microsecond
	}
	counts := make([]int, bins+1)
	for _, d := range lat {
		i := int(float64(d) / float64(top) * bins)
		counts[min(i, bins)]++
	}
	most := 1
	for _, c := range counts {
		most = max(most, c)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg width="%.0f" height="%.0f" role="img" aria-label="latency histogram">`, w, h+40)
	bw := w / float64(bins+1)
	for i, c := range counts {
		bh := h * float64(c) / float64(most)
		cls := "b"
		if i == bins {
			cls = "m"
		}
		fmt.Fprintf(&b, `<rect class="%s" x="%.1f" y="%.1f" width="%.1f" height="%.1f"><title>%s: %d</title></rect>`,
			cls, float64(i)*bw, h-bh, bw-1, bh, binLabel(i, bins, top), c)
	}
	for _, i := range []int{0, bins / 4, bins / 2, 3 * bins / 4, bins} {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f">%.2f ms</text>`, float64(i)*bw, h+16, ms(top)*float64(i)/bins)
	}
	fmt.Fprintf(&b, `<text x="0" y="%.0f">%d calls; last bin: above the p99.9 (%.2f ms)</text></svg>`, h+34, len(lat), ms(top))
	return b.String()
}

func binLabel(i, bins int, top time.Duration) string {
	if i == bins {
		return fmt.Sprintf("> %.3f ms", ms(top))
	}
	return fmt.Sprintf("%.3f–%.3f ms", ms(top)*float64(i)/float64(bins), ms(top)*float64(i+1)/float64(bins))
}

// seriesSVG draws the grabs completed per step as a rate (per second) over time.
func seriesSVG(series []int64, stepMS int) string {
	const w, h = 720.0, 220.0
	if len(series) == 0 || stepMS <= 0 {
		return "<p>no samples</p>"
	}
	var peak float64 = 1
	for _, n := range series {
		peak = math.Max(peak, float64(n)*1000/float64(stepMS))
	}
	var pts []string
	for i, n := range series {
		x := w * float64(i) / math.Max(1, float64(len(series)-1))
		y := h - h*(float64(n)*1000/float64(stepMS))/peak
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg width="%.0f" height="%.0f" role="img" aria-label="throughput over time">`, w, h+40)
	fmt.Fprintf(&b, `<polyline class="l" points="%s"/>`, strings.Join(pts, " "))
	fmt.Fprintf(&b, `<text x="0" y="12">peak %.0f/s</text>`, peak)
	fmt.Fprintf(&b, `<text x="0" y="%.0f">0 s</text><text x="%.0f" y="%.0f">%.1f s</text>`, h+16, w-60, h+16, float64(len(series)*stepMS)/1000)
	fmt.Fprintf(&b, `<text x="0" y="%.0f">grabs completed per %d ms, as a rate per second</text></svg>`, h+34, stepMS)
	return b.String()
}

var reportTmpl = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>surge bench seckill {{.R.Run}}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:2em;max-width:60em;color:#222}
h1{font-size:1.4em} h2{font-size:1.1em;margin-top:1.6em}
table{border-collapse:collapse} td,th{padding:2px 10px;text-align:left;border-bottom:1px solid #ddd}
td.n{text-align:right;font-variant-numeric:tabular-nums}
pre{background:#f6f6f6;padding:8px}
.ok{color:#070;font-weight:bold} .bad{color:#b00;font-weight:bold}
svg text{font-size:11px;fill:#444} rect.b{fill:#4a7bd0} rect.m{fill:#d07a4a} polyline.l{fill:none;stroke:#4a7bd0;stroke-width:2}
.o{display:inline-block;height:12px;background:#4a7bd0}
</style></head><body>
<h1>surge bench seckill — run {{.R.Run}}</h1>
<p>Generated {{.Generated}}. Mode <b>{{.R.Mode}}</b>, strategy <b>{{.R.Strategy}}</b>, consumer <b>{{.R.Consumer}}</b>, voucher {{.R.VoucherID}}.</p>
<h2>Result</h2>
<p>{{if .R.OK}}<span class="ok">Invariants hold.</span>{{else}}<span class="bad">Invariants violated.</span>{{end}}</p>
<table>
<tr><th>grabs</th><td class="n">{{.R.Grabs}}</td></tr>
<tr><th>grab phase</th><td class="n">{{printf "%.0f" .R.GrabMS}} ms</td></tr>
<tr><th>throughput</th><td class="n">{{printf "%.0f" .R.ThroughputRPS}} grabs/s</td></tr>
<tr><th>latency p50 / p90 / p99 / max</th><td class="n">{{printf "%.3f" .R.LatencyJSON.P50}} / {{printf "%.3f" .R.LatencyJSON.P90}} / {{printf "%.3f" .R.LatencyJSON.P99}} / {{printf "%.3f" .R.LatencyJSON.Max}} ms</td></tr>
<tr><th>logins</th><td class="n">{{.R.Users}} in {{printf "%.0f" .R.LoginMS}} ms</td></tr>
<tr><th>redis-benchmark (same script, -c 50)</th><td class="n">{{if .R.Baseline.RPS}}{{printf "%.0f" .R.Baseline.Before}}/s before, {{printf "%.0f" .R.Baseline.After}}/s after{{else}}{{.R.Baseline.Note}}{{end}}</td></tr>
<tr><th>ours / redis-benchmark</th><td class="n">{{if .R.Ratio}}{{printf "%.3f" .R.Ratio}}×{{else}}—{{end}}</td></tr>
</table>
<h2>Outcomes</h2>
<table>{{range .Outcomes}}<tr><th>{{.Name}}</th><td class="n">{{.N}}</td><td><span class="o" style="width:{{printf "%.0f" .W}}px"></span></td></tr>{{end}}</table>
<h2>Latency per grab call</h2>
{{.Hist}}
<h2>Throughput over time</h2>
{{.Series}}
<h2>Verification</h2>
{{with .R.Verification}}{{if .Skipped}}<p>Skipped: {{.Skipped}}</p>{{else}}
<table>
<tr><th>orders in MySQL</th><td class="n">{{.OrdersDB}}</td></tr>
<tr><th>users admitted</th><td class="n">{{.Admitted}}</td></tr>
<tr><th>min(stock, users)</th><td class="n">{{.Expected}}</td></tr>
<tr><th>MySQL stock</th><td class="n">{{.StockDB}}</td></tr>
{{if .StockRedis}}<tr><th>Redis stock / buyers</th><td class="n">{{.StockRedis}} / {{.BuyersRedis}}</td></tr>{{end}}
<tr><th>stream drained in</th><td class="n">{{printf "%.0f" .DrainMS}} ms</td></tr>
</table>
{{if .Violations}}<ul>{{range .Violations}}<li class="bad">{{.}}</li>{{end}}</ul>{{end}}
{{if .Notes}}<ul>{{range .Notes}}<li>{{.}}</li>{{end}}</ul>{{end}}{{end}}{{end}}
<h2>Configuration</h2>
<pre>{{.Config}}</pre>
{{if .R.Baseline.Command}}<p>Baseline command: <code>{{.R.Baseline.Command}}</code></p>{{end}}
</body></html>
`))
