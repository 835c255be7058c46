// Package deploy_test checks what deploy/ ships: the Prometheus configuration and alert rules
// with promtool (their syntax and their unit tests), the Grafana dashboard's shape, the
// docker-compose wiring, and that every metric the dashboard and the rules name exists on a
// live server's /metrics.
package deploy_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/redis/go-redis/v9"
	"gopkg.in/yaml.v3"

	"github.com/surgekit/surge/internal/app"
	"github.com/surgekit/surge/internal/testenv"
)

const (
	promConfig  = "prometheus/prometheus.yml"
	alertRules  = "prometheus/alerts.yml"
	alertTests  = "prometheus/alerts_test.yml"
	dashboard   = "grafana/dashboards/surge.json"
	composeFile = "../docker-compose.yml"
)

// promtool runs promtool; a missing one fails the test with the script that installs it.
func promtool(t *testing.T, args ...string) {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool not found: run `make services` or scripts/ensure-promtool.sh (Debian's prometheus package)")
	}
	out, err := exec.Command(path, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func TestPrometheusConfigAndRules(t *testing.T) {
	promtool(t, "check", "config", promConfig) // checks the rule files it loads too
	promtool(t, "check", "rules", alertRules)
	promtool(t, "test", "rules", alertTests)
}

// Each alert of the rules has a unit test in which it fires.
func TestEveryAlertHasAFiringTest(t *testing.T) {
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				AlertName string           `yaml:"alertname"`
				ExpAlerts []map[string]any `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	readYAML(t, alertRules, &rules)
	readYAML(t, alertTests, &tests)
	fires := map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			fires[a.AlertName] = fires[a.AlertName] || len(a.ExpAlerts) > 0
		}
	}
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			n++
			if !fires[r.Alert] {
				t.Errorf("alert %s has no test case in %s in which it fires", r.Alert, alertTests)
			}
		}
	}
	if n == 0 {
		t.Fatal("no alerts in " + alertRules)
	}
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

// The dashboard is JSON Grafana loads: unique panel ids, every panel on the datasource
// variable with at least one query.
func TestDashboardShape(t *testing.T) {
	var d struct {
		UID        string  `json:"uid"`
		Panels     []panel `json:"panels"`
		Templating struct {
			List []struct {
				Name, Type, Query string
			} `json:"list"`
		} `json:"templating"`
	}
	b, err := os.ReadFile(dashboard)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if d.UID == "" || len(d.Templating.List) != 1 || d.Templating.List[0].Name != "datasource" || d.Templating.List[0].Query != "prometheus" {
		t.Fatalf("dashboard uid %q, templating %+v", d.UID, d.Templating.List)
	}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
			t.Errorf("panel %q: datasource %+v, %d queries", p.Title, p.Datasource, len(p.Targets))
		}
		for _, q := range p.Targets {
			if strings.TrimSpace(q.Expr) == "" {
				t.Errorf("panel %q: empty query", p.Title)
			}
		}
	}
}

// The compose file runs Prometheus and Grafana on deploy/'s files, and Prometheus scrapes the
// address where the app serves /metrics.
func TestComposeWiring(t *testing.T) {
	var compose struct {
		Services map[string]struct {
			Environment map[string]string `yaml:"environment"`
			Volumes     []string          `yaml:"volumes"`
		} `yaml:"services"`
	}
	readYAML(t, composeFile, &compose)
	for _, name := range []string{"app", "prometheus", "grafana", "jaeger"} {
		if _, ok := compose.Services[name]; !ok {
			t.Errorf("compose has no %s service", name)
		}
	}
	for _, name := range []string{"prometheus", "grafana"} {
		for _, v := range compose.Services[name].Volumes {
			if src, _, _ := strings.Cut(v, ":"); strings.HasPrefix(src, "./") {
				if _, err := os.Stat("../" + src); err != nil {
					t.Errorf("%s mounts %s: %v", name, src, err)
				}
			}
		}
	}
	var prom struct {
		ScrapeConfigs []struct {
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	readYAML(t, promConfig, &prom)
	admin := compose.Services["app"].Environment["SURGE_ADMIN_ADDR"]
	if len(prom.ScrapeConfigs) == 0 || len(prom.ScrapeConfigs[0].StaticConfigs) == 0 ||
		prom.ScrapeConfigs[0].StaticConfigs[0].Targets[0] != "app"+admin {
		t.Errorf("Prometheus scrapes %+v; the app serves /metrics on SURGE_ADMIN_ADDR %q", prom.ScrapeConfigs, admin)
	}
	if env := compose.Services["app"].Environment["SURGE_OTLP_ENDPOINT"]; env != "http://jaeger:4318" {
		t.Errorf("app's SURGE_OTLP_ENDPOINT %q, want the jaeger service's OTLP/HTTP port", env)
	}
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// metricName matches the metric names the files mention: the server's own (surge_*) and the
// Go and process collectors' (go_*, process_*).
var metricName = regexp.MustCompile(`\b(?:surge|go|process)_[a-z0-9_]*[a-z0-9]\b`)

// TestNamedMetricsExistOnALiveServer: every metric name the dashboard and the rules (queries,
// summaries and descriptions) mention is on the /metrics of a server running on real Redis
// and MariaDB, after a few requests.
func TestNamedMetricsExistOnALiveServer(t *testing.T) {
	named := map[string][]string{}
	for _, file := range []string{dashboard, alertRules} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range metricName.FindAllString(string(b), -1) {
			named[name] = append(named[name], file)
		}
	}
	if len(named) < 20 {
		t.Fatalf("only %d metric names found in the dashboard and the rules", len(named))
	}

	url := liveServer(t)
	for _, req := range []string{
		`{"query":"{ shopTypes { id } }"}`,
		`{"query":"{ shop(id: \"not an id\") { id } }"}`, // an error with a code
	} {
		resp, err := http.Post(url+"/query", "application/json", strings.NewReader(req))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	exposed := scrape(t, url+"/metrics")
	var missing []string
	for name, files := range named {
		if !exposed[name] {
			missing = append(missing, name+" (in "+strings.Join(unique(files), ", ")+")")
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("%d of %d named metrics are not on a live server's /metrics:\n  %s", len(missing), len(named), strings.Join(missing, "\n  "))
	}
}

// liveServer runs the server (production mode, seeded) on real Redis and a fresh MariaDB
// database, under key prefixes of its own removed at cleanup, and returns its URL.
func liveServer(t *testing.T) string {
	t.Helper()
	run := "deploy-test-" + testenv.Phone()
	vars := map[string]string{
		"SURGE_REDIS_ADDRS":    testenv.RedisAddr(),
		"SURGE_MYSQL_DSN":      testenv.MySQL(t),
		"SURGE_SEED":           "true",
		"SURGE_CACHE_PREFIX":   run + "-c",
		"SURGE_SECKILL_PREFIX": run + "-s",
	}
	cfg, err := app.ParseConfig(nil, func(k string) string { return vars[k] })
	if err != nil {
		t.Fatal(err)
	}
	rdb := testenv.Redis(t)
	t.Cleanup(func() { deleteKeys(rdb, run+"*", "*{"+run+"*") })
	a, err := app.New(context.Background(), cfg, app.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(func() { srv.Close(); a.Close() })
	return srv.URL
}

func deleteKeys(rdb redis.UniversalClient, patterns ...string) {
	ctx := context.Background()
	for _, p := range patterns {
		iter := rdb.Scan(ctx, 0, p, 1000).Iterator()
		for iter.Next(ctx) {
			rdb.Del(ctx, iter.Val())
		}
	}
}

// scrape returns the sample names /metrics exposes (a histogram's _bucket, _sum and _count
// included).
func scrape(t *testing.T, url string) map[string]bool {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for name, f := range fams {
		if len(f.GetMetric()) == 0 {
			continue
		}
		names[name] = true
		if f.GetType() == dto.MetricType_HISTOGRAM || f.GetType() == dto.MetricType_SUMMARY {
			names[name+"_bucket"], names[name+"_sum"], names[name+"_count"] = true, true, true
		}
	}
	return names
}

func unique(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}
