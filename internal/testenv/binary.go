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
		goTool, err := exec.LookPath("go")
		if err != nil {
			if root := os.Getenv("GOROOT"); root == "" {
				buildErr = fmt.Errorf("no go command on PATH: %w", err)
				return
			} else {
				goTool = filepath.Join(root, "bin", "go")
			}
		}
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

// RemoveSurgeBinary deletes what SurgeBinary built, if anything.
func RemoveSurgeBinary() {
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
}
