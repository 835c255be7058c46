package testenv

import "testing"

// FreePort returns a loopback TCP port that was free a moment ago (for a second port of a
// private server, e.g. a Cluster node's bus: the default, port + 10000, may be past 65535).
func FreePort(t testing.TB) int {
	t.Helper()
	return freePort(t)
}
