package gqlws_test

import (
	"context"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/surgekit/surge/internal/gqlws"
)

// TestKeeper: one goroutine pings every connection; a graphql-transport-ws client that
// answers is kept, one that answers nothing is closed after about two intervals, a legacy
// client gets "ka" and is kept though silent (its protocol has no answer), and the goroutine
// ends with the last connection.
func TestKeeper(t *testing.T) {
	const interval = 100 * time.Millisecond
	f := newFixture(t, gqlws.Options{KeepAlive: interval})
	alive, silent, legacy := f.dial(transportWS), f.dial(transportWS), f.dial(legacyWS)
	alive.init(transportWS)
	legacy.init(legacyWS)
	silent.init(transportWS)
	start := time.Now()
	waitFor(t, "three connections kept", func() bool { // added right after connection_ack
		open, running := gqlws.KeeperState(f.tr)
		return open == 3 && running
	})

	pings := make(chan struct{}, 100)
	go func() { // answers every ping
		for m := range alive.in {
			if m.Type == "ping" {
				_ = alive.ws.Write(context.Background(), websocket.MessageText, []byte(`{"type":"pong"}`))
				pings <- struct{}{}
			}
		}
	}()
	kas := make(chan struct{}, 100)
	go func() {
		for m := range legacy.in {
			if m.Type == "ka" {
				kas <- struct{}{}
			}
		}
	}()

	select {
	case <-silent.done: // read its pings, answered none
		if d := time.Since(start); d < 2*interval {
			t.Errorf("the silent client was closed after %v, before two intervals", d)
		}
	case <-time.After(20 * interval):
		t.Fatal("the silent client is still connected")
	}
	// The others are kept: they keep getting pings and "ka" well after that.
	n, k := len(pings), len(kas)
	waitFor(t, "more pings and ka", func() bool { return len(pings) >= n+3 && len(kas) >= k+3 })
	if open, running := gqlws.KeeperState(f.tr); open != 2 || !running {
		t.Fatalf("%d connections kept (want 2), keeper running %v", open, running)
	}
	if goroutines("gqlws.(*keeper).keep") != 1 {
		t.Fatal("want one keeper goroutine")
	}
	_ = alive.ws.CloseNow()
	_ = legacy.ws.CloseNow()
	waitFor(t, "the keeper to stop", func() bool {
		open, running := gqlws.KeeperState(f.tr)
		return open == 0 && !running
	})
	waitFor(t, "the keeper goroutine to end", func() bool { return goroutines("gqlws.(*keeper).keep") == 0 })
}

// TestKeeperHeldUp: a keeper that could not ping for a while (held up by slow writes) does
// not take the silence it caused for a dead client: it pings first, and closes only a
// connection that left a ping unanswered for over 1.5 intervals. The test runs the keeper's
// rounds itself, at the times it says.
func TestKeeperHeldUp(t *testing.T) {
	const interval = 100 * time.Millisecond
	f := newFixture(t, gqlws.Options{KeepAlive: time.Hour})
	gqlws.DriveKeeper(f.tr)
	c := f.dial(transportWS)
	c.init(transportWS)
	waitFor(t, "the connection kept", func() bool { open, _ := gqlws.KeeperState(f.tr); return open == 1 })
	round := func(at time.Duration) { gqlws.KeepAliveRound(f.tr, time.Now().Add(at), interval) }
	answer := func() {
		t.Helper()
		c.expect("ping", "")
		c.send("pong", "", nil)
		if got := c.sync(); len(got) != 0 { // open, and the pong was read
			t.Fatalf("got %v", got)
		}
	}

	round(5 * interval) // five intervals of silence, no ping yet: a ping, no close
	answer()
	round(2 * interval) // answered: kept
	answer()
	round(0)
	c.expect("ping", "") // not answered from here on
	round(interval)      // unanswered for one interval: kept, pinged again
	c.expect("ping", "")
	round(2 * interval) // the first unanswered ping is two intervals old: closed
	select {
	case <-c.done:
	case <-time.After(within):
		t.Fatal("still open with a ping unanswered for two intervals")
	}
	waitFor(t, "the keeper to forget it", func() bool { open, _ := gqlws.KeeperState(f.tr); return open == 0 })
}
