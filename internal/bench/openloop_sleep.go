package bench

import (
	"syscall"
	"time"
)

// nap sleeps about d in a nanosleep system call. A Go timer wakes through the netpoller,
// whose timeout has millisecond resolution on Linux: a 200 µs wait measured 1.0–1.2 ms, so
// an open loop at thousands of requests per second sent each up to a millisecond late, and
// counted that lateness into every latency. nanosleep overshoots by tens of microseconds.
// (The runtime hands this thread's P to other goroutines while it sleeps.)
func nap(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	_ = syscall.Nanosleep(&ts, nil)
}
