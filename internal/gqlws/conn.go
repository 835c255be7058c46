package gqlws

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/coder/websocket"
)

// conn is one WebSocket connection: its protocol, its context (ended when the connection
// ends), and its running operations by id.
type conn struct {
	t       *Transport
	ws      *websocket.Conn
	proto   *protocol
	exec    graphql.GraphExecutor
	ctx     context.Context // the connection's: Options.Init's, cancelled at the end
	cancel  context.CancelFunc
	running chan struct{} // a token per operation executing (Options.MaxRunning)

	lastRead atomic.Int64 // unix ns of the last message from the client
	lastPing atomic.Int64 // unix ns of the last ping written (0: none yet)
	pings    atomic.Int64 // pings read and not answered yet (pong)

	mu     sync.Mutex
	ops    map[string]*operation
	subs   int // running subscriptions (Options.MaxSubscriptions)
	closed bool
}

func newConn(t *Transport, ws *websocket.Conn, r *http.Request, exec graphql.GraphExecutor) *conn {
	proto := protocols[ws.Subprotocol()]
	if proto == nil {
		proto = protocols[legacyWS] // no subprotocol named: the legacy protocol, as gqlgen does
	}
	ws.SetReadLimit(t.opts.ReadLimit)
	// The request's context ends when the handler returns; the connection outlives it.
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	c := &conn{t: t, ws: ws, proto: proto, exec: exec, ctx: ctx, cancel: cancel, ops: map[string]*operation{},
		running: make(chan struct{}, t.opts.MaxRunning)}
	c.lastRead.Store(time.Now().UnixNano())
	return c
}

// init waits for connection_init (answering pings meanwhile), runs Options.Init and
// acknowledges. It reports whether the connection goes on; if not, it is closed.
func (c *conn) init() bool {
	timer := time.AfterFunc(c.t.opts.InitTimeout, func() {
		c.close(closeInitTimeout, "Connection initialisation timeout")
	})
	defer timer.Stop()
	for {
		m, ok := c.read()
		if !ok {
			return false
		}
		switch m.kind {
		case kindPing:
			c.write(kindPong, "", nil)
			continue
		case kindPong:
			continue
		case kindTerminate:
			c.close(websocket.StatusNormalClosure, "terminated")
			return false
		case kindSubscribe:
			c.close(closeUnauthorized, "Unauthorized")
			return false
		case kindInit:
		default:
			c.close(closeBadRequest, "Invalid message received: expected connection_init")
			return false
		}
		if !timer.Stop() {
			return false // timed out meanwhile: closed
		}
		var payload map[string]any
		if len(m.payload) > 0 && json.Unmarshal(m.payload, &payload) != nil {
			c.close(closeBadRequest, "Invalid message received: the connection_init payload is not an object")
			return false
		}
		if c.t.opts.Init != nil {
			ctx, err := c.callInit(payload)
			if errors.Is(err, errInitPanicked) {
				c.close(websocket.StatusInternalError, "internal error")
				return false
			}
			if err != nil {
				if c.proto.name == legacyWS {
					b, _ := json.Marshal(map[string]string{"message": err.Error()})
					c.write(kindConnError, "", b)
				}
				c.close(closeTryAgainLater, clip(err.Error()))
				return false
			}
			c.ctx = ctx
		}
		c.write(kindAck, "", nil)
		if c.proto.name == legacyWS {
			c.write(kindKeepAlive, "", nil)
		}
		c.t.keeper.add(c)
		return true
	}
}

// errInitPanicked is Options.Init's panic, recovered.
var errInitPanicked = errors.New("gqlws: Options.Init panicked")

// callInit runs Options.Init, a panic in it recovered (logged; the connection is closed with
// 1011) rather than left to net/http, which would drop the connection without a word.
func (c *conn) callInit(payload map[string]any) (ctx context.Context, err error) {
	defer func() {
		if r := recover(); r != nil {
			c.t.opts.Logger.Error("websocket: connection_init panicked", "panic", r)
			ctx, err = c.ctx, errInitPanicked
		}
	}()
	return c.t.opts.Init(c.ctx, payload)
}

// serve reads the client's messages until the connection ends, then ends its operations.
func (c *conn) serve() {
	defer c.end()
	for {
		m, ok := c.read()
		if !ok {
			return
		}
		switch m.kind {
		case kindSubscribe:
			if !c.start(m) {
				return
			}
		case kindComplete:
			c.stop(m.id)
		case kindPing:
			c.pong()
		case kindPong:
		case kindInit:
			c.close(closeTooManyInits, "Too many initialisation requests")
			return
		case kindTerminate:
			c.close(websocket.StatusNormalClosure, "terminated")
			return
		default:
			c.close(closeBadRequest, "Invalid message received")
			return
		}
	}
}

// pong answers a ping from a goroutine of its own: the write path would deepen the reader's
// stack, which every idle connection keeps (4 KB instead of 8). One goroutine at most writes
// a connection's pongs, each pong answering every ping read before it was written, so a
// client sending pings without reading the answers holds one goroutine, not one per ping.
func (c *conn) pong() {
	if c.pings.Add(1) > 1 {
		return // the pong writer will answer it
	}
	go func() {
		for {
			n := c.pings.Load()
			if !c.write(kindPong, "", nil) {
				c.pings.Store(0) // the connection is closing
				return
			}
			if c.pings.Add(-n) == 0 {
				return
			}
		}
	}()
}

