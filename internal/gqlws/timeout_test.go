package gqlws_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/surgekit/surge/internal/gqlws"
	"github.com/surgekit/surge/internal/testenv"
)

// TestWriteTimeout: a client that stops reading while the server has messages for it is
// disconnected once a write has waited Options.WriteTimeout, and its operations end.
func TestWriteTimeout(t *testing.T) {
	for _, field := range []string{"feed", "plain"} {
		t.Run(field, func(t *testing.T) {
			const timeout = 300 * time.Millisecond
			f := newFixture(t, gqlws.Options{WriteTimeout: timeout})
			f.pad.Store(256 << 10)
			write := f.dialDeaf(within)
			write(`{"type":"subscribe","id":"1","payload":{"query":"subscription { ` + field + `(key: \"k\") }"}}`)
			f.waitSubscribers("k", 1)

			// Push values until the subscriber is gone.
			stop := make(chan struct{})
			pushed := make(chan struct{})
			go func() {
				defer close(pushed)
				for v := 1; ; v++ {
					select {
					case <-stop:
						return
					case <-time.After(time.Millisecond):
					}
					f.hub.push("k", v)
				}
			}()
			start := time.Now()
			waitFor(t, "the subscriber's end", func() bool { return f.hub.subscribers("k") == 0 })
			gone := time.Now()
			close(stop)
			<-pushed
			waitFor(t, "the operation's goroutine to end", func() bool { return goroutines("gqlws.(*operation)") == 0 })
			waitFor(t, "the connection's end", func() bool { return goroutines("gqlws.(*conn).serve") == 0 })
			// The write that stalled began right after a value was read: from there the reads
			// paused for the write timeout (a value read after the failed write, which fails at
			// once, may follow).
			stalled := f.hub.longestPause(gone)
			t.Logf("%d values taken; disconnected %v after the subscription; stalled %v", f.hub.reads.Load(), gone.Sub(start), stalled)
			if stalled < timeout*3/4 || stalled > timeout*7/4 {
				t.Fatalf("the writes stalled for %v before the disconnection, want about %v", stalled, timeout)
			}
		})
	}
}

// TestPingFlood: a client that sends pings and reads nothing holds one goroutine of the
// server for its pongs, not one per ping (a pong answers every ping read before it).
func TestPingFlood(t *testing.T) {
	f := newFixture(t, gqlws.Options{WriteTimeout: 2 * within})
	f.pad.Store(256 << 10)
	write := f.dialDeaf(2 * within)
	// 256 KB values fill the socket until the server's writes to it wait.
	write(`{"type":"subscribe","id":"1","payload":{"query":"subscription { feed(key: \"k\") }"}}`)
	f.waitSubscribers("k", 1)
	// Values pushed every millisecond and none read for 300 ms, and the operation's
	// goroutine in a websocket write: the write waits (a 256 KB write that goes through takes
	// well under that). The goroutine dump is taken only then: dumps taken in a loop were
	// slow enough under a loaded -race run to miss the stall until the write timed out, and a
	// pause in the reads alone can be a starved CPU. The write may wait in the operation's
	// first run (the values ready at subscription) or in a later drain: on a loaded machine
	// the first run can meet the full socket already.
	writing := func() bool {
		for _, g := range testenv.Goroutines() {
			if strings.Contains(string(g), "gqlws.(*operation)") && strings.Contains(string(g), "websocket.(*Conn).Write") {
				return true
			}
		}
		return false
	}
	last, since := f.hub.reads.Load(), time.Now()
	for v := 0; time.Since(since) < 300*time.Millisecond || !writing(); v++ {
		if v > 20_000 {
			t.Fatal("the server's writes never waited")
		}
		if time.Since(since) >= 300*time.Millisecond {
			since = time.Now() // paused, but not in a write: look again
		}
		f.hub.push("k", v)
		time.Sleep(time.Millisecond)
		if n := f.hub.reads.Load(); n != last {
			last, since = n, time.Now()
		}
	}
	running := goroutines("gqlws.(*operation).run") // 1 if the write waits in the first run
	for range 500 {
		write(`{"type":"ping"}`)
	}
	write(`{"type":"subscribe","id":"2","payload":{"query":"{ hello }"}}`) // read after every ping
	defer func() {
		if t.Failed() {
			for _, g := range testenv.Goroutines() {
				if strings.Contains(string(g), "gqlws.") {
					t.Logf("%s", g)
				}
			}
		}
	}()
	waitFor(t, "the pings to be read", func() bool { return goroutines("gqlws.(*operation).run") == running+1 })
	if n := goroutines("gqlws.(*conn).pong"); n > 1 {
		t.Fatalf("%d goroutines writing pongs for 500 unread pings, want at most 1", n)
	}
}

// dialDeaf connects a graphql-transport-ws client that reads the connection_ack and nothing
// after it; it returns the client's write, which may be used for d.
func (f *fixture) dialDeaf(d time.Duration) (write func(string)) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	f.t.Cleanup(cancel)
	ws, _, err := websocket.Dial(ctx, f.url, &websocket.DialOptions{Subprotocols: []string{transportWS}})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = ws.CloseNow() })
	write = func(s string) {
		f.t.Helper()
		if err := ws.Write(ctx, websocket.MessageText, []byte(s)); err != nil {
			f.t.Fatal(err)
		}
	}
	write(`{"type":"connection_init"}`)
	if _, data, err := ws.Read(ctx); err != nil || string(data) != `{"type":"connection_ack"}` {
		f.t.Fatalf("%s %v", data, err)
	}
	return write
}
