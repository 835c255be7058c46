package testenv

import (
	"errors"
	"os/exec"
	"syscall"
	"time"
)

var (
	errChildExited = errors.New("exited at start")
	errChildSlow   = errors.New("did not answer in time")
)

// waitChild polls ready every pause until it answers nil. It returns errChildExited if the
// process ended first, or errChildSlow (with ready's last error) after within, having killed it.
func waitChild(cmd *exec.Cmd, done <-chan struct{}, within, pause time.Duration, ready func() error) error {
	deadline := time.Now().Add(within)
	for {
		err := ready()
		if err == nil {
			return nil
		}
		select {
		case <-done:
			return errChildExited
		default:
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-done
			return errors.Join(errChildSlow, err)
		}
		time.Sleep(pause)
	}
}

// stopChild sends sig and waits for the exit, killing the process after grace.
func stopChild(cmd *exec.Cmd, done <-chan struct{}, sig syscall.Signal, grace time.Duration) {
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-done
	}
}