// read returns the next message; false when the connection ended or sent something that is
// not a message of the protocol (it is closed then).
func (c *conn) read() (message, bool) {
	typ, data, err := c.ws.Read(context.Background())
	if err != nil {
		return message{}, false
	}
	c.lastRead.Store(time.Now().UnixNano())
	if typ != websocket.MessageText {
		c.close(closeBadRequest, "Invalid message received: binary")
		return message{}, false
	}
	m, bad := c.proto.parse(data)
	if bad != "" {
		c.close(closeBadRequest, bad)
		return message{}, false
	}
	return m, true
}

// start registers a subscribe message's operation and runs it on a goroutine of its own,
// once fewer than Options.MaxRunning are executing (the reader waits meanwhile). A running
// operation's id again closes the connection (4409); false then, or if the connection ended.
func (c *conn) start(m message) bool {
	op := &operation{c: c, id: m.id, readAt: time.Now()}
	select {
	case c.running <- struct{}{}:
		op.executing.Store(true)
	case <-c.ctx.Done():
		return false
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		op.executed()
		return false
	}
	if _, dup := c.ops[m.id]; dup {
		c.mu.Unlock()
		op.executed()
		c.close(closeDuplicateID, "Subscriber for "+clip(m.id)+" already exists")
		return false
	}
	op.ctx, op.cancel = context.WithCancel(c.ctx)
	op.ready.Store(1) // the dispatch: a Ready during it starts no goroutine
	c.ops[m.id] = op
	c.mu.Unlock()
	go op.run(m.payload)
	return true
}

// stop ends an operation the client completed; nothing more is sent for it, and its id is
// free at once (as graphql-ws frees it), though the operation may still be winding down.
func (c *conn) stop(id string) {
	c.mu.Lock()
	op := c.ops[id]
	delete(c.ops, id)
	if op != nil {
		c.releaseLocked(op)
	}
	c.mu.Unlock()
	if op != nil {
		op.stopped.Store(true)
		op.cancel()
	}
}

// done forgets a finished operation: its id and its subscription slot are free.
func (c *conn) done(op *operation) {
	c.mu.Lock()
	if c.ops[op.id] == op {
		delete(c.ops, op.id)
	}
	c.releaseLocked(op)
	c.mu.Unlock()
	op.cancel()
}

// takeSlot counts a subscription against Options.MaxSubscriptions; false if the connection
// runs that many already.
func (c *conn) takeSlot(op *operation) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if max := c.t.opts.MaxSubscriptions; max > 0 && c.subs >= max {
		return false
	}
	c.subs++
	op.slot = true
	return true
}

func (c *conn) releaseLocked(op *operation) {
	if op.slot {
		op.slot = false
		c.subs--
	}
}

// write sends one message, within Options.WriteTimeout (coder/websocket closes the
// connection when a write times out). Writes from several goroutines are serialised by
// coder/websocket.
func (c *conn) write(k kind, id string, payload []byte) bool {
	return c.writeWithin(c.t.opts.WriteTimeout, k, id, payload)
}

func (c *conn) writeWithin(d time.Duration, k kind, id string, payload []byte) bool {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return c.ws.Write(ctx, websocket.MessageText, c.proto.encode(k, id, payload)) == nil
}

// close closes the connection with a close frame (the handshake, which may wait 5 s for
// the client's answer, runs in the background) and ends its operations.
func (c *conn) close(code websocket.StatusCode, reason string) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	c.mu.Unlock()
	c.t.keeper.remove(c)
	c.cancel()
	go func() { _ = c.ws.Close(code, reason) }()
}

// end runs when the reader stops: the connection is closed and every operation's context
// ends (their goroutines, if any, see it and finish).
func (c *conn) end() {
	c.mu.Lock()
	closing := c.closed
	c.closed = true
	c.mu.Unlock()
	c.t.keeper.remove(c)
	c.cancel()
	if !closing {
		_ = c.ws.CloseNow()
	}
}

// keepAlive is the keeper's round for this connection (see keeper).
func (c *conn) keepAlive(now time.Time, interval time.Duration) {
	if c.proto.name != transportWS {
		c.writeWithin(pingTimeout, kindKeepAlive, "", nil)
		return
	}
	if ping := c.lastPing.Load(); ping != 0 && c.lastRead.Load() < ping && now.Sub(time.Unix(0, ping)) > interval*3/2 {
		_ = c.ws.CloseNow() // the reader ends, and with it the connection
		return
	}
	sent := time.Now().UnixNano() // before the write: its pong may be read before Write returns
	if c.writeWithin(pingTimeout, kindPing, "", nil) && c.lastPing.Load() <= c.lastRead.Load() {
		c.lastPing.Store(sent) // the oldest unanswered ping counts
	}
}

// decodeParams decodes a subscribe payload as gqlgen does (numbers kept as json.Number).
func decodeParams(payload json.RawMessage) (*graphql.RawParams, error) {
	p := &graphql.RawParams{}
	if len(payload) == 0 {
		return nil, errors.New("the subscribe message has no payload")
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	if err := dec.Decode(p); err != nil {
		return nil, errors.New("the subscribe payload must be an object: query a string, operationName a string, variables and extensions objects")
	}
	return p, nil
}
