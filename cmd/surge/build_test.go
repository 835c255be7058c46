package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/surgekit/surge/internal/testenv"
)

// Issue 23, item 8: the first `go run ./cmd/surge` compiles every package the server links
// (135 s, silent, on a cold build cache), so what it does not need stays out of its import
// graph: gRPC and its gateway, which the OpenTelemetry SDK's OTLP/HTTP exporter brought in
// (about a hundred packages), and the test helpers.
func TestServerLinksNothingItDoesNotNeed(t *testing.T) {
	out, err := exec.Command(testenv.GoCommand(), "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	banned := []string{"google.golang.org/grpc", "github.com/grpc-ecosystem/grpc-gateway", "github.com/surgekit/surge/internal/testenv"}
	for _, pkg := range strings.Fields(string(out)) {
		for _, b := range banned {
			if strings.HasPrefix(pkg+"/", b+"/") {
				t.Errorf("cmd/surge links %s", pkg)
			}
		}
	}
}
