package testenv

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// MariaDB is a private MariaDB server: its own data directory (in t.TempDir()), a free
// loopback port, a socket of its own. A test may stop it, kill it and start it again on the
// same data and port, while the shared server keeps serving every other test.
type MariaDB struct {
	// DSN reaches the database "surge" as a user with every right on it, over TCP
	// (parseTime on), e.g. for store.OpenMySQL or SURGE_MYSQL_DSN.
	DSN  string
	Addr string // 127.0.0.1:port
	Dir  string // data directory

	t      testing.TB
	bin    string
	argv   []string
	socket string
	log    string
	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
}

// mariadbBinaries finds the server and the data-directory installer; PATH first, then the
// places Debian puts them (sbin is not on every user's PATH).
func mariadbBinaries() (server, install string, err error) {
	find := func(names ...string) string {
		for _, n := range names {
			if p, err := exec.LookPath(n); err == nil {
				return p
			}
			for _, dir := range []string{"/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin", "/usr/libexec"} {
				if p := filepath.Join(dir, n); fileExists(p) {
					return p
				}
			}
		}
		return ""
	}
	server = find("mariadbd", "mysqld")
	install = find("mariadb-install-db", "mysql_install_db")
	if server == "" || install == "" {
		return "", "", errors.New("no mariadbd/mariadb-install-db found (scripts/ensure-mariadb.sh installs mariadb-server)")
	}
	return server, install, nil
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// PrivateMySQL initialises a data directory, starts a MariaDB server on it and creates the
// database "surge" and a user for it. The test is skipped if the MariaDB binaries are not
// installed, and fails instead under `make test` (SURGE_TEST_REQUIRE_ALL=1), which installs them. The server is killed at cleanup.
func PrivateMySQL(t testing.TB) *MariaDB {
	t.Helper()
	server, install, err := mariadbBinaries()
	if err != nil {
		// make test installs them (scripts/ensure-mariadb.sh) and sets SURGE_TEST_REQUIRE_ALL:
		// there, a test that needs them must not pass without running.
		if os.Getenv("SURGE_TEST_REQUIRE_ALL") != "" {
			t.Fatalf("private MariaDB: %v", err)
		}
		t.Skipf("private MariaDB: %v (SURGE_TEST_REQUIRE_ALL unset)", err)
	}
	// A unix socket path must stay under ~100 bytes: t.TempDir() can be longer.
	sockDir, err := os.MkdirTemp("", "mdb")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	m := &MariaDB{t: t, bin: server, Dir: filepath.Join(t.TempDir(), "data"), socket: filepath.Join(sockDir, "s.sock")}
	m.log = filepath.Join(filepath.Dir(m.Dir), "mariadb.err")
	asRoot := os.Geteuid() == 0
	args := []string{"--no-defaults", "--datadir=" + m.Dir, "--auth-root-authentication-method=normal", "--skip-test-db"}
	if asRoot {
		args = append(args, "--user=root")
	}
	start := time.Now()
	if out, err := exec.Command(install, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", install, err, out)
	}
	port := freePort(t)
	m.Addr = fmt.Sprintf("127.0.0.1:%d", port)
	m.argv = []string{"--no-defaults", "--datadir=" + m.Dir, "--port=" + fmt.Sprint(port), "--bind-address=127.0.0.1",
		"--socket=" + m.socket, "--pid-file=" + filepath.Join(sockDir, "mariadb.pid"), "--log-error=" + m.log,
		"--skip-log-bin", "--innodb-buffer-pool-size=64M", "--max-connections=500",
		"--character-set-server=utf8mb4", "--collation-server=utf8mb4_bin"}
	if asRoot {
		m.argv = append(m.argv, "--user=root")
	}
	m.Start()
	t.Cleanup(m.Kill)
	// root over the socket creates the database and a TCP user (root@localhost may not match
	// 127.0.0.1 where names are not resolved).
	root, err := sql.Open("mysql", "root@unix("+m.socket+")/")
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for _, q := range []string{
		"CREATE DATABASE surge CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
		"CREATE USER 'surge'@'%' IDENTIFIED BY 'surge'",
		"GRANT ALL ON surge.* TO 'surge'@'%'",
	} {
		if _, err := root.Exec(q); err != nil {
			t.Fatalf("private MariaDB: %s: %v", q, err)
		}
	}
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName, cfg.ParseTime = "surge", "surge", "tcp", m.Addr, "surge", true
	m.DSN = cfg.FormatDSN()
	t.Logf("private MariaDB on %s (data %s) ready in %v", m.Addr, m.Dir, time.Since(start).Round(time.Millisecond))
	return m
}

// Root returns a pool connected as root over the server's socket (closed at cleanup), for
// what the test user may not do: SET GLOBAL, FLUSH STATUS, SHOW GLOBAL STATUS.
func (m *MariaDB) Root(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", "root@unix("+m.socket+")/")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// CPU is the CPU time (user + system) the running server has used, from /proc: what the
// database spent on the statements a test sent, with no other client's share (a private
// server serves the test alone). Counted in ticks of 10 ms.
func (m *MariaDB) CPU() time.Duration {
	m.t.Helper()
	m.mu.Lock()
	cmd := m.cmd
	m.mu.Unlock()
	if cmd == nil {
		m.t.Fatal("testenv: private MariaDB not running")
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
	if err != nil {
		m.t.Fatal(err)
	}
	// Fields after the command name (which may hold spaces) start at ") ": utime, stime are
	// the 14th and 15th of the line.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	utime, _ := strconv.Atoi(f[11])
	stime, _ := strconv.Atoi(f[12])
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// Start starts the server on its data directory and port and waits until it accepts
// connections (crash recovery included, after a Kill).
func (m *MariaDB) Start() {
	m.t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd != nil {
		m.t.Fatal("testenv: private MariaDB already running")
	}
	cmd := exec.Command(m.bin, m.argv...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		m.t.Fatalf("starting %s: %v", m.bin, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	db, err := sql.Open("mysql", "root@unix("+m.socket+")/")
	if err != nil {
		m.t.Fatal(err)
	}
	defer db.Close()
	err = waitChild(cmd, done, 90*time.Second, 50*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return db.PingContext(ctx)
	})
	switch {
	case errors.Is(err, errChildExited):
		m.t.Fatalf("private MariaDB exited at start: %s\n%s", out.String(), m.tailLog())
	case err != nil:
		m.t.Fatalf("private MariaDB did not answer within 90 s: %v\n%s", err, m.tailLog())
	}
	m.cmd, m.done = cmd, done
}

// Stop shuts the server down (SIGTERM: connections are closed, InnoDB flushes) and waits
// for its exit. No-op if it is not running.
func (m *MariaDB) Stop() { m.signal(syscall.SIGTERM) }

// Kill crashes the server (SIGKILL) and waits for its exit; the next Start recovers.
func (m *MariaDB) Kill() { m.signal(syscall.SIGKILL) }

func (m *MariaDB) signal(sig syscall.Signal) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return
	}
	stopChild(m.cmd, m.done, sig, 60*time.Second)
	m.cmd = nil
}

// tailLog returns the end of the server's error log, for failure messages.
func (m *MariaDB) tailLog() string {
	b, _ := os.ReadFile(m.log)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return strings.Join(lines, "\n")
}
