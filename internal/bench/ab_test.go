package bench_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/surgekit/surge/internal/bench"
)

// abRepo makes a git repository whose first commit builds a ./cmd/surge and whose second
// does not, and returns it with the two commits.
func abRepo(t *testing.T) (dir, good, broken string) {
	t.Helper()
	dir = t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("init", "-q")
	write("go.mod", "module example.com/abtest\n\ngo 1.22\n")
	write("cmd/surge/main.go", "package main\n\nfunc main() {}\n")
	git("add", ".")
	git("commit", "-q", "-m", "builds")
	good = git("rev-parse", "HEAD")
	write("cmd/surge/main.go", "package main\n\nfunc main() { undefinedCall() }\n")
	git("commit", "-q", "-am", "does not build")
	broken = git("rev-parse", "HEAD")
	return dir, good, broken
}

// bench ab refuses, before it runs anything, a REF that does not build, one that is no commit,
// and a work tree that does not build; the configured services are never contacted (the
// addresses given here do not exist).
func TestABRefusesWhatDoesNotBuild(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not on PATH")
	}
	dir, good, broken := abRepo(t)
	nowhere := []string{"-redis-addrs", "127.0.0.1:1", "-mysql-dsn", "u:p@tcp(127.0.0.1:1)/surge_nowhere", "-only", "drain", "-repo", dir}
	for _, c := range []struct {
		name, ref string
		want      []string
	}{
		{"REF does not build", broken, []string{"REF " + broken + " (" + broken[:7] + ") does not build; nothing was run", "undefinedCall"}},
		{"REF is no commit", "no-such-branch", []string{`REF "no-such-branch" is not a commit`}},
		{"the work tree does not build", good, []string{"the work tree " + dir, "does not build; nothing was run", "undefinedCall"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp)
			defer func() { // nothing was run, so no logs are kept either
				if left, _ := filepath.Glob(filepath.Join(tmp, "surge-ab-*")); len(left) > 0 {
					t.Errorf("left behind: %v", left)
				}
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			var stdout, stderr bytes.Buffer
			err := bench.Run(ctx, append(append([]string{"ab"}, nowhere...), c.ref), &stdout, &stderr)
			if err == nil {
				t.Fatalf("bench ab %s ran:\n%s", c.ref, stdout.String())
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if strings.Contains(stdout.String(), "round") {
				t.Errorf("a measurement ran:\n%s", stdout.String())
			}
		})
	}
}
