package e2e_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/surgekit/surge/internal/app"
)

// scrape reads the server's /metrics into metric families.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// histogramSum is the sum of the series of a histogram whose labels include want.
func histogramSum(fams map[string]*dto.MetricFamily, name string, want map[string]string) (sum float64, count uint64) {
	f := fams[name]
	if f == nil {
		return 0, 0
	}
	for _, m := range f.GetMetric() {
		if hasLabels(m, want) {
			sum += m.GetHistogram().GetSampleSum()
			count += m.GetHistogram().GetSampleCount()
		}
	}
	return sum, count
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	for k, v := range want {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == k && l.GetValue() == v {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// A request's recorded latency includes the parsing and validation of its document, not only
// its execution (issue 13, item 5: a 452 ms request was recorded as 0.05 s). The document is
// one gqlparser validates in quadratic time (fields sharing a response name), under limits
// raised to let it through, so that validation dominates the request.
func TestLatencyIncludesParseAndValidation(t *testing.T) {
	e := start(t, func(c *app.Config) { c.MaxTokens, c.MaxFields, c.MaxComplexity = 50_000, 50_000, 50_000 })
	var before, after map[string]*dto.MetricFamily
	var took time.Duration
	// Double the fields until validation takes long enough to stand out (1 000 take ≈ 0.7 s
	// under -race, ≈ 0.1 s without).
	for fields := 500; took < 150*time.Millisecond; fields *= 2 {
		if fields > 8000 {
			t.Fatalf("%d fields took %v: too fast to tell validation from execution", fields/2, took)
		}
		doc := "{ shops(first: 1) { edges { node {" + strings.Repeat(" id", fields) + " } } } }"
		before = scrape(t, e.url+"/metrics")
		began := time.Now()
		if r := e.do("", doc, nil); r.Status != http.StatusOK || len(r.Errors) > 0 {
			t.Fatalf("%d fields: %d %.300s", fields, r.Status, r.Raw)
		}
		took = time.Since(began)
		after = scrape(t, e.url+"/metrics")
	}
	for _, h := range []struct {
		name   string
		labels map[string]string
	}{
		{"surge_graphql_duration_seconds", map[string]string{"type": "query"}},
		{"surge_http_request_duration_seconds", map[string]string{"route": "/query"}},
	} {
		s0, n0 := histogramSum(before, h.name, h.labels)
		s1, n1 := histogramSum(after, h.name, h.labels)
		recorded := time.Duration((s1 - s0) * float64(time.Second))
		if n1-n0 != 1 || recorded < took*7/10 {
			t.Errorf("%s%v: %d requests recorded, %v of latency; the client waited %v", h.name, h.labels, n1-n0, recorded, took)
		}
	}
}
