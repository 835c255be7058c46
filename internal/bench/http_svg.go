package bench

import (
	"fmt"
	"html"
	"math"
	"os"
	"strings"
)

// writeLatencySVG plots p99 (solid) and p50 (dashed) against offered rate for every target,
// latency on a log scale (a curve spans a few tenths of a millisecond to seconds), and the
// p99 bound as a dotted line. The legend, right of the plot, names each target (floor0,
// floor2, the name given with -target name=URL, else its URL) and the bound, so no label lies
// on the curves. Hand-written SVG: no dependency, opens in any browser.
func writeLatencySVG(path string, res *HTTPResult) error {
	const (
		w, h                   = 800.0, 440.0
		left, right, top, bott = 64.0, 230.0, 40.0, 52.0
	)
	pw, ph := w-left-right, h-top-bott
	colors := []string{"#888888", "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2"}

	maxRate, lo, hi := 0.0, math.Inf(1), math.Inf(-1)
	for _, t := range res.Targets {
		for _, s := range t.Steps {
			maxRate = max(maxRate, s.Rate)
			for _, v := range []float64{s.Latency.P50, s.Latency.P99} {
				if v > 0 {
					lo, hi = min(lo, v), max(hi, v)
				}
			}
		}
	}
	if maxRate == 0 || math.IsInf(lo, 1) {
		return fmt.Errorf("no open-loop step to plot")
	}
	hi = max(hi, res.P99MaxMS)
	ylo, yhi := math.Floor(math.Log10(max(lo, 0.001))), math.Ceil(math.Log10(hi))
	if yhi <= ylo {
		yhi = ylo + 1
	}
	x := func(rate float64) float64 { return left + pw*rate/(maxRate*1.05) }
	y := func(msv float64) float64 { return top + ph*(1-(math.Log10(max(msv, 0.001))-ylo)/(yhi-ylo)) }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", w, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	title := "grab latency against offered rate (open loop; p99 solid, p50 dashed)"
	if res.LoadBefore != "" {
		title += ", load average " + res.LoadBefore
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="20" font-size="13">%s</text>`+"\n", left, html.EscapeString(title))
	// Axes, decades of latency, and the rates of the sweep.
	fmt.Fprintf(&b, `<path d="M%.1f %.1f V%.1f H%.1f" stroke="black" fill="none"/>`+"\n", left, top, top+ph, left+pw)
	for d := ylo; d <= yhi; d++ {
		v := math.Pow(10, d)
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#ddd"/>`, left, left+pw, y(v), y(v))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, y(v)+4, trimFloat(v))
	}
	fmt.Fprintf(&b, `<text transform="translate(16 %.1f) rotate(-90)" text-anchor="middle">latency (ms, log scale)</text>`+"\n", top+ph/2)
	for _, r := range res.Rates {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="black"/>`, x(r), x(r), top+ph, top+ph+5)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x(r), top+ph+18, trimFloat(r))
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">offered rate (grabs/s)</text>`+"\n", left+pw/2, h-12)
	fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="black" stroke-dasharray="2 3"/>`+"\n", left, left+pw, y(res.P99MaxMS), y(res.P99MaxMS))
	legend := func(i int, dash, color, label string) {
		ly := top + 10 + float64(i)*18
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/>`, left+pw+14, left+pw+34, ly, ly, color, dash)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", left+pw+40, ly+4, html.EscapeString(clip(label, 24)))
	}
	// One colour per target: p99 solid with points, p50 dashed.
	for i, t := range res.Targets {
		c := colors[i%len(colors)]
		var p99, p50 []string
		for _, s := range t.Steps {
			if s.Rate > 0 && s.Latency.N > 0 {
				p99 = append(p99, fmt.Sprintf("%.1f,%.1f", x(s.Rate), y(s.Latency.P99)))
				p50 = append(p50, fmt.Sprintf("%.1f,%.1f", x(s.Rate), y(s.Latency.P50)))
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`, x(s.Rate), y(s.Latency.P99), c)
			}
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(p99, " "), c)
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="1.5" stroke-dasharray="6 4"/>`+"\n", strings.Join(p50, " "), c)
		legend(i, "", c, t.Name)
	}
	legend(len(res.Targets), ` stroke-dasharray="2 3"`, "black", "p99 bound "+trimFloat(res.P99MaxMS)+" ms")
	b.WriteString("</svg>\n")
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// trimFloat prints 0.1, 1, 2000: no trailing zeros.
func trimFloat(v float64) string {
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.3f", v), "0"), ".")
}
