package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/surgekit/surge/ent/voucher"
	"github.com/surgekit/surge/internal/app"
	"github.com/surgekit/surge/internal/catalog"
	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/seckill"
)

// wsMsg is a graphql-transport-ws message.
type wsMsg struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
	at      time.Time       // when it arrived
}

// wsClient speaks graphql-transport-ws (the protocol of the graphql-ws library) over a real
// WebSocket: a reader goroutine answers pings and queues every other message.
type wsClient struct {
	t       *testing.T
	conn    *websocket.Conn
	msgs    chan wsMsg
	done    chan struct{}   // closed when the reader stops
	stopped map[string]bool // operations the client completed: their late messages are skipped
	err     error           // what ended the connection (once msgs is closed)
}

// dialWS opens a WebSocket to /query with the graphql-transport-ws subprotocol and the given
// request headers; it does not send connection_init.
func (e *env) dialWS(header http.Header) (*wsClient, *http.Response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(e.url, "http")+"/query", &websocket.DialOptions{
		Subprotocols: []string{"graphql-transport-ws"}, HTTPHeader: header,
	})
	if err != nil {
		return nil, resp, err
	}
	c := &wsClient{t: e.t, conn: conn, msgs: make(chan wsMsg, 100), done: make(chan struct{}), stopped: map[string]bool{}}
	go c.read()
	e.t.Cleanup(func() { _ = conn.CloseNow(); <-c.done })
	return c, resp, nil
}

// ws connects and initialises with payload (nil: no payload), expecting connection_ack.
func (e *env) ws(payload map[string]any, header http.Header) *wsClient {
	e.t.Helper()
	c, _, err := e.dialWS(header)
	if err != nil {
		e.t.Fatalf("dial: %v", err)
	}
	if c.conn.Subprotocol() != "graphql-transport-ws" {
		e.t.Fatalf("negotiated subprotocol %q", c.conn.Subprotocol())
	}
	init := map[string]any{"type": "connection_init"}
	if payload != nil {
		init["payload"] = payload
	}
	c.send(init)
	if m := c.next(""); m.Type != "connection_ack" {
		e.t.Fatalf("after connection_init: %+v, want connection_ack", m)
	}
	return c
}

func (c *wsClient) read() {
	defer close(c.done)
	defer close(c.msgs)
	for {
		_, data, err := c.conn.Read(context.Background())
		if err != nil {
			c.err = err
			return
		}
		m := wsMsg{at: time.Now()}
		if err := json.Unmarshal(data, &m); err != nil {
			c.t.Errorf("message is not JSON: %s", data)
			return
		}
		if m.Type == "ping" {
			_ = c.conn.Write(context.Background(), websocket.MessageText, []byte(`{"type":"pong"}`))
			continue
		}
		c.msgs <- m
	}
}

func (c *wsClient) send(v any) {
	c.t.Helper()
	data, _ := json.Marshal(v)
	if err := c.conn.Write(context.Background(), websocket.MessageText, data); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

func (c *wsClient) subscribe(id, query string, vars map[string]any) {
	c.t.Helper()
	delete(c.stopped, id)
	c.send(map[string]any{"id": id, "type": "subscribe", "payload": map[string]any{"query": query, "variables": vars}})
}

// stop completes an operation from the client's side.
func (c *wsClient) stop(id string) {
	c.t.Helper()
	c.stopped[id] = true
	c.send(map[string]any{"id": id, "type": "complete"})
}

// next returns the next message; with id set, messages of other operations are an error.
func (c *wsClient) next(id string) wsMsg {
	c.t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case m, ok := <-c.msgs:
			if !ok {
				c.t.Fatalf("connection closed while waiting for a message (%s)", id)
			}
			if c.stopped[m.ID] {
				continue
			}
			if id != "" && m.ID != id {
				c.t.Fatalf("got %+v, want a message of operation %s", m, id)
			}
			return m
		case <-timeout:
			c.t.Fatalf("no message within 10 s (operation %q)", id)
		}
	}
}

