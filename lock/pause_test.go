package lock_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/lock"
)

// The paused-holder trials: a child process (this test binary) holds a lock and spins; the
// parent freezes it (SIGSTOP) for longer than the lease, the way a GC pause, a stalled VM or
// a swapped-out process would, then resumes it. The child's first look after resuming must
// not say "valid".
const (
	pauseChildEnv = "LOCK_PAUSED_HOLDER_TRIALS"
	pauseLease    = 200 * time.Millisecond
	pauseFor      = 2 * pauseLease
	pauseTrials   = 8
)

// TestValidAfterPause (issue 11, item 3): after a pause longer than the lease, Valid is false
// at the holder's first check, even where the lock's Context (cancelled by a timer that has
// not run yet) still says held.
func TestValidAfterPause(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestPausedHolderChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", pauseChildEnv, pauseTrials))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	lines := bufio.NewScanner(out)
	ctxSaidHeld, validSaidHeld, trials := 0, 0, 0
	for lines.Scan() {
		line := lines.Text()
		switch {
		case line == "held":
			_ = cmd.Process.Signal(syscall.SIGSTOP)
			time.Sleep(pauseFor)
			_ = cmd.Process.Signal(syscall.SIGCONT)
		case strings.HasPrefix(line, "after-lease "):
			var valid, ctxHeld bool
			var el time.Duration
			if _, err := fmt.Sscanf(line, "after-lease valid=%t context=%t elapsed=%v", &valid, &ctxHeld, &el); err != nil {
				t.Fatalf("child said %q: %v", line, err)
			}
			trials++
			if valid {
				validSaidHeld++
			}
			if ctxHeld {
				ctxSaidHeld++
			}
		case strings.HasPrefix(line, "error "):
			t.Fatalf("child: %s", line)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	t.Logf("first check after a %v pause past a %v lease, %d trials: Context said held %d times, Valid %d times",
		pauseFor, pauseLease, trials, ctxSaidHeld, validSaidHeld)
	if trials != pauseTrials {
		t.Fatalf("%d trials reported, want %d", trials, pauseTrials)
	}
	if validSaidHeld != 0 {
		t.Fatalf("Valid said held after the lease in %d of %d trials", validSaidHeld, trials)
	}
}

// TestPausedHolderChild is the child of TestValidAfterPause; it skips unless run as that.
func TestPausedHolderChild(t *testing.T) {
	var trials int
	if _, err := fmt.Sscan(os.Getenv(pauseChildEnv), &trials); err != nil {
		t.Skip("run by TestValidAfterPause")
	}
	ctx := context.Background()
	c := lock.New(testenv.Redis(t), lock.Options{})
	defer c.Close()
	for range trials {
		l, err := c.Obtain(ctx, uniq("paused"), lock.LockOptions{Lease: pauseLease})
		if err != nil {
			fmt.Println("error", err)
			return
		}
		got := time.Now()
		fmt.Println("held")
		for {
			// Elapsed first, then the checks: Valid true then implies elapsed < lease.
			el := time.Since(got)
			valid, ctxHeld := l.Valid(), l.Context().Err() == nil
			if el >= pauseLease {
				fmt.Printf("after-lease valid=%t context=%t elapsed=%v\n", valid, ctxHeld, el)
				break
			}
		}
		_ = l.Release(ctx)
	}
}
