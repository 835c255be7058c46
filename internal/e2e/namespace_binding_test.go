package e2e_test

import (
	"bufio"
	"context"
	"database/sql"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/surgekit/surge/internal/testenv"
)

// Issue 23, item 3: deployment C started by mistake with deployment A's namespace (and a
// database of its own) served, and mixed the two deployments' sales. A namespace is bound to
// one database: C refuses to start, naming the namespace, the deployment bound to it and its
// own, unless told to take the namespace over; a server that finds its namespace taken while
// running stops; the binding comes back after Redis loses it.
func TestNamespaceBoundToOneDatabase(t *testing.T) {
	addr, rdb := privateRedis(t)
	ctx := context.Background()
	ns := "bound-" + randomHex(4)
	aDSN, cDSN := testenv.MySQL(t), testenv.MySQL(t)
	vars := func(dsn string, extra ...string) map[string]string {
		v := map[string]string{"SURGE_MYSQL_DSN": dsn, "SURGE_MODE": "dev", "SURGE_NAMESPACE_CHECK_INTERVAL": "300ms"}
		for i := 0; i+1 < len(extra); i += 2 {
			v[extra[i]] = extra[i+1]
		}
		return v
	}
	a := deploy(t, addr, ns, vars(aDSN))
	aID := deploymentIDOf(t, aDSN)
	if got := rdb.Get(ctx, ns+":deployment").Val(); got != aID {
		t.Fatalf("namespace %s bound to %q, want A's deployment %q", ns, got, aID)
	}

	// C, same namespace, its own database: it must not serve.
	cVars := map[string]string{"SURGE_REDIS_ADDRS": addr, "SURGE_NAMESPACE": ns, "SURGE_SEED": "true",
		"SURGE_ADMIN_PHONES": testenv.Phone()}
	for k, v := range vars(cDSN) {
		cVars[k] = v
	}
	stderr, served := surgeUntilExit(t, cVars)
	if served {
		t.Fatalf("C started and serves under A's namespace %s:\n%s", ns, tail(stderr, 2<<10))
	}
	cID := deploymentIDOf(t, cDSN)
	for what, want := range map[string]string{"the namespace": ns, "the deployment bound to it": aID, "its own deployment": cID, "the setting": "SURGE_TAKE_OVER_NAMESPACE"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("C's refusal does not name %s (%s):\n%s", what, want, tail(stderr, 2<<10))
		}
	}
	if got := rdb.Get(ctx, ns+":deployment").Val(); got != aID {
		t.Fatalf("after C's refusal the namespace is bound to %q, want A's %q", got, aID)
	}
	// Nor does a tool rebuild A's sale state from C's database.
	rec := exec.Command(testenv.SurgeBinary(t), "reconcile", "-fix")
	rec.Env = []string{"PATH=" + os.Getenv("PATH"), "SURGE_REDIS_ADDRS=" + addr, "SURGE_MYSQL_DSN=" + cDSN, "SURGE_NAMESPACE=" + ns}
	out, err := rec.CombinedOutput()
	if code := rec.ProcessState.ExitCode(); code != 2 || !strings.Contains(string(out), aID) {
		t.Errorf("surge reconcile -fix on C's database under A's namespace: exit %d (%v), want 2 naming A's deployment:\n%s", code, err, out)
	}
	aAdmin := a.login(t, rdb, a.admin)
	aVoucher := seckillVoucher(t, a.c)
	a.c.waitOrder(aAdmin, str(a.c.grabOK(aAdmin, aVoucher), "orderId"), "CREATED", 10*time.Second)

	// Told to take over a namespace bound to another deployment than the one named: refused.
	stderr, served = surgeUntilExit(t, withVar(cVars, "SURGE_TAKE_OVER_NAMESPACE", cID))
	if served || !strings.Contains(stderr, aID) {
		t.Fatalf("C took over naming the wrong deployment (served %v):\n%s", served, tail(stderr, 2<<10))
	}

	// Told to take it over from A: C starts with the namespace to itself (A's keys deleted) ...
	c := deploy(t, addr, ns, vars(cDSN, "SURGE_TAKE_OVER_NAMESPACE", aID))
	if got := rdb.Get(ctx, ns+":deployment").Val(); got != cID {
		t.Fatalf("after the take-over the namespace is bound to %q, want C's %q", got, cID)
	}
	// ... and A, still running, finds the namespace taken and stops, saying so.
	select {
	case <-a.done:
	case <-time.After(15 * time.Second):
		t.Fatal("A still runs 15 s after C took its namespace over")
	}
	if code := a.cmd.ProcessState.ExitCode(); code == 0 {
		t.Errorf("A exited with status 0 after losing its namespace")
	}
	if out := a.stderr.String(); !strings.Contains(out, "level=ERROR") || !strings.Contains(out, cID) || !strings.Contains(out, aID) {
		t.Errorf("A's log does not say at ERROR which deployment took its namespace:\n%s", tail(out, 2<<10))
	}
	// C sells its own voucher, from its own stock: nothing of A's sale is left in Redis.
	cAdmin := c.login(t, rdb, c.admin)
	cVoucher := seckillVoucher(t, c.c)
	c.c.waitOrder(cAdmin, str(c.c.grabOK(cAdmin, cVoucher), "orderId"), "CREATED", 10*time.Second)
	stock := get(c.c.ok("", `query($id: ID!) { voucher(id: $id) { stock } }`, map[string]any{"id": cVoucher}), "voucher", "stock")
	if stock != 99.0 {
		t.Errorf("C's voucher stock %v after C's first grab, want 99", stock)
	}

	// Redis loses everything: the running server binds the namespace again.
	if err := rdb.FlushAll(ctx).Err(); err != nil { // the test's own redis-server
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for rdb.Get(ctx, ns+":deployment").Val() != cID {
		if time.Now().After(deadline) {
			t.Fatal("the binding was not re-created within 10 s of FLUSHALL")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := c.c.metric(`surge_namespace_rebound_total`); n < 1 {
		t.Errorf("surge_namespace_rebound_total = %v after the binding was re-created", n)
	}
	auditKeys(t, rdb, ns)
}

// deploymentIDOf reads the deployment id a server recorded in the database at dsn.
func deploymentIDOf(t *testing.T, dsn string) string {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var id string
	if err := db.QueryRow("SELECT value FROM surge_settings WHERE name = 'deployment_id'").Scan(&id); err != nil {
		t.Fatalf("reading the deployment id: %v", err)
	}
	return id
}

func withVar(vars map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for key, val := range vars {
		if key != k {
			out[key] = val
		}
	}
	return out
}

// surgeUntilExit runs `surge serve` with a clean environment plus vars until it exits, and
// returns its stderr. A server that starts serving instead (prints its URL) is stopped, and
// served is true.
func surgeUntilExit(t *testing.T, vars map[string]string) (stderr string, served bool) {
	t.Helper()
	cmd := exec.Command(testenv.SurgeBinary(t))
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"SURGE_ADDR=127.0.0.1:0", "SURGE_DATA_DIR=" + t.TempDir()}
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var errOut testenv.SyncBuffer
	cmd.Stderr = &errOut
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	defer func() { _ = cmd.Process.Kill(); <-done }()
	up := make(chan struct{}, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if playgroundLine.MatchString(sc.Text()) {
				up <- struct{}{}
			}
		}
	}()
	select {
	case <-done:
		return errOut.String(), false
	case <-up:
		return errOut.String(), true
	case <-time.After(60 * time.Second):
		t.Fatalf("surge neither served nor exited within 60 s:\n%s", tail(errOut.String(), 2<<10))
		return "", false
	}
}