// nextData expects a "next" message without errors and returns payload.data.field.
func (c *wsClient) nextData(id, field string) any {
	c.t.Helper()
	v, _ := c.nextDataAt(id, field)
	return v
}

// nextDataAt is nextData that also says when the message arrived.
func (c *wsClient) nextDataAt(id, field string) (any, time.Time) {
	c.t.Helper()
	m := c.next(id)
	var p struct {
		Data   map[string]any `json:"data"`
		Errors []gqlError     `json:"errors"`
	}
	if err := json.Unmarshal(m.Payload, &p); m.Type != "next" || err != nil || len(p.Errors) > 0 {
		c.t.Fatalf("got %s %s, want next with data", m.Type, m.Payload)
	}
	return p.Data[field], m.at
}

// nextError expects the operation to fail, either with an "error" message or with a "next"
// carrying errors and then "complete"; it returns the first error.
func (c *wsClient) nextError(id string) gqlError {
	c.t.Helper()
	m := c.next(id)
	var errs []gqlError
	switch m.Type {
	case "error":
		c.stopped[id] = true // "error" ends the operation (gqlgen still sends a "complete")
		if err := json.Unmarshal(m.Payload, &errs); err != nil {
			c.t.Fatalf("error payload %s: %v", m.Payload, err)
		}
	case "next":
		var p struct {
			Data   map[string]any `json:"data"`
			Errors []gqlError     `json:"errors"`
		}
		if err := json.Unmarshal(m.Payload, &p); err != nil || p.Data != nil {
			c.t.Fatalf("next %s: want errors and no data", m.Payload)
		}
		errs = p.Errors
		c.complete(id)
	default:
		c.t.Fatalf("got %+v, want an error", m)
	}
	if len(errs) == 0 {
		c.t.Fatalf("%s without errors: %s", m.Type, m.Payload)
	}
	return errs[0]
}

func (c *wsClient) complete(id string) {
	c.t.Helper()
	if m := c.next(id); m.Type != "complete" {
		c.t.Fatalf("got %s %s, want complete", m.Type, m.Payload)
	}
}

func (c *wsClient) quiet(d time.Duration) {
	c.t.Helper()
	select {
	case m := <-c.msgs:
		c.t.Fatalf("got %s %s, want no message for %v", m.Type, m.Payload, d)
	case <-time.After(d):
	}
}

func code(e gqlError) string { s, _ := e.Extensions["code"].(string); return s }

