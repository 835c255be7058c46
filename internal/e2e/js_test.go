package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/surgekit/surge/internal/browsertest"
)

// jsTools are the directories of the JavaScript tools the tests drive, installed once by
// scripts/ensure-js-clients.sh: SURGE_JS_CLIENTS_DIR (Apollo Client, graphql-ws, ws) and
// SURGE_CODEGEN_DIR (GraphQL Codegen and its client preset).
var jsTools = sync.OnceValues(func() (map[string]string, error) {
	out, err := exec.Command("bash", "../../scripts/ensure-js-clients.sh").Output()
	if err != nil {
		return nil, errors.New("scripts/ensure-js-clients.sh: " + err.Error() + " " + exitStderr(err))
	}
	dirs := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			dirs[k] = v
		}
	}
	return dirs, nil
})

func jsTool(t *testing.T, name string) string {
	t.Helper()
	dirs, err := jsTools()
	if err != nil {
		t.Fatal(err)
	}
	if dirs[name] == "" {
		t.Fatalf("scripts/ensure-js-clients.sh printed no %s", name)
	}
	return dirs[name]
}

func jsClientsDir(t *testing.T) string { return jsTool(t, "SURGE_JS_CLIENTS_DIR") }

// runNode runs the ES module script with Node, resolving packages from the JS clients'
// directory, with args as process.argv[2:]; it decodes the single JSON line the script prints
// into out.
func runNode(t *testing.T, script string, out any, args ...string) {
	t.Helper()
	dir := jsClientsDir(t)
	// Node resolves bare imports of an ES module from the module's own directory upwards, not
	// from NODE_PATH: the script runs from inside the clients' directory.
	file := filepath.Join(dir, "surge-test-"+strings.ReplaceAll(t.Name(), "/", "-")+".mjs")
	if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(file)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	raw, err := exec.CommandContext(ctx, "node", append([]string{file}, args...)...).Output()
	if err != nil {
		t.Fatalf("node: %v\n%s\nstdout: %s", err, exitStderr(err), raw)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatalf("node printed %s: %v", raw, err)
	}
}

// needChromium skips the test under -short when no Chromium is installed, and fails it
// otherwise.
func needChromium(t *testing.T) {
	t.Helper()
	if _, err := browsertest.Chromium(); err != nil {
		if testing.Short() && errors.Is(err, browsertest.ErrNoChromium) {
			t.Skipf("-short and %v", err)
		}
		t.Fatalf("%v (or run go test -short to skip this test)", err)
	}
}
