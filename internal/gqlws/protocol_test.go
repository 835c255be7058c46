package gqlws_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/surgekit/surge/internal/gqlws"
)

// TestCloseCodes: each refusal of graphql-transport-ws closes the connection with its code.
func TestCloseCodes(t *testing.T) {
	t.Run("init timeout 4408", func(t *testing.T) {
		f := newFixture(t, gqlws.Options{InitTimeout: 100 * time.Millisecond})
		start := time.Now() // before the dial: the server's timer starts while it returns
		c := f.dial(transportWS)
		c.closed(4408)
		if d := time.Since(start); d < 80*time.Millisecond {
			t.Errorf("closed after %v, before the init timeout", d)
		}
	})
	t.Run("second connection_init 4429", func(t *testing.T) {
		c := newFixture(t, gqlws.Options{}).dial(transportWS)
		c.init(transportWS)
		c.send("connection_init", "", nil)
		c.closed(4429)
	})
	t.Run("subscribe before connection_ack 4401", func(t *testing.T) {
		c := newFixture(t, gqlws.Options{}).dial(transportWS)
		c.subscribe("subscribe", "1", "{ hello }")
		c.closed(4401)
	})
	t.Run("subscribe with a running id 4409", func(t *testing.T) {
		f := newFixture(t, gqlws.Options{})
		c := f.dial(transportWS)
		c.init(transportWS)
		c.subscribe("subscribe", "1", `subscription { feed(key: "k") }`)
		f.waitSubscribers("k", 1)
		c.subscribe("subscribe", "1", `subscription { feed(key: "k") }`)
		c.closed(4409)
	})
	t.Run("init refused 1013", func(t *testing.T) {
		c := newFixture(t, gqlws.Options{Init: refuse}).dial(transportWS)
		c.send("connection_init", "", map[string]any{"Authorization": "Bearer x"})
		if got := c.closed(websocket.StatusTryAgainLater); len(got) != 0 {
			t.Fatalf("got %v before the close, want nothing", got)
		}
		if ce := closeError(c.err); ce.Reason != errRefused.Error() {
			t.Errorf("close reason %q, want %q", ce.Reason, errRefused)
		}
	})
	t.Run("init panicked 1011", func(t *testing.T) {
		// A panic in the caller's callback is recovered: the client is told, the server lives
		// and serves the next connection.
		panics := func(context.Context, map[string]any) (context.Context, error) { panic("a bug in Init") }
		f := newFixture(t, gqlws.Options{Init: panics})
		for range 2 {
			c := f.dial(transportWS)
			c.send("connection_init", "", nil)
			c.closed(websocket.StatusInternalError)
		}
	})
	for _, tc := range []struct{ name, before, message string }{
		{"not JSON", "", "hello"},
		{"not an object", "", "[1]"},
		{"unknown type", "", `{"type":"start","id":"1"}`},
		{"init payload not an object", "", `{"type":"connection_init","payload":[1]}`},
		{"subscribe without id", "init", `{"type":"subscribe","payload":{"query":"{ hello }"}}`},
		{"complete without id", "init", `{"type":"complete"}`},
		{"unknown type after init", "init", `{"type":"ka"}`},
		// The close reason quotes the type: it must still fit a close frame (123 bytes).
		{"unknown long type", "init", `{"type":"` + strings.Repeat(`\u0001`, 40) + `"}`},
		// Strict JSON, as over HTTP: a second "query" must not slip past what was checked.
		{"duplicate name in the payload", "init", `{"id":"1","type":"subscribe","payload":{"query":"{ hello }","query":"subscription { feed(key: \"k\") }"}}`},
		{"duplicate type", "init", `{"type":"ping","type":"complete"}`},
		// Nearly 1 MiB of nesting: refused by the envelope's parse (depth bounded, no recursion).
		{"nesting", "init", `{"id":"1","type":"subscribe","payload":{"query":"{ hello }","variables":{"x":` +
			strings.Repeat("[", 400_000) + strings.Repeat("]", 400_000) + `}}}`},
	} {
		t.Run("invalid message 4400: "+tc.name, func(t *testing.T) {
			c := newFixture(t, gqlws.Options{}).dial(transportWS)
			if tc.before == "init" {
				c.init(transportWS)
			}
			c.sendRaw(tc.message)
			c.closed(4400)
		})
	}
	t.Run("binary message 4400", func(t *testing.T) {
		c := newFixture(t, gqlws.Options{}).dial(transportWS)
		c.init(transportWS)
		if err := c.ws.Write(context.Background(), websocket.MessageBinary, []byte(`{"type":"ping"}`)); err != nil {
			t.Fatal(err)
		}
		c.closed(4400)
	})
	t.Run("close reason is valid UTF-8", func(t *testing.T) {
		// The reason quotes the client's id, cut short: cut inside a character, a browser
		// fails the connection (1006) instead of reporting 4409.
		f := newFixture(t, gqlws.Options{})
		c := f.dial(transportWS)
		c.init(transportWS)
		id := "a" + strings.Repeat("é", 30)
		c.subscribe("subscribe", id, `subscription { feed(key: "k") }`)
		f.waitSubscribers("k", 1)
		c.subscribe("subscribe", id, `subscription { feed(key: "k") }`)
		c.closed(4409)
		if r := closeError(c.err).Reason; !utf8.ValidString(r) || len(r) > 123 {
			t.Fatalf("close reason %q: not valid UTF-8 or over 123 bytes", r)
		}
	})
}

