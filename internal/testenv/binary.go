package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	buildDir  string
	binPath   string
	buildErr  error
)

// SurgeBinary builds cmd/surge once per test process (without -race: the processes under
// test are real servers) and returns its path. Call RemoveSurgeBinary from TestMain.
func SurgeBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		goTool := goCommand()
		var err error
		if buildDir, err = os.MkdirTemp("", "surge-bin-"); err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(buildDir, "surge")
		start := time.Now()
		out, err := exec.Command(goTool, "build", "-o", binPath, "github.com/surgekit/surge/cmd/surge").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		fmt.Fprintf(os.Stderr, "built %s in %v\n", binPath, time.Since(start).Round(time.Millisecond))
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// RemoveSurgeBinary deletes what SurgeBinary and StartOTLPSink built, if anything.
func RemoveSurgeBinary() {
	for _, dir := range []string{buildDir, sinkDir} {
		if dir != "" {
			_ = os.RemoveAll(dir)
		}
	}
}

// GoCommand is the go tool the tests build with (see goCommand), for tests that run it.
func GoCommand() string { return goCommand() }

// goCommand is the go tool: on PATH, else under GOROOT (a missing one fails the build with
// its name).
func goCommand() string {
	if goTool, err := exec.LookPath("go"); err == nil {
		return goTool
	}
	if root := os.Getenv("GOROOT"); root != "" {
		return filepath.Join(root, "bin", "go")
	}
	return "go"
}
