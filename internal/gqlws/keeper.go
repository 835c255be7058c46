package gqlws

import (
	"sync"
	"time"
)

// keeper keeps the open connections alive with one goroutine for all of them: gqlgen's
// keep-alive runs a ticker goroutine per connection, which at 10 000 idle connections was
// 10 000 goroutines and their stacks for a ping every 15 s. Every interval it pings each
// connection (graphql-transport-ws "ping"; "ka" in the legacy protocol, which has no answer)
// and closes a graphql-transport-ws connection that sent nothing, not even a pong, since a
// ping written over 1.5 intervals before (about two intervals of silence): silence alone
// proves nothing, the keeper itself may have been held up. It runs only while connections
// are open. Pings are written one connection after another, each bounded by pingTimeout.
type keeper struct {
	interval time.Duration

	mu      sync.Mutex
	open    map[*conn]struct{}
	running bool // the keeper goroutine
}

// pingTimeout bounds the write of one ping: a client that takes longer to take 20 bytes is
// not reading, and the write's timeout closes its connection.
const pingTimeout = 2 * time.Second

func (k *keeper) add(c *conn) {
	if k.interval <= 0 {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.open == nil {
		k.open = map[*conn]struct{}{}
	}
	k.open[c] = struct{}{}
	if !k.running {
		k.running = true
		go k.keep()
	}
}

func (k *keeper) remove(c *conn) {
	k.mu.Lock()
	delete(k.open, c)
	k.mu.Unlock()
}

// keep pings every open connection each interval, until none is open.
func (k *keeper) keep() {
	tick := time.NewTicker(k.interval)
	defer tick.Stop()
	var conns []*conn
	for now := range tick.C {
		k.mu.Lock()
		if len(k.open) == 0 {
			k.running = false
			k.mu.Unlock()
			return
		}
		conns = conns[:0]
		for c := range k.open {
			conns = append(conns, c)
		}
		k.mu.Unlock()
		for _, c := range conns {
			c.keepAlive(now, k.interval)
		}
		clear(conns)
	}
}
