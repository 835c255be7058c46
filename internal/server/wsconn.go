package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/coder/websocket"
)

// websocketConns accepts the WebSocket connections of the GraphQL transport (coder/websocket)
// and keeps them alive with one goroutine for all of them. gqlgen's own keep-alive runs a
// ticker goroutine per connection, which at 10 000 idle connections was 10 000 goroutines and
// their stacks for a ping every 15 s. Every interval the keeper pings each connection
// (graphql-transport-ws "ping"; "ka" in the legacy graphql-ws, which has no answer) and closes
// a graphql-transport-ws connection that sent nothing, not even a pong, since a ping written
// over 1.5 intervals before (about two intervals of silence). It runs only while connections
// are open. Pings are written one connection after another, each bounded by pingTimeout.
type websocketConns struct {
	accept   websocket.AcceptOptions
	interval time.Duration

	mu      sync.Mutex
	open    map[*wsConn]struct{}
	running bool // the keeper goroutine
}

var _ transport.WebsocketImplementation = (*websocketConns)(nil)

// pingTimeout bounds the write of one ping: a client that takes longer to take 20 bytes is
// not reading, and the write's timeout closes its connection.
const pingTimeout = 2 * time.Second

func (p *websocketConns) Accept(w http.ResponseWriter, r *http.Request, options transport.WebsocketAcceptOptions) (transport.WebsocketConn, error) {
	for key, values := range options.ResponseHeader {
		for _, value := range values {
			w.Header().Add(key, value)
		}
	}
	opts := p.accept
	opts.Subprotocols = slices.Clone(opts.Subprotocols)
	for _, sp := range options.Subprotocols {
		if !slices.Contains(opts.Subprotocols, sp) {
			opts.Subprotocols = append(opts.Subprotocols, sp)
		}
	}
	conn, err := websocket.Accept(w, r, &opts)
	if err != nil {
		return nil, err
	}
	c := &wsConn{conn: conn, keeper: p}
	c.lastRead.Store(time.Now().UnixNano())
	p.mu.Lock()
	if p.open == nil {
		p.open = map[*wsConn]struct{}{}
	}
	p.open[c] = struct{}{}
	if !p.running && p.interval > 0 {
		p.running = true
		go p.keep()
	}
	p.mu.Unlock()
	return c, nil
}

func (p *websocketConns) remove(c *wsConn) {
	p.mu.Lock()
	delete(p.open, c)
	p.mu.Unlock()
}

// keep pings every open connection each interval, until none is open.
func (p *websocketConns) keep() {
	tick := time.NewTicker(p.interval)
	defer tick.Stop()
	var conns []*wsConn
	for now := range tick.C {
		p.mu.Lock()
		if len(p.open) == 0 {
			p.running = false
			p.mu.Unlock()
			return
		}
		conns = conns[:0]
		for c := range p.open {
			conns = append(conns, c)
		}
		p.mu.Unlock()
		for _, c := range conns {
			c.keepAlive(now, p.interval)
		}
		clear(conns)
	}
}

// wsConn is one connection, as gqlgen's transport sees it (after gqlgen's own adapter of
// coder/websocket, with the last read time for the keeper).
type wsConn struct {
	conn     *websocket.Conn
	keeper   *websocketConns
	lastRead atomic.Int64 // unix ns of the last message from the client
	lastPing atomic.Int64 // unix ns of the last ping written (0: none yet)

	mu        sync.Mutex
	closing   bool // WriteClose's close handshake is under way and owns the connection
	closeOnce sync.Once
}

var _ transport.WebsocketReadLimiter = (*wsConn)(nil)

var (
	pingMessage = []byte(`{"type":"ping"}`)
	kaMessage   = []byte(`{"type":"ka"}`)
)

func (c *wsConn) keepAlive(now time.Time, interval time.Duration) {
	msg := kaMessage
	if c.conn.Subprotocol() == "graphql-transport-ws" {
		// Silence alone proves nothing (the keeper may have been held up, sending no ping):
		// closed only when a ping written over 1.5 intervals ago went unanswered.
		if ping := c.lastPing.Load(); ping != 0 && c.lastRead.Load() < ping && now.Sub(time.Unix(0, ping)) > interval*3/2 {
			_ = c.Close()
			return
		}
		msg = pingMessage
	}
	ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
	sent := time.Now().UnixNano() // before the write: its pong may be read before Write returns
	if c.conn.Write(ctx, websocket.MessageText, msg) == nil && c.lastPing.Load() <= c.lastRead.Load() {
		c.lastPing.Store(sent) // the oldest unanswered ping counts
	}
	cancel()
}

func (c *wsConn) NextReader() (int, io.Reader, error) {
	typ, data, err := c.conn.Read(context.Background())
	if err != nil {
		c.keeper.remove(c)
		if s := websocket.CloseStatus(err); s == websocket.StatusNormalClosure || s == websocket.StatusNoStatusRcvd {
			return int(typ), nil, transport.ErrWebsocketClosed
		}
		return int(typ), nil, err
	}
	c.lastRead.Store(time.Now().UnixNano())
	return int(typ), bytes.NewReader(data), nil
}

func (c *wsConn) WriteJSON(v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.conn.Write(context.Background(), websocket.MessageText, data)
}

// WriteClose starts the close handshake in the background, as gqlgen's adapter does: it can
// wait up to 5 s for the peer's close frame, and the transport's teardown must not.
func (c *wsConn) WriteClose(code int, message string) error {
	c.keeper.remove(c)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return nil
	}
	c.closing = true
	go func() { _ = c.conn.Close(websocket.StatusCode(code), message) }()
	return nil
}

func (c *wsConn) Close() error {
	c.keeper.remove(c)
	c.mu.Lock()
	closing := c.closing
	c.mu.Unlock()
	if closing {
		return nil // the handshake's goroutine closes the connection
	}
	var err error
	c.closeOnce.Do(func() { err = c.conn.CloseNow() })
	return err
}

func (c *wsConn) Subprotocol() string      { return c.conn.Subprotocol() }
func (c *wsConn) SetReadLimit(limit int64) { c.conn.SetReadLimit(limit) }
