package gqlws_test

import (
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/surgekit/surge/internal/gqlws"
)

// TestLegacy: the graphql-ws protocol of subscriptions-transport-ws, named or (no subprotocol
// named) assumed: connection_ack then "ka"; start → data … complete; stop; terminate.
func TestLegacy(t *testing.T) {
	for _, tc := range []struct {
		name  string
		proto []string
	}{{"named", []string{legacyWS}}, {"no subprotocol", nil}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, gqlws.Options{})
			c := f.dial(tc.proto...)
			if got := c.ws.Subprotocol(); len(tc.proto) > 0 && got != legacyWS {
				t.Fatalf("subprotocol %q, want %q", got, legacyWS)
			}
			c.init(legacyWS) // connection_ack, then ka

			c.subscribe("start", "q", "{ hello }")
			if m := c.expect("data", "q"); string(m.Payload) != `{"data":{"hello":"world"}}` {
				t.Fatalf("got %s", m)
			}
			c.expect("complete", "q")

			c.subscribe("start", "1", `subscription { feed(key: "k") }`)
			c.subscribe("start", "2", `subscription { plain(key: "k") }`)
			f.waitSubscribers("k", 2)
			f.hub.push("k", 1)
			got := map[string]int{}
			for range 2 {
				m := c.next()
				if m.Type != "data" {
					t.Fatalf("got %s, want data", m)
				}
				got[m.ID] = dataOf(t, m, map[string]string{"1": "feed", "2": "plain"}[m.ID])
			}
			if got["1"] != 1 || got["2"] != 1 {
				t.Fatalf("got %v, want 1 for both", got)
			}

			// stop: the subscription ends, nothing more is sent for it.
			c.send("stop", "1", nil)
			f.waitSubscribers("k", 1)
			f.hub.push("k", 2)
			c.expectData("data", "2", "plain", 2)
			f.hub.end("k", nil)
			c.expect("complete", "2")

			c.subscribe("start", "e", "{ nosuch }")
			if code := errorCode(t, c.expect("error", "e")); code != "GRAPHQL_VALIDATION_FAILED" {
				t.Fatalf("code %q", code)
			}

			// Nothing was due for 1 (stopped) nor after e's error: the next message is the
			// answer to a new query.
			waitFor(t, "no operation goroutine", func() bool { return goroutines("gqlws.(*operation)") == 0 })
			c.subscribe("start", "q2", "{ hello }")
			c.expect("data", "q2")
			c.expect("complete", "q2")

			c.send("connection_terminate", "", nil)
			c.closed(websocket.StatusNormalClosure)
		})
	}
}

// TestLegacyInitRefused: an Init error is a connection_error message, then the close (1013).
func TestLegacyInitRefused(t *testing.T) {
	c := newFixture(t, gqlws.Options{Init: refuse}).dial(legacyWS)
	c.send("connection_init", "", nil)
	got := c.closed(websocket.StatusTryAgainLater)
	if len(got) != 1 || got[0].Type != "connection_error" || !strings.Contains(string(got[0].Payload), errRefused.Error()) {
		t.Fatalf("got %v, want one connection_error with %q", got, errRefused)
	}
}

// TestLegacyRefusals: the legacy protocol has no ping; messages of graphql-transport-ws are
// invalid there.
func TestLegacyRefusals(t *testing.T) {
	t.Run("ping", func(t *testing.T) {
		c := newFixture(t, gqlws.Options{}).dial(legacyWS)
		c.init(legacyWS)
		c.send("ping", "", nil)
		c.closed(4400)
	})
	t.Run("start before init", func(t *testing.T) {
		c := newFixture(t, gqlws.Options{}).dial(legacyWS)
		c.subscribe("start", "1", "{ hello }")
		c.closed(4401)
	})
	t.Run("terminate before init", func(t *testing.T) {
		c := newFixture(t, gqlws.Options{}).dial(legacyWS)
		c.send("connection_terminate", "", nil)
		c.closed(websocket.StatusNormalClosure)
	})
}
