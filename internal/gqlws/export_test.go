package gqlws

import "time"

// KeeperState reports the connections t's keeper pings and whether its goroutine runs.
func KeeperState(t *Transport) (open int, running bool) {
	t.keeper.mu.Lock()
	defer t.keeper.mu.Unlock()
	return len(t.keeper.open), t.keeper.running
}

// DriveKeeper makes t's keeper register connections without starting its goroutine: the test
// runs the rounds itself with KeepAliveRound. Call it before the first connection.
func DriveKeeper(t *Transport) {
	t.keeper.mu.Lock()
	defer t.keeper.mu.Unlock()
	t.keeper.running = true
}

// KeepAliveRound runs one keeper round at now over t's open connections.
func KeepAliveRound(t *Transport, now time.Time, interval time.Duration) {
	t.keeper.mu.Lock()
	conns := make([]*conn, 0, len(t.keeper.open))
	for c := range t.keeper.open {
		conns = append(conns, c)
	}
	t.keeper.mu.Unlock()
	for _, c := range conns {
		c.keepAlive(now, interval)
	}
}
