package app

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

func TestParseConfigObservability(t *testing.T) {
	c, err := ParseConfig(nil, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Observability != (Observability{LogFormat: "text", LogLevel: slog.LevelInfo, AccessLog: true, TraceSampleRatio: 1}) {
		t.Fatalf("defaults: %+v", c.Observability)
	}
	c, err = ParseConfig([]string{"-log-level", "warn", "-trace-sample-ratio", "0.25"}, envOf(map[string]string{
		"SURGE_ADMIN_ADDR": "127.0.0.1:9090", "SURGE_LOG_FORMAT": "json", "SURGE_LOG_LEVEL": "debug",
		"SURGE_ACCESS_LOG": "false", "SURGE_OTLP_ENDPOINT": "http://collector:4318",
	}))
	want := Observability{AdminAddr: "127.0.0.1:9090", LogFormat: "json", LogLevel: slog.LevelWarn,
		OTLPEndpoint: "http://collector:4318", TraceSampleRatio: 0.25}
	if err != nil || c.Observability != want {
		t.Fatalf("set: %+v, %v; want %+v", c.Observability, err, want)
	}
	for _, bad := range []map[string]string{
		{"SURGE_LOG_FORMAT": "xml"},
		{"SURGE_LOG_LEVEL": "loud"},
		{"SURGE_ACCESS_LOG": "sometimes"},
		{"SURGE_OTLP_ENDPOINT": "collector:4318"},
		{"SURGE_OTLP_ENDPOINT": "grpc://collector:4317"},
		{"SURGE_TRACE_SAMPLE_RATIO": "1.5"},
		{"SURGE_TRACE_SAMPLE_RATIO": "-0.1"},
	} {
		if c, err := ParseConfig(nil, envOf(bad)); err == nil {
			t.Errorf("%v accepted: %+v", bad, c.Observability)
		}
	}
}

// A JSON logger's lines are JSON, and those logged with a request's context name it.
func TestConfigLoggerJSON(t *testing.T) {
	c, err := ParseConfig(nil, envOf(map[string]string{"SURGE_LOG_FORMAT": "json", "SURGE_LOG_LEVEL": "warn"}))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	log := c.Logger(&out)
	log.Info("dropped: below the level")
	log.WarnContext(context.Background(), "kept", "k", 1)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var rec map[string]any
	if len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &rec) != nil || rec["msg"] != "kept" || rec["level"] != "WARN" {
		t.Fatalf("log output %q", out.String())
	}
}