var errRefused = errors.New("session store unavailable")

// refuse is an Options.Init that refuses every connection.
func refuse(ctx context.Context, payload map[string]any) (context.Context, error) {
	return ctx, errRefused
}

func closeError(err error) websocket.CloseError {
	var ce websocket.CloseError
	errors.As(err, &ce)
	return ce
}

// TestPingPong: graphql-transport-ws pings are answered before connection_init and after.
func TestPingPong(t *testing.T) {
	c := newFixture(t, gqlws.Options{}).dial(transportWS)
	c.send("ping", "", nil)
	c.expect("pong", "")
	c.init(transportWS)
	c.send("ping", "", nil)
	c.expect("pong", "")
	c.send("pong", "", nil) // an unsolicited pong is allowed and unanswered
	if got := c.sync(); len(got) != 0 {
		t.Fatalf("got %v, want nothing for a pong", got)
	}
}

// TestQuery: a query over subscribe gets its result in "next", then "complete".
func TestQuery(t *testing.T) {
	c := newFixture(t, gqlws.Options{}).dial(transportWS)
	c.init(transportWS)
	c.subscribe("subscribe", "q", "{ hello }")
	if m := c.expect("next", "q"); string(m.Payload) != `{"data":{"hello":"world"}}` {
		t.Fatalf("got %s", m)
	}
	c.expect("complete", "q")
}

// TestRefusedOperation: an operation refused before it runs (parse, validation, a payload
// that is not one) gets one "error" message, and no "complete" after it.
func TestRefusedOperation(t *testing.T) {
	for _, tc := range []struct{ name, payload, code string }{
		{"parse", `{"query":"{"}`, "GRAPHQL_PARSE_FAILED"},
		{"validation", `{"query":"{ nosuch }"}`, "GRAPHQL_VALIDATION_FAILED"},
		{"validation of a subscription", `{"query":"subscription { feed }"}`, "GRAPHQL_VALIDATION_FAILED"},
		{"bad payload", `"query"`, "BAD_REQUEST"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newFixture(t, gqlws.Options{}).dial(transportWS)
			c.init(transportWS)
			c.sendRaw(`{"type":"subscribe","id":"1","payload":` + tc.payload + `}`)
			if code := errorCode(t, c.expect("error", "1")); code != tc.code {
				t.Errorf("code %q, want %q", code, tc.code)
			}
			if got := c.quiesce(); len(got) != 0 {
				t.Fatalf("after the error: %v, want nothing", got)
			}
			// The id is free again, and the connection serves.
			c.subscribe("subscribe", "1", "{ hello }")
			c.expect("next", "1")
			c.expect("complete", "1")
		})
	}
}

