package gqlws_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/surgekit/surge/internal/gqlws"
)

// TestMaxSubscriptions: a connection runs at most MaxSubscriptions subscriptions; one more
// ends at once with an "error" of code WEBSOCKET_LIMIT_EXCEEDED, and queries do not count. A
// slot is free again as soon as the client completes its subscription, and as soon as the
// client reads the server's "complete": id and slot may be reused at once, never refused as a
// duplicate or over the cap.
func TestMaxSubscriptions(t *testing.T) {
	for _, field := range []string{"feed", "plain"} {
		t.Run(field, func(t *testing.T) {
			const max = 3
			f := newFixture(t, gqlws.Options{MaxSubscriptions: max})
			c := f.dial(transportWS)
			c.init(transportWS)
			for i := range max {
				c.subscribe("subscribe", fmt.Sprint(i), `subscription { `+field+`(key: "k`+fmt.Sprint(i)+`") }`)
			}
			for i := range max {
				f.waitSubscribers(fmt.Sprint("k", i), 1)
			}
			c.subscribe("subscribe", "over", `subscription { `+field+`(key: "over") }`)
			m := c.expect("error", "over")
			var errs []struct {
				Extensions map[string]any `json:"extensions"`
			}
			if err := json.Unmarshal(m.Payload, &errs); err != nil || len(errs) != 1 || errs[0].Extensions["code"] != gqlws.CodeSubscriptionLimit {
				t.Fatalf("subscription over the cap: %s", m)
			}
			c.subscribe("subscribe", "q", `{ hello }`) // a query takes no slot
			c.expect("next", "q")
			c.expect("complete", "q")

			// The client completes one: its slot is free at once.
			c.send("complete", "0", nil)
			c.subscribe("subscribe", "again", `subscription { `+field+`(key: "again") }`)
			f.waitSubscribers("again", 1)
			f.hub.push("again", 7)
			c.expectData("next", "again", field, 7)

			// The server ends one: once the client has read "complete", the same id and the
			// slot are free, every time.
			for i := range 20 {
				f.hub.end("k1", nil)
				c.expect("complete", "1")
				c.subscribe("subscribe", "1", `subscription { `+field+`(key: "k1") }`)
				f.waitSubscribers("k1", 1)
				f.hub.push("k1", i)
				c.expectData("next", "1", field, i)
			}
		})
	}
}

// TestMaxRunning: a connection executes at most MaxRunning operations at once; the others
// wait (the reader stops reading meanwhile) and run as slots free, none refused or lost. Idle
// subscriptions hold no slot.
func TestMaxRunning(t *testing.T) {
	const max, queries = 4, 20
	f := newFixture(t, gqlws.Options{MaxRunning: max})
	c := f.dial(transportWS)
	c.init(transportWS)
	for i := range max + 2 { // more idle subscriptions than slots
		c.subscribe("subscribe", fmt.Sprint("s", i), `subscription { feed(key: "k") }`)
	}
	f.waitSubscribers("k", max+2)
	for i := range queries {
		c.subscribe("subscribe", fmt.Sprint("q", i), `{ slow }`)
	}
	c.subscribe("subscribe", "hello", `{ hello }`)
	waitFor(t, "the slots to fill", func() bool { return f.slowRunning.Load() == max })
	// They stay full: the reader waits for a slot rather than starting more.
	for range 20 {
		if n := f.slowRunning.Load(); n > max {
			t.Fatalf("%d operations running at once, want at most %d", n, max)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := len(c.in); n != 0 {
		t.Fatalf("%d answers before any slot freed", n)
	}
	close(f.gate)
	answered := map[string]bool{}
	for len(answered) < queries+1 {
		m := c.next()
		if m.Type == "next" {
			answered[m.ID] = true
		}
	}
	if !answered["hello"] {
		t.Fatal("the query sent after the slow ones was not answered")
	}
}
