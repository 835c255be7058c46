package gqlws_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/coder/websocket"
	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/surgekit/surge/internal/gqlws"
	"github.com/surgekit/surge/internal/testenv"
)

// within bounds every wait of these tests: they are over in milliseconds when things work.
const within = 3 * time.Second

// The test schema. feed announces its channel to the transport's Listener, as the live Hub
// does; plain does not, so a goroutine of the transport waits on its channel (gqlgen's model).
// Both stream the values the test pushes to their key (a negative one makes the response
// handler panic).
var schema = gqlparser.MustLoadSchema(&ast.Source{Input: `
	type Query { hello: String! slow: String! }
	type Subscription {
		feed(key: String!): Int!
		plain(key: String!): Int!
	}
`})

type listenerKey struct{}

// fixture is a GraphQL server on a real HTTP server with a gqlws transport, and the producer
// of its subscriptions' values.
type fixture struct {
	t   *testing.T
	url string
	tr  *gqlws.Transport
	hub *hub
	pad atomic.Int64 // bytes of padding in each subscription message
	// slow queries run until gate is closed; slowRunning counts those running.
	gate        chan struct{}
	slowRunning atomic.Int64
}

// newFixture serves the test schema through gqlws.New(opts). Unless opts says otherwise the
// keeper is off (a keeper's goroutine outlives the test by up to an interval), Listen puts
// the Listener where the schema's resolvers look, and logs are discarded. wrap, if set, wraps
// the GraphQL handler.
func newFixture(t *testing.T, opts gqlws.Options, wrap ...func(http.Handler) http.Handler) *fixture {
	t.Helper()
	f := &fixture{t: t, hub: newHub(), gate: make(chan struct{})}
	if opts.KeepAlive == 0 {
		opts.KeepAlive = -1
	}
	if opts.Listen == nil {
		opts.Listen = func(ctx context.Context, l gqlws.Listener) context.Context {
			return context.WithValue(ctx, listenerKey{}, l)
		}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	f.tr = gqlws.New(opts)
	srv := handler.New(&graphql.ExecutableSchemaMock{
		ExecFunc:   f.exec,
		SchemaFunc: func() *ast.Schema { return schema },
		ComplexityFunc: func(context.Context, string, string, int, map[string]any) (int, bool) {
			return 1, true
		},
	})
	srv.AddTransport(f.tr)
	srv.SetRecoverFunc(func(ctx context.Context, err any) error {
		return &gqlerror.Error{Message: "internal system error", Extensions: map[string]any{"code": "INTERNAL"}}
	})
	var h http.Handler = srv
	for _, w := range wrap {
		h = w(h)
	}
	hs := httptest.NewServer(h)
	f.url = "ws" + strings.TrimPrefix(hs.URL, "http")
	// Registered first, so run last: after the clients' cleanups closed them, nothing of the
	// transport may be left running.
	t.Cleanup(func() {
		hs.Close()
		waitFor(t, "the connections and operations to end", func() bool {
			return goroutines("gqlws.(*conn).serve") == 0 && goroutines("gqlws.(*operation)") == 0
		})
	})
	return f
}

// exec is the schema's executor, shaped like gqlgen's generated code: a subscription's
// resolver runs at dispatch and returns a channel; each call of the response handler reads
// one value from it, and the end of the channel ends the stream.
func (f *fixture) exec(ctx context.Context) graphql.ResponseHandler {
	oc := graphql.GetOperationContext(ctx)
	field := oc.Operation.SelectionSet[0].(*ast.Field)
	if oc.Operation.Operation != ast.Subscription {
		if field.Name == "slow" {
			ran := false
			return func(ctx context.Context) *graphql.Response {
				if ran {
					return nil
				}
				ran = true
				f.slowRunning.Add(1)
				defer f.slowRunning.Add(-1)
				select {
				case <-f.gate:
				case <-ctx.Done():
				}
				return &graphql.Response{Data: []byte(`{"slow":"done"}`)}
			}
		}
		return graphql.OneShot(&graphql.Response{Data: []byte(`{"hello":"world"}`)})
	}
	key, _ := field.ArgumentMap(oc.Variables)["key"].(string)
	var l gqlws.Listener
	if field.Name == "feed" {
		l, _ = ctx.Value(listenerKey{}).(gqlws.Listener)
	}
	ch := f.hub.subscribe(ctx, key, l)
	if l != nil {
		l.Attached() // the subscription call succeeded, as live.Hub says
	}
	pad := strings.Repeat("x", int(f.pad.Load()))
	return func(ctx context.Context) *graphql.Response {
		select {
		case v, ok := <-ch:
			if !ok {
				return nil
			}
			f.hub.read()
			if v < 0 {
				panic("a negative value")
			}
			if pad != "" {
				return &graphql.Response{Data: fmt.Appendf(nil, `{%q:%d,"pad":%q}`, field.Alias, v, pad)}
			}
			return &graphql.Response{Data: fmt.Appendf(nil, `{%q:%d}`, field.Alias, v)}
		case <-ctx.Done():
			return nil
		}
	}
}

// hub produces the subscriptions' values the way live.Hub does: one-value channels always
// holding the latest value not yet read, Ready for a value put into an empty channel and for
// the close, and a subscriber whose context ends leaves (its channel is closed).
type hub struct {
	mu    sync.Mutex
	subs  map[string]map[*slot]struct{}
	last  map[string]int // a new subscriber gets it at once, before Attached (a Ready at dispatch)
	reads atomic.Int64   // values read by the response handlers
	drops atomic.Int64   // values replaced before they were read

	logMu   sync.Mutex
	readLog []time.Time // when each value was read
}

func (h *hub) read() {
	h.reads.Add(1)
	h.logMu.Lock()
	h.readLog = append(h.readLog, time.Now())
	h.logMu.Unlock()
}

// longestPause is the longest time the response handlers went without reading a value,
// between the first value read and until.
func (h *hub) longestPause(until time.Time) time.Duration {
	h.logMu.Lock()
	defer h.logMu.Unlock()
	var longest time.Duration
	for i, at := range h.readLog {
		next := until
		if i+1 < len(h.readLog) {
			next = h.readLog[i+1]
		}
		longest = max(longest, next.Sub(at))
	}
	return longest
}

type slot struct {
	ch    chan int
	ctx   context.Context
	l     gqlws.Listener
	drops *atomic.Int64 // the hub's count of values replaced unread
}

func newHub() *hub { return &hub{subs: map[string]map[*slot]struct{}{}, last: map[string]int{}} }

func (h *hub) subscribe(ctx context.Context, key string, l gqlws.Listener) <-chan int {
	s := &slot{ch: make(chan int, 1), ctx: ctx, l: l, drops: &h.drops}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs[key] == nil {
		h.subs[key] = map[*slot]struct{}{}
	}
	h.subs[key][s] = struct{}{}
	if v, ok := h.last[key]; ok {
		s.offer(v)
	}
	context.AfterFunc(ctx, func() { h.leave(key, s) })
	return s.ch
}

// push offers v to key's subscribers, replacing a value not read yet.
func (h *hub) push(key string, v int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.last[key] = v
	for s := range h.subs[key] {
		s.offer(v)
	}
}

// offer puts v in the slot, replacing a value not read yet, as live's slot.offer: Ready only
// for a value put into an empty channel (a replaced one leaves no more to read than before).
func (s *slot) offer(v int) {
	dropped := false
	for {
		select {
		case s.ch <- v:
			if !dropped && s.l != nil {
				s.l.Ready()
			}
			return
		default:
		}
		select {
		case <-s.ch:
			dropped = true
			s.drops.Add(1)
		default:
		}
	}
}

// end ends key's streams, with err added to each subscription (gqlws.AddError) if set.
func (h *hub) end(key string, err *gqlerror.Error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs[key] {
		if err != nil {
			gqlws.AddError(s.ctx, err)
		}
		s.close()
	}
	delete(h.subs, key)
	delete(h.last, key)
}

func (h *hub) leave(key string, s *slot) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[key][s]; !ok {
		return
	}
	delete(h.subs[key], s)
	s.close()
}