// TestClientComplete: once the client completed a running subscription, nothing more is sent
// for it, and its id may be used again at once.
func TestClientComplete(t *testing.T) {
	for _, field := range []string{"feed", "plain"} {
		t.Run(field, func(t *testing.T) {
			f := newFixture(t, gqlws.Options{})
			c := f.dial(transportWS)
			c.init(transportWS)
			c.subscribe("subscribe", "s", `subscription { `+field+`(key: "k") }`)
			f.waitSubscribers("k", 1)
			f.hub.push("k", 1)
			c.expectData("next", "s", field, 1)
			c.send("complete", "s", nil)
			f.waitSubscribers("k", 0) // the operation's context ended: its stream was closed
			if got := c.quiesce(); len(got) != 0 {
				t.Fatalf("after complete: %v, want nothing", got)
			}

			// Completed and at once subscribed again under the same id: a new operation, not a
			// duplicate (graphql-ws frees the id on complete), even while the old one winds down.
			for i := range 20 {
				c.send("complete", "s", nil)
				key := fmt.Sprint("k", i)
				c.subscribe("subscribe", "s", `subscription { `+field+`(key: "`+key+`") }`)
				f.waitSubscribers(key, 1)
				f.hub.push(key, i)
				c.expectData("next", "s", field, i)
			}
		})
	}
}

// TestAddError: a subscription given an error (gqlws.AddError) ends with "error" instead of
// "complete"; one whose stream just ends, with "complete".
func TestAddError(t *testing.T) {
	for _, field := range []string{"feed", "plain"} {
		t.Run(field, func(t *testing.T) {
			f := newFixture(t, gqlws.Options{})
			c := f.dial(transportWS)
			c.init(transportWS)
			c.subscribe("subscribe", "ok", `subscription { `+field+`(key: "ok") }`)
			c.subscribe("subscribe", "bad", `subscription { `+field+`(key: "bad") }`)
			f.waitSubscribers("ok", 1)
			f.waitSubscribers("bad", 1)
			f.hub.push("bad", 1)
			c.expectData("next", "bad", field, 1)
			f.hub.end("ok", nil)
			c.expect("complete", "ok")
			f.hub.end("bad", &gqlerror.Error{Message: "gone", Extensions: map[string]any{"code": "NOT_FOUND"}})
			if code := errorCode(t, c.expect("error", "bad")); code != "NOT_FOUND" {
				t.Fatalf("code %q, want NOT_FOUND", code)
			}
			if got := c.quiesce(); len(got) != 0 {
				t.Fatalf("after the end: %v, want nothing", got)
			}
		})
	}
}

// TestPanic: a panic in a subscription's response handler ends that subscription with an
// "error" message (the schema's recover func: INTERNAL); the connection serves on.
func TestPanic(t *testing.T) {
	for _, field := range []string{"feed", "plain"} {
		t.Run(field, func(t *testing.T) {
			f := newFixture(t, gqlws.Options{})
			c := f.dial(transportWS)
			c.init(transportWS)
			c.subscribe("subscribe", "p", `subscription { `+field+`(key: "k") }`)
			f.waitSubscribers("k", 1)
			f.hub.push("k", 1)
			c.expectData("next", "p", field, 1)
			f.hub.push("k", -1)
			m := c.expect("error", "p")
			if code := errorCode(t, m); code != "INTERNAL" || !strings.Contains(string(m.Payload), "internal system error") {
				t.Fatalf("got %s, want the recover func's INTERNAL error", m)
			}
			c.subscribe("subscribe", "q", "{ hello }")
			c.expect("next", "q")
			c.expect("complete", "q")
			c.subscribe("subscribe", "p", `subscription { `+field+`(key: "k2") }`)
			f.waitSubscribers("k2", 1)
			f.hub.push("k2", 2)
			c.expectData("next", "p", field, 2)
		})
	}
}
