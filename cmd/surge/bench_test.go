package main

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/surgekit/surge/internal/testenv"
)

// The bench subcommand through the real binary: the stampede scenario re-executes this binary as
// `surge bench stampede-worker`, a path only the built command takes.
func TestBenchSubcommand(t *testing.T) {
	bin := surgeBinary(t)
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, "bench", "cache-stampede", "-redis-addrs", testenv.RedisAddr(), "-procs", "2", "-goroutines", "10", "-json-only")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("surge bench cache-stampede: %v\n%s", err, stderr.String())
	}
	var res struct {
		Scenario string `json:"scenario"`
		DBLoads  int    `json:"db_loads"`
		Callers  int    `json:"callers"`
		Errors   int    `json:"errors"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &res); err != nil {
		t.Fatalf("-json-only output is not one JSON object: %v\n%s", err, stdout.String())
	}
	if res.Scenario != "cache-stampede" || res.DBLoads != 1 || res.Callers != 20 || res.Errors != 0 {
		t.Fatalf("got %+v, want one database load for 20 callers in 2 processes", res)
	}

	// No scenario: the list of scenarios and a failure exit.
	stderr.Reset()
	cmd = exec.Command(bin, "bench")
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil {
		t.Error("surge bench without a scenario succeeded")
	}
	for _, s := range []string{"cache-stampede", "cache-penetration", "cache-hit", "lock", "seckill", "drain", "subscriptions"} {
		if !strings.Contains(stderr.String(), s) {
			t.Errorf("surge bench usage does not list %s:\n%s", s, stderr.String())
		}
	}
	if strings.Contains(stderr.String(), "stampede-worker") {
		t.Error("the hidden worker scenario is listed")
	}
}