func (s *slot) close() {
	close(s.ch)
	if s.l != nil {
		s.l.Ready()
	}
}

// subscribers counts key's subscribers.
func (h *hub) subscribers(key string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs[key])
}

// waitSubscribers waits until key has n subscribers.
func (f *fixture) waitSubscribers(key string, n int) {
	f.t.Helper()
	waitFor(f.t, fmt.Sprintf("%d subscribers of %q", n, key), func() bool { return f.hub.subscribers(key) == n })
}

// msg is a protocol message, either way.
type msg struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

func (m msg) String() string {
	b, _ := json.Marshal(m)
	return string(b)
}

// client is a WebSocket client whose reader goroutine queues what the server sends.
type client struct {
	t    *testing.T
	ws   *websocket.Conn
	in   chan msg // closed when the connection ends
	done chan struct{}
	err  error // the read error that ended the connection (after done)
}

const (
	transportWS = "graphql-transport-ws"
	legacyWS    = "graphql-ws"
)

// dial connects with the subprotocols given (none: the server picks the legacy one).
func (f *fixture) dial(subprotocols ...string) *client {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, f.url, &websocket.DialOptions{Subprotocols: subprotocols})
	if err != nil {
		f.t.Fatal(err)
	}
	ws.SetReadLimit(-1)
	c := &client{t: f.t, ws: ws, in: make(chan msg, 1<<16), done: make(chan struct{})}
	f.t.Cleanup(func() { _ = ws.CloseNow() })
	go func() {
		defer close(c.done)
		defer close(c.in)
		for {
			_, data, err := ws.Read(context.Background())
			if err != nil {
				c.err = err
				return
			}
			var m msg
			if err := json.Unmarshal(data, &m); err != nil {
				c.err = fmt.Errorf("not a message: %q", data)
				return
			}
			c.in <- m
		}
	}()
	return c
}