// warmVoucher creates a seckill voucher on sale now (through the catalog) and warms it into Redis.
func (e *env) warmVoucher(stock int) int {
	e.t.Helper()
	ctx := context.Background()
	shop := e.app.DB.Ent.Shop.Query().FirstIDX(ctx)
	begin, end := time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	v, err := e.app.Catalog.CreateVoucher(ctx, catalog.VoucherInput{
		ShopID: shop, Title: "Flash", PayValue: 100, ActualValue: 1000, Kind: voucher.KindSECKILL,
		Status: voucher.StatusACTIVE, Stock: &stock, BeginAt: &begin, EndAt: &end,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.app.Seckill.Warm(ctx, v.ID); err != nil {
		e.t.Fatal(err)
	}
	return v.ID
}

// user logs a new phone in and returns its token and user id.
func (e *env) user() (string, int) {
	e.t.Helper()
	token := e.login(testenv.Phone())
	id, err := strconv.Atoi(str(e.ok(token, me, nil), "me", "id"))
	if err != nil {
		e.t.Fatal(err)
	}
	return token, id
}

func (e *env) grab(userID, voucherID int) int64 {
	e.t.Helper()
	a, err := e.app.Seckill.Grab(context.Background(), userID, voucherID)
	if err != nil {
		e.t.Fatalf("grab: %v", err)
	}
	return a.OrderID
}

const (
	stockSub = `subscription($v: ID!) { voucherStock(voucherId: $v) }`
	orderSub = `subscription($o: ID!) { orderStatus(orderId: $o) }`
)

func TestSubscriptionsOverWebsocket(t *testing.T) {
	// The first server persists nothing, so orders stay QUEUED until a second server, with the
	// order consumer, runs on the same database and Redis.
	e := start(t, func(c *appConfig) { c.SeckillConsumer = false })
	v := e.warmVoucher(3)
	tokenA, userA := e.user()
	tokenB, userB := e.user()

	// voucherStock needs no login: the stock at once, then each change.
	anon := e.ws(nil, nil)
	anon.subscribe("s", stockSub, map[string]any{"v": itoa(v)})
	if got := anon.nextData("s", "voucherStock"); got != 3.0 {
		t.Fatalf("first voucherStock = %v, want 3", got)
	}
	orderA := e.grab(userA, v)
	if got := anon.nextData("s", "voucherStock"); got != 2.0 {
		t.Fatalf("after a grab: voucherStock = %v, want 2", got)
	}
	orderB := e.grab(userB, v)
	if got := anon.nextData("s", "voucherStock"); got != 1.0 {
		t.Fatalf("after a second grab: voucherStock = %v, want 1", got)
	}

	// orderStatus needs a login.
	anon.subscribe("o", orderSub, map[string]any{"o": strconv.FormatInt(orderA, 10)})
	if err := anon.nextError("o"); code(err) != "UNAUTHENTICATED" {
		t.Fatalf("anonymous orderStatus: %+v, want UNAUTHENTICATED", err)
	}
	// Unknown vouchers and other users' orders are not found.
	anon.subscribe("x", stockSub, map[string]any{"v": "17179869185999"})
	if err := anon.nextError("x"); code(err) != "NOT_FOUND" || err.Message != "no such seckill voucher" {
		t.Fatalf("unknown voucher: %+v, want NOT_FOUND", err)
	}
	b := e.ws(map[string]any{"Authorization": "Bearer " + tokenB}, nil)
	b.subscribe("o", orderSub, map[string]any{"o": strconv.FormatInt(orderA, 10)})
	if err := b.nextError("o"); code(err) != "NOT_FOUND" || err.Message != "no such order" {
		t.Fatalf("another user's order: %+v, want NOT_FOUND", err)
	}

	// The owner, logged in through connection_init, sees QUEUED...
	a := e.ws(map[string]any{"Authorization": "Bearer " + tokenA}, nil)
	a.subscribe("o", orderSub, map[string]any{"o": strconv.FormatInt(orderA, 10)})
	if got := a.nextData("o", "orderStatus"); got != "QUEUED" {
		t.Fatalf("orderStatus = %v, want QUEUED", got)
	}
	// ...and B, logged in through the upgrade request's Authorization header, its own order.
	bh := e.ws(nil, http.Header{"Authorization": {"Bearer " + tokenB}})
	bh.subscribe("o", orderSub, map[string]any{"o": strconv.FormatInt(orderB, 10)})
	if got := bh.nextData("o", "orderStatus"); got != "QUEUED" {
		t.Fatalf("orderStatus over the header's session = %v, want QUEUED", got)
	}
	a.quiet(300 * time.Millisecond)

	// A second server with the consumer persists the orders: CREATED, then complete.
	start(t, func(c *appConfig) { *c = e.app.Config; c.SeckillConsumer = true })
	if got := a.nextData("o", "orderStatus"); got != "CREATED" {
		t.Fatalf("orderStatus = %v, want CREATED", got)
	}
	a.complete("o")
	if got := bh.nextData("o", "orderStatus"); got != "CREATED" {
		t.Fatalf("B's orderStatus = %v, want CREATED", got)
	}
	bh.complete("o")
	// Settled orders: the status at once, then complete.
	a.subscribe("again", orderSub, map[string]any{"o": strconv.FormatInt(orderA, 10)})
	if got := a.nextData("again", "orderStatus"); got != "CREATED" {
		t.Fatalf("settled orderStatus = %v", got)
	}
	a.complete("again")

	// Stopping a subscription (client "complete") stops the stream and, being the last, the topic.
	anon.stop("s")
	waitFor(t, "the hub to drop its topics", func() bool {
		st := e.app.Live.Stats()
		return st.StockTopics == 0 && st.StockSubscribers == 0 && st.OrderTopics == 0 && st.OrderSubscribers == 0
	})
}

func TestSubscriptionSessionAndLimits(t *testing.T) {
	e := start(t, func(c *appConfig) { c.SeckillConsumer = false })
	v := e.warmVoucher(5)
	token, user := e.user()
	order := e.grab(user, v)
	c := e.ws(map[string]any{"Authorization": "Bearer " + token}, nil)
	c.subscribe("1", orderSub, map[string]any{"o": strconv.FormatInt(order, 10)})
	if got := c.nextData("1", "orderStatus"); got != "QUEUED" {
		t.Fatalf("orderStatus = %v", got)
	}
	c.stop("1")

	// Each operation re-checks the connection's session: after a logout it is gone.
	e.ok(token, `mutation { logout }`, nil)
	c.subscribe("2", orderSub, map[string]any{"o": strconv.FormatInt(order, 10)})
	if err := c.nextError("2"); code(err) != "UNAUTHENTICATED" {
		t.Fatalf("after logout: %+v, want UNAUTHENTICATED", err)
	}
	// An unknown token in connection_init makes the connection anonymous, as over HTTP.
	bad := e.ws(map[string]any{"Authorization": "Bearer nope"}, nil)
	bad.subscribe("1", orderSub, map[string]any{"o": strconv.FormatInt(order, 10)})
	if err := bad.nextError("1"); code(err) != "UNAUTHENTICATED" {
		t.Fatalf("unknown token: %+v, want UNAUTHENTICATED", err)
	}

	// The query limits apply to operations over the WebSocket too.
	deep := `{ shops(first: 1) { edges { node { vouchers { shop { vouchers { shop { vouchers { shop { vouchers { id } } } } } } } } } } }`
	bad.subscribe("deep", deep, nil)
	if err := bad.nextError("deep"); code(err) != "DEPTH_LIMIT_EXCEEDED" {
		t.Fatalf("deep query over the WebSocket: %+v", err)
	}
	complex := `{ shops(first: 100) { edges { node { id name area address vouchers { id title subtitle rules } } } } }`
	bad.subscribe("complex", complex, nil)
	if err := bad.nextError("complex"); code(err) != "COMPLEXITY_LIMIT_EXCEEDED" {
		t.Fatalf("complex query over the WebSocket: %+v", err)
	}
	bad.subscribe("bad", `subscription { voucherStock }`, nil)
	if err := bad.nextError("bad"); code(err) != "GRAPHQL_VALIDATION_FAILED" {
		t.Fatalf("invalid subscription: %+v", err)
	}

	// Over plain HTTP a subscription is refused.
	r := e.wantCode("SUBSCRIPTION_NEEDS_WEBSOCKET", "", stockSub, map[string]any{"v": itoa(v)})
	if r.Status != http.StatusBadRequest {
		t.Fatalf("subscription over POST: %d %s", r.Status, r.Raw)
	}

	// Browsers on other origins are refused; the page's own origin is fine.
	if _, resp, err := e.dialWS(http.Header{"Origin": {"http://evil.example"}}); err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-origin WebSocket: err %v, response %v; want 403", err, resp)
	}
	e.ws(nil, http.Header{"Origin": {e.url}})
}

func TestStockSubscriptionThrottled(t *testing.T) {
	e := start(t)
	const n = 8
	v := e.warmVoucher(n)
	c := e.ws(nil, nil)
	c.subscribe("s", stockSub, map[string]any{"v": itoa(v)})
	if got := c.nextData("s", "voucherStock"); got != float64(n) {
		t.Fatalf("first voucherStock = %v", got)
	}
	users := make([]int, n)
	for i := range users {
		_, users[i] = e.user()
	}
	for _, u := range users {
		e.grab(u, v)
		time.Sleep(30 * time.Millisecond)
	}
	// n changes, messages at least 200 ms apart (the default throttle), the last one 0.
	var got []float64
	var at []time.Time
	for len(got) == 0 || got[len(got)-1] != 0 {
		v, when := c.nextDataAt("s", "voucherStock")
		got, at = append(got, v.(float64)), append(at, when)
	}
	for i := 1; i < len(at); i++ {
		if gap := at[i].Sub(at[i-1]); gap < 180*time.Millisecond {
			t.Errorf("messages %v: %d and %d only %v apart", got, i-1, i, gap)
		}
	}
	t.Logf("%d changes arrived as %v", n, got)
}

// TestSubscriptionsLeaveNothingBehind drops connections in every way a client can and checks
// that the hub's topics and the subscriptions' goroutines are gone.
func TestSubscriptionsLeaveNothingBehind(t *testing.T) {
	e := start(t, func(c *appConfig) { c.SeckillConsumer = false })
	v := e.warmVoucher(5)
	token, user := e.user()
	order := e.grab(user, v)
	var clients []*wsClient
	for range 6 {
		c := e.ws(map[string]any{"Authorization": "Bearer " + token}, nil)
		c.subscribe("s", stockSub, map[string]any{"v": itoa(v)})
		c.nextData("s", "voucherStock")
		c.subscribe("o", orderSub, map[string]any{"o": strconv.FormatInt(order, 10)})
		c.nextData("o", "orderStatus")
		clients = append(clients, c)
	}
	st := e.app.Live.Stats()
	if st.StockTopics != 1 || st.StockSubscribers != 6 || st.OrderTopics != 1 || st.OrderSubscribers != 6 {
		t.Fatalf("stats %+v: want one topic per voucher and per order for 6 subscribers each", st)
	}
	if n := goroutines("internal/live.(*feed"); n != 0 {
		t.Fatalf("%d goroutines of package live, want none: the Hub sends into the subscribers' channels", n)
	}
	// An idle subscription holds no goroutine (the Hub wakes the transport when it has a
	// value); each connection holds one, its reader.
	waitFor(t, "the subscriptions' goroutines to end once their first values went out", func() bool {
		return goroutines("gqlws.(*operation)") == 0
	})
	if n := goroutines("gqlws.(*conn).serve"); n != 6 {
		t.Fatalf("%d connection readers, want 6", n)
	}
	// Abrupt disconnects, normal closes, and "complete" for each operation (those two
	// connections stay open: their readers remain).
	for i, c := range clients {
		switch i % 3 {
		case 0:
			_ = c.conn.CloseNow()
		case 1:
			_ = c.conn.Close(websocket.StatusNormalClosure, "bye")
		case 2:
			c.stop("s")
			c.stop("o")
		}
	}
	waitFor(t, "every subscription to end", func() bool {
		st := e.app.Live.Stats()
		return st.StockTopics == 0 && st.StockSubscribers == 0 && st.OrderTopics == 0 && st.OrderSubscribers == 0 &&
			goroutines("gqlws.(*operation)") == 0 && goroutines("gqlws.(*conn).serve") == 2 && goroutines("graph.(*subscriptionResolver)") == 0
	})
}

// TestIdleSubscriptionGoroutines: an idle subscription costs the server no goroutine and an
// idle connection one, its reader (gqlws: the upgrade's handler has returned, one goroutine
// pings all connections, and a subscription's goroutine runs only while the Hub has a value
// for it), so a buyer's connection with orderStatus and voucherStock costs 1. gqlgen's
// transport cost 4: net/http's serve goroutine, a close-on-cancel goroutine, and one per
// subscription waiting on its channel.
func TestIdleSubscriptionGoroutines(t *testing.T) {
	e := start(t, func(c *appConfig) { c.SeckillConsumer = false; c.WSMaxConnectionsPerIP = 100 })
	v := e.warmVoucher(100)
	const conns = 40
	type buyer struct {
		token string
		order int64
	}
	buyers := make([]buyer, conns)
	for i := range buyers {
		token, user := e.user()
		buyers[i] = buyer{token, e.grab(user, v)}
	}
	// The keeper goroutine starts with the first connection: open one before counting.
	first := e.ws(map[string]any{"Authorization": "Bearer " + buyers[0].token}, nil)
	first.subscribe("s", stockSub, map[string]any{"v": itoa(v)})
	first.nextData("s", "voucherStock")
	time.Sleep(50 * time.Millisecond)
	before := serverGoroutines()
	for _, b := range buyers[1:] {
		c := e.ws(map[string]any{"Authorization": "Bearer " + b.token}, nil)
		c.subscribe("s", stockSub, map[string]any{"v": itoa(v)})
		c.nextData("s", "voucherStock")
		c.subscribe("o", orderSub, map[string]any{"o": strconv.FormatInt(b.order, 10)})
		c.nextData("o", "orderStatus")
	}
	subs := 2 * (conns - 1)
	deadline := time.Now().Add(5 * time.Second)
	for serverGoroutines()-before > conns-1 {
		if time.Now().After(deadline) {
			buf := make([]byte, 4<<20)
			t.Fatalf("%d goroutines more for %d subscriptions on %d connections, want at most 1 per connection:\n%s", serverGoroutines()-before, subs, conns-1, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("%d subscriptions on %d connections: %d goroutines more", subs, conns-1, serverGoroutines()-before)
}

// serverGoroutines counts the goroutines but the test clients' readers.
func serverGoroutines() int {
	return runtime.NumGoroutine() - goroutines("(*wsClient).read")
}

// goroutines counts the goroutines with a frame containing s.
func goroutines(s string) int { return testenv.CountGoroutines(s) }

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestVanishedOrderEndsWithError: an order that disappears while watched (what superseding
// does to an admission after a Redis loss) ends its stream with an "error" message.
func TestVanishedOrderEndsWithError(t *testing.T) {
	e := start(t, func(c *appConfig) { c.SeckillConsumer = false })
	v := e.warmVoucher(5)
	token, user := e.user()
	order := e.grab(user, v)
	c := e.ws(map[string]any{"Authorization": "Bearer " + token}, nil)
	c.subscribe("o", orderSub, map[string]any{"o": strconv.FormatInt(order, 10)})
	if got := c.nextData("o", "orderStatus"); got != "QUEUED" {
		t.Fatalf("orderStatus = %v", got)
	}
	k := seckill.KeysOf(e.app.Config.SeckillKeyPrefix(), v)
	if err := e.app.Redis.HDel(context.Background(), k.Buyers, itoa(user)).Err(); err != nil {
		t.Fatal(err)
	}
	m := c.next("o")
	var errs []gqlError
	if err := json.Unmarshal(m.Payload, &errs); m.Type != "error" || err != nil || len(errs) != 1 {
		t.Fatalf("got %s %s, want one error", m.Type, m.Payload)
	}
	if code(errs[0]) != "NOT_FOUND" || errs[0].Message != "no such order" || fmt.Sprint(errs[0].Path) != "[orderStatus]" {
		t.Fatalf("error %+v", errs[0])
	}
}

// TestIdleSubscriptionMemory: what an idle subscription keeps on the server, heap and
// goroutine stacks after a GC, is at most 20 KB (issue 16), measured over 300 buyers' connections
// with voucherStock and orderStatus each. The clients are raw TCP connections that spoke the
// protocol by hand and keep nothing but their socket, so the figure is the server's (and
// conservative: it includes the clients' sockets).
func TestIdleSubscriptionMemory(t *testing.T) {
	const conns, maxKB = 300, 20.0
	e := start(t, func(c *appConfig) { c.SeckillConsumer = false; c.WSMaxConnectionsPerIP = conns + 10 })
	v := e.warmVoucher(conns + 1)
	type buyer struct {
		token string
		order int64
	}
	buyers := make([]buyer, conns+1)
	for i := range buyers {
		token, user := e.user()
		buyers[i] = buyer{token, e.grab(user, v)}
	}
	subscribe := func(b buyer) net.Conn {
		c := dialRawWS(t, e.url+"/query", "graphql-transport-ws")
		c.send(`{"type":"connection_init","payload":{"Authorization":"Bearer ` + b.token + `"}}`)
		c.expect(`{"type":"connection_ack"}`)
		c.send(`{"id":"s","type":"subscribe","payload":{"query":"subscription($v: ID!) { voucherStock(voucherId: $v) }","variables":{"v":"` + itoa(v) + `"}}}`)
		c.send(`{"id":"o","type":"subscribe","payload":{"query":"subscription($o: ID!) { orderStatus(orderId: $o) }","variables":{"o":"` + strconv.FormatInt(b.order, 10) + `"}}}`)
		c.expectNext()
		c.expectNext()
		return c.conn // the client keeps its socket only
	}
	// The first buyer warms what every subscription shares (the voucher's topic, the keeper).
	held := []net.Conn{subscribe(buyers[0])}
	settle := func() (heap, stacks uint64) {
		waitFor(t, "the subscriptions' goroutines to end", func() bool { return goroutines("gqlws.(*operation)") == 0 })
		var m runtime.MemStats
		for range 3 { // a GC shrinks stacks by half at most
			runtime.GC()
		}
		runtime.ReadMemStats(&m)
		return m.HeapAlloc, m.StackInuse
	}
	heap0, stacks0 := settle()
	for _, b := range buyers[1:] {
		held = append(held, subscribe(b))
	}
	heap1, stacks1 := settle()
	subs := float64(2 * conns)
	heapKB, stackKB := float64(int64(heap1-heap0))/subs/1024, float64(int64(stacks1-stacks0))/subs/1024
	t.Logf("per idle subscription: %.1f KB heap + %.1f KB stacks = %.1f KB (%d connections, 2 subscriptions each)", heapKB, stackKB, heapKB+stackKB, conns)
	if heapKB+stackKB > maxKB {
		t.Errorf("an idle subscription keeps %.1f KB on the server, want at most %.0f KB", heapKB+stackKB, maxKB)
	}
	for _, c := range held {
		_ = c.Close()
	}
}

// rawWS is a WebSocket client written by hand (RFC 6455), so that what it keeps is its socket.
type rawWS struct {
	t    *testing.T
	conn net.Conn
	br   *bufio.Reader
}

func dialRawWS(t *testing.T, url, subprotocol string) *rawWS {
	t.Helper()
	u := strings.TrimPrefix(url, "http://")
	host, path, _ := strings.Cut(u, "/")
	conn, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, testenv.UpgradeRequest(host, "/"+path, subprotocol)); err != nil {
		t.Fatal(err)
	}
	c := &rawWS{t: t, conn: conn, br: bufio.NewReaderSize(conn, 512)}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return c
}

// send writes one text frame.
func (c *rawWS) send(text string) {
	c.t.Helper()
	if _, err := c.conn.Write(testenv.ClientFrame([]byte(text))); err != nil {
		c.t.Fatal(err)
	}
}

// read returns the next frame's payload.
func (c *rawWS) read() string {
	c.t.Helper()
	_, p, err := testenv.ReadServerFrame(c.br)
	if err != nil {
		c.t.Fatal(err)
	}
	return string(p)
}

func (c *rawWS) expect(want string) {
	c.t.Helper()
	if got := c.read(); got != want {
		c.t.Fatalf("got %s, want %s", got, want)
	}
}

// expectNext reads a "next" message without errors.
func (c *rawWS) expectNext() {
	c.t.Helper()
	if got := c.read(); !strings.Contains(got, `"type":"next"`) || strings.Contains(got, `"errors"`) {
		c.t.Fatalf("got %s, want a next message without errors", got)
	}
}

// TestWebsocketWithFrozenRedis: with Redis frozen (SIGSTOP), a WebSocket whose session
// cannot be read is not left hanging: an operation on an open connection gets an error at
// the request deadline, and a new connection_init is refused (closed with 1013, try again
// later) rather than waiting on Redis; once Redis answers again, connections work.
func TestWebsocketWithFrozenRedis(t *testing.T) {
	redisSrv := testenv.StartRedis(t)
	e := start(t, func(c *app.Config) {
		c.RedisAddrs, c.SessionCache, c.RequestTimeout = []string{redisSrv.Addr}, 0, time.Second
	})
	token := e.login(testenv.Phone())
	open := e.ws(map[string]any{"Authorization": "Bearer " + token}, nil)
	redisSrv.Freeze()
	defer redisSrv.Thaw()

	start := time.Now()
	open.subscribe("me", `{ me { id } }`, nil)
	err := open.nextError("me")
	t.Logf("operation with Redis frozen: %s after %v", code(err), time.Since(start).Round(time.Millisecond))
	if c := code(err); c != "UNAVAILABLE" && c != "TIMEOUT" {
		t.Fatalf("operation with Redis frozen: %+v, want UNAVAILABLE or TIMEOUT", err)
	}

	start = time.Now()
	open.subscribe("sub", `subscription { voucherStock(voucherId: "1") }`, nil)
	err = open.nextError("sub")
	t.Logf("subscription with Redis frozen: %s after %v", code(err), time.Since(start).Round(time.Millisecond))
	if c := code(err); c != "UNAVAILABLE" || time.Since(start) > 3*time.Second {
		t.Fatalf("subscription with Redis frozen: %+v after %v, want UNAVAILABLE within the request deadline", err, time.Since(start))
	}
	anonymous := e.ws(nil, nil)
	start = time.Now()
	anonymous.subscribe("sub", `subscription { voucherStock(voucherId: "1") }`, nil)
	err = anonymous.nextError("sub")
	t.Logf("anonymous subscription with Redis frozen: %s after %v", code(err), time.Since(start).Round(time.Millisecond))
	if c := code(err); (c != "UNAVAILABLE" && c != "TIMEOUT") || time.Since(start) > 3*time.Second {
		t.Fatalf("anonymous subscription with Redis frozen: %+v after %v, want UNAVAILABLE or TIMEOUT within the request deadline", err, time.Since(start))
	}

	start = time.Now()
	c, _, dialErr := e.dialWS(nil)
	if dialErr != nil {
		t.Fatal(dialErr)
	}
	c.send(map[string]any{"type": "connection_init", "payload": map[string]any{"Authorization": "Bearer " + token}})
	for m := range c.msgs {
		t.Fatalf("connection_init with Redis frozen answered %+v, want the connection closed", m)
	}
	took := time.Since(start)
	if s := websocket.CloseStatus(c.err); s != 1013 || took > 3*time.Second { // 8 s before the lookup had the deadline
		t.Fatalf("connection_init with Redis frozen: closed %v (%v) after %v, want 1013 within the request deadline", s, c.err, took)
	}
	t.Logf("connection_init with Redis frozen: closed %d after %v", websocket.CloseStatus(c.err), took.Round(time.Millisecond))

	redisSrv.Thaw()
	e.ws(map[string]any{"Authorization": "Bearer " + token}, nil)
}
