package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/coder/websocket"
)

// TestWebsocketKeeper: one goroutine pings every connection; a graphql-transport-ws client
// that answers is kept, one that sends nothing is closed after two intervals, and the
// goroutine ends with the last connection.
func TestWebsocketKeeper(t *testing.T) {
	const interval = 100 * time.Millisecond
	k := &websocketConns{interval: interval}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := k.Accept(w, r, transport.WebsocketAcceptOptions{Subprotocols: []string{"graphql-transport-ws"}})
		if err != nil {
			return
		}
		defer c.Close()
		for {
			if _, _, err := c.NextReader(); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	dial := func() *websocket.Conn {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	alive, silent := dial(), dial()
	defer alive.CloseNow()
	defer silent.CloseNow()

	pings := make(chan struct{}, 100)
	go func() {
		for {
			_, data, err := alive.Read(context.Background())
			if err != nil {
				return
			}
			if string(data) == `{"type":"ping"}` {
				pings <- struct{}{}
				_ = alive.Write(context.Background(), websocket.MessageText, []byte(`{"type":"pong"}`))
			}
		}
	}()
	silentErr := make(chan error, 1)
	start := time.Now()
	go func() {
		for { // reads (the pings) but never answers
			if _, _, err := silent.Read(context.Background()); err != nil {
				silentErr <- err
				return
			}
		}
	}()
	select {
	case <-silentErr:
		if d := time.Since(start); d < 2*interval {
			t.Errorf("the silent client was closed after %v, before two intervals", d)
		}
	case <-time.After(20 * interval):
		t.Fatal("the silent client is still connected")
	}
	n := len(pings)
	time.Sleep(3 * interval)
	if len(pings) <= n || len(pings) < 4 {
		t.Fatalf("the answering client got %d pings in %v", len(pings), time.Since(start))
	}
	k.mu.Lock()
	open, running := len(k.open), k.running
	k.mu.Unlock()
	if open != 1 || !running {
		t.Fatalf("%d connections open (want 1), keeper running %v", open, running)
	}
	alive.CloseNow()
	deadline := time.Now().Add(20 * interval)
	for {
		k.mu.Lock()
		open, running = len(k.open), k.running
		k.mu.Unlock()
		if open == 0 && !running {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the last close: %d connections open, keeper running %v", open, running)
		}
		time.Sleep(interval / 2)
	}
}