func (c *client) sendRaw(s string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if err := c.ws.Write(ctx, websocket.MessageText, []byte(s)); err != nil {
		c.t.Fatalf("write %s: %v", s, err)
	}
}

func (c *client) send(typ, id string, payload any) {
	c.t.Helper()
	m := msg{Type: typ, ID: id}
	if payload != nil {
		m.Payload, _ = json.Marshal(payload)
	}
	c.sendRaw(m.String())
}

// subscribe sends an operation: "subscribe" in graphql-transport-ws, "start" in the legacy
// protocol.
func (c *client) subscribe(typ, id, query string) {
	c.t.Helper()
	c.send(typ, id, map[string]any{"query": query})
}

// next returns the next message.
func (c *client) next() msg {
	c.t.Helper()
	m, err := c.read()
	if err != nil {
		c.t.Fatal(err)
	}
	return m
}

// read returns the next message (for goroutines other than the test's).
func (c *client) read() (msg, error) {
	select {
	case m, ok := <-c.in:
		if !ok {
			return m, fmt.Errorf("the connection ended: %v", c.err)
		}
		return m, nil
	case <-time.After(within):
		return msg{}, fmt.Errorf("no message within %v", within)
	}
}

// expect returns the next message, which must be of type typ for id.
func (c *client) expect(typ, id string) msg {
	c.t.Helper()
	m := c.next()
	if m.Type != typ || m.ID != id {
		c.t.Fatalf("got %s, want type %q id %q", m, typ, id)
	}
	return m
}

// expectData reads the next message, which must be a result ("next", legacy "data") for id
// carrying {field: want}.
func (c *client) expectData(typ, id, field string, want int) {
	c.t.Helper()
	if got := dataOf(c.t, c.expect(typ, id), field); got != want {
		c.t.Fatalf("%s of %s: got %d, want %d", field, id, got, want)
	}
}

// dataOf is a result message's data.field.
func dataOf(t *testing.T, m msg, field string) int {
	t.Helper()
	v, err := value(m, field)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func value(m msg, field string) (int, error) {
	var p struct {
		Data   map[string]json.RawMessage `json:"data"`
		Errors []any                      `json:"errors"`
	}
	if err := json.Unmarshal(m.Payload, &p); err != nil || len(p.Errors) > 0 {
		return 0, fmt.Errorf("not a result: %s", m)
	}
	var v int
	if err := json.Unmarshal(p.Data[field], &v); err != nil {
		return 0, fmt.Errorf("no %s in %s", field, m)
	}
	return v, nil
}

// init sends connection_init and expects connection_ack (and, legacy, "ka").
func (c *client) init(proto string) {
	c.t.Helper()
	c.send("connection_init", "", nil)
	c.expect("connection_ack", "")
	if proto == legacyWS {
		c.expect("ka", "")
	}
}

// closed waits for the connection's end, which must be a close with code, and returns the
// messages received before it.
func (c *client) closed(code websocket.StatusCode) []msg {
	c.t.Helper()
	var got []msg
	timeout := time.After(within)
	for {
		select {
		case m, ok := <-c.in:
			if ok {
				got = append(got, m)
				continue
			}
			if s := websocket.CloseStatus(c.err); s != code {
				c.t.Fatalf("connection ended with %v (status %v), want close %v; messages before: %v", c.err, s, code, got)
			}
			return got
		case <-timeout:
			c.t.Fatalf("still open after %v, want close %v", within, code)
		}
	}
}

// sync pings (graphql-transport-ws) and returns what came before the pong: with the
// transport's goroutines idle, everything the server had written.
func (c *client) sync() []msg {
	c.t.Helper()
	c.send("ping", "", nil)
	var got []msg
	for {
		m := c.next()
		if m.Type == "pong" {
			return got
		}
		got = append(got, m)
	}
}

// quiesce waits until no operation goroutine runs, then returns what the server sent
// meanwhile: a message still due (a "complete" after an "error", say) would have been written
// by then.
func (c *client) quiesce() []msg {
	c.t.Helper()
	waitFor(c.t, "no operation goroutine", func() bool { return goroutines("gqlws.(*operation)") == 0 })
	return c.sync()
}

// errorCode is an "error" message's first error's extensions.code.
func errorCode(t *testing.T, m msg) string {
	t.Helper()
	var errs []struct {
		Message    string         `json:"message"`
		Extensions map[string]any `json:"extensions"`
	}
	if err := json.Unmarshal(m.Payload, &errs); err != nil || len(errs) == 0 {
		t.Fatalf("not a list of errors: %s", m)
	}
	code, _ := errs[0].Extensions["code"].(string)
	return code
}

// goroutines counts the goroutines whose stack contains s.
func goroutines(s string) int { return testenv.CountGoroutines(s) }

// waitFor polls cond until it holds, failing the test after within.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
