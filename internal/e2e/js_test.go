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

// jsClients is the directory whose node_modules hold the JavaScript clients the tests drive
// (Apollo Client, graphql-ws, ws), installed once by scripts/ensure-js-clients.sh.
var jsClients = sync.OnceValues(func() (string, error) {
	out, err := exec.Command("bash", "../../scripts/ensure-js-clients.sh").Output()
	if err != nil {
		return "", errors.New("scripts/ensure-js-clients.sh: " + err.Error() + " " + exitStderr(err))
	}
	return strings.TrimPrefix(strings.TrimSpace(string(out)), "SURGE_JS_CLIENTS_DIR="), nil
})

func jsClientsDir(t *testing.T) string {
	t.Helper()
	dir, err := jsClients()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

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
