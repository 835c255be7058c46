package gqlws_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/surgekit/surge/internal/gqlws"
)

// TestListenerIdle: subscriptions that announce their channel (Listener) hold no goroutine
// while idle, and each subscriber still gets every value pushed while it is idle; the
// stream's close ends them with "complete", or "error" after AddError.
func TestListenerIdle(t *testing.T) {
	const conns, perConn = 4, 24 // perConn even: half on each key
	f := newFixture(t, gqlws.Options{})
	clients := make([]*client, conns)
	for i := range clients {
		clients[i] = f.dial(transportWS)
		clients[i].init(transportWS)
		for j := range perConn {
			clients[i].subscribe("subscribe", fmt.Sprint(j), fmt.Sprintf(`subscription { feed(key: "k%d") }`, j%2))
		}
	}
	f.waitSubscribers("k0", conns*perConn/2)
	f.waitSubscribers("k1", conns*perConn/2)
	idle := func(what string) {
		t.Helper()
		waitFor(t, what+": no operation goroutine", func() bool { return goroutines("gqlws.(*operation)") == 0 })
	}
	idle("subscribed")

	for round := 1; round <= 3; round++ {
		f.hub.push("k0", round)
		f.hub.push("k1", 100+round)
		for _, c := range clients {
			got := map[string]int{}
			for range perConn {
				m := c.next()
				if m.Type != "next" {
					t.Fatalf("got %s", m)
				}
				got[m.ID] = dataOf(t, m, "feed")
			}
			for j := range perConn {
				if want := round + 100*(j%2); got[fmt.Sprint(j)] != want {
					t.Fatalf("round %d: subscription %d got %d, want %d", round, j, got[fmt.Sprint(j)], want)
				}
			}
		}
		idle(fmt.Sprint("after round ", round))
	}

	// A late subscriber gets the current value at once: announced during the dispatch, before
	// Attached, it is read by the dispatching goroutine.
	for _, c := range clients {
		c.subscribe("subscribe", fmt.Sprint(perConn), `subscription { feed(key: "k0") }`)
		c.expectData("next", fmt.Sprint(perConn), "feed", 3)
	}
	idle("after the late subscribers")

	f.hub.end("k0", nil)
	f.hub.end("k1", &gqlerror.Error{Message: "gone", Extensions: map[string]any{"code": "NOT_FOUND"}})
	for _, c := range clients {
		for range perConn + 1 {
			m := c.next()
			var id int
			fmt.Sscan(m.ID, &id)
			switch {
			case id%2 == 0 && m.Type == "complete":
			case id%2 == 1 && m.Type == "error" && errorCode(t, m) == "NOT_FOUND":
			default:
				t.Fatalf("got %s", m)
			}
		}
		if got := c.quiesce(); len(got) != 0 {
			t.Fatalf("after the end: %v", got)
		}
	}
}

// TestListenerStress: producers on several goroutines push values as fast as they can, each
// replacing the one before if it was not read yet, to subscribers on several connections,
// which read them as they come. Every subscriber must get the last value, and no goroutine
// may be left behind (a Ready too many leaves one blocked on an empty channel; one too few
// strands a value). Run it with -race.
func TestListenerStress(t *testing.T) {
	const conns, perConn, producers, pushes = 4, 10, 4, 2000
	f := newFixture(t, gqlws.Options{})
	clients := make([]*client, conns)
	for i := range clients {
		clients[i] = f.dial(transportWS)
		clients[i].init(transportWS)
		for j := range perConn {
			clients[i].subscribe("subscribe", fmt.Sprint(j), `subscription { feed(key: "k") }`)
		}
	}
	f.waitSubscribers("k", conns*perConn)

	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for i := range pushes {
				f.hub.push("k", 1+p*pushes+i)
			}
		})
	}
	// Readers take the values while the producers push, so that reads race with replacements.
	const last = 1 << 30
	var readers sync.WaitGroup
	for _, c := range clients {
		readers.Go(func() {
			done := map[string]bool{}
			for len(done) < perConn {
				m, err := c.read()
				if err != nil {
					t.Error(err)
					return
				}
				v, err := value(m, "feed")
				if err != nil || m.Type != "next" {
					t.Errorf("got %s", m)
					return
				}
				if v == last {
					done[m.ID] = true
				}
			}
		})
	}
	wg.Wait()
	f.hub.push("k", last)
	readers.Wait()
	if t.Failed() {
		return
	}
	waitFor(t, "no operation goroutine", func() bool { return goroutines("gqlws.(*operation)") == 0 })
	t.Logf("%d values read, %d replaced unread", f.hub.reads.Load(), f.hub.drops.Load())

	// Still driven: the next value reaches everyone, and the close ends everyone.
	f.hub.push("k", 7)
	f.hub.end("k", nil)
	for _, c := range clients {
		got := map[string][]string{}
		for range 2 * perConn {
			m := c.next()
			if m.Type == "next" {
				m.Type = fmt.Sprint("next ", dataOf(t, m, "feed"))
			}
			got[m.ID] = append(got[m.ID], m.Type)
		}
		for j := range perConn {
			if g := got[fmt.Sprint(j)]; len(g) != 2 || g[0] != "next 7" || g[1] != "complete" {
				t.Fatalf("subscription %d got %v, want next 7, complete", j, g)
			}
		}
	}
}
