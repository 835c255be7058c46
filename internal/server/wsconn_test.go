package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
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

// TestWebsocketKeeperHeldUp: a keeper that could not ping for a while (held up by slow
// writes) does not take the silence it caused for a dead client: it pings first, and closes
// only a connection that leaves a ping unanswered.
func TestWebsocketKeeperHeldUp(t *testing.T) {
	const interval = 100 * time.Millisecond
	k := &websocketConns{} // no keeper goroutine: the test drives keepAlive
	conns := make(chan *wsConn, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := k.Accept(w, r, transport.WebsocketAcceptOptions{Subprotocols: []string{"graphql-transport-ws"}})
		if err != nil {
			return
		}
		defer c.Close()
		conns <- c.(*wsConn)
		for {
			if _, _, err := c.NextReader(); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	client, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	if err != nil {
		t.Fatal(err)
	}
	defer client.CloseNow()
	var answer atomic.Bool
	answer.Store(true)
	pongs := make(chan struct{}, 10)
	go func() {
		for {
			_, data, err := client.Read(context.Background())
			if err != nil {
				return
			}
			if string(data) == `{"type":"ping"}` && answer.Load() {
				_ = client.Write(context.Background(), websocket.MessageText, []byte(`{"type":"pong"}`))
				pongs <- struct{}{}
			}
		}
	}()
	c := <-conns
	isOpen := func() bool {
		k.mu.Lock()
		defer k.mu.Unlock()
		_, ok := k.open[c]
		return ok
	}
	time.Sleep(5 * interval) // the keeper was held up: no ping for five intervals
	c.keepAlive(time.Now(), interval)
	if !isOpen() {
		t.Fatal("closed for the silence of a held-up keeper")
	}
	select {
	case <-pongs:
	case <-time.After(20 * interval):
		t.Fatal("the client got no ping after the hold-up")
	}
	time.Sleep(interval) // the pong is read
	if c.keepAlive(time.Now().Add(2*interval), interval); !isOpen() {
		t.Fatal("closed although it answered the ping")
	}
	<-pongs
	// Now it stops answering: the next ping goes unanswered.
	answer.Store(false)
	time.Sleep(interval) // the last pong is read
	if c.keepAlive(time.Now(), interval); !isOpen() {
		t.Fatal("closed although it answered the last ping")
	}
	if c.keepAlive(time.Now().Add(2*interval), interval); isOpen() {
		t.Fatal("still open with a ping unanswered for two intervals")
	}
}
