// Package live turns the seckill service's state into streams of changes for GraphQL
// subscriptions: a voucher's remaining stock and the status of a user's order.
//
// A [Hub] listens, it does not poll per subscriber. The seckill service announces changes on
// one Redis pub/sub channel per deployment (seckill.Event: an order CREATED, FAILED or moved
// under another id, a voucher's stock changed); each Hub holds one subscription to it and fans
// the events out to its local subscribers by key (order, voucher). A final order status
// carried by an event goes straight to the order's subscribers; a stock event marks the
// voucher, and one worker reads each marked voucher's stock at most once per
// [Options.StockInterval], whatever the number of its subscribers.
//
// Pub/sub is at-most-once, so the Hub also catches up: after (re)subscribing to the channel
// and after a gap in a publisher's sequence numbers, and every [Options.SweepInterval] as a
// safety net, it reads the state of everything watched with one batched read per voucher
// (seckill.Service.OrderStates for the orders, one stock read per voucher), never one per
// subscriber. While nothing changes, subscribers cost no Redis command and no SQL query.
//
// A subscription gets the current value at once (read in the subscribing goroutine the first
// time a key is watched, so that an unknown key is an error of the subscription call itself),
// then each change, through a one-value channel that always holds the latest value: a slow
// subscriber never holds up the others, it skips intermediate values and still gets the
// latest. The Hub runs no goroutine per subscriber: it writes into the channels, and tells
// the subscription's [Listener], if its context carries one (WithListener), of each value and
// of the close, so that the reader (the WebSocket transport, internal/gqlws) need not keep a
// goroutine waiting on the channel either; without one, the subscriber's own goroutine reads
// it (gqlgen's model). Stock messages are
// throttled per voucher (at most one per [Options.StockThrottle], on a timer; the value sent
// after a pause is the latest; a new subscriber gets the current value at once). An order's
// stream ends after its first status other than QUEUED.
package live

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/ent"
	"github.com/surgekit/surge/ent/seckillorder"
	"github.com/surgekit/surge/ent/voucher"
	"github.com/surgekit/surge/internal/wait"
	"github.com/surgekit/surge/seckill"
)

var (
	// ErrNotFound means the key has no value and never will: the id is not a seckill voucher,
	// or the user has no such order. A stream that started and then loses its key (an order
	// superseded after a Redis loss, a deleted voucher) ends with it too (see Options.OnError).
	ErrNotFound = errors.New("live: not found")
	// ErrClosed is returned by subscriptions after Close.
	ErrClosed = errors.New("live: hub closed")
)

// errPending is a read that has no value yet (the voucher's sale state is not in Redis:
// never warmed, or being rebuilt).
var errPending = errors.New("live: no value yet")

// Options configures a Hub. Zero values take the defaults noted.
type Options struct {
	// StockInterval is the least time between two stock reads of one voucher while its stock
	// changes (100 ms): a burst of grabs costs one read per voucher and interval.
	StockInterval time.Duration
	// StockThrottle is the least time between two stock messages of one voucher (200 ms);
	// negative: no throttling. A subscriber's first message, the current stock, is not held.
	StockThrottle time.Duration
	// SweepInterval is how often everything watched is read again, in case an event was lost
	// without a visible gap (5 s): one batched read per voucher.
	SweepInterval time.Duration
	Logger        *slog.Logger
	Registerer    prometheus.Registerer // metrics (none if nil)
	// OnError, if set, is called with a subscriber's context when its stream ends because of
	// an error (ErrNotFound) rather than because the context ended or the last value was
	// delivered, just before the subscriber's channel is closed. The GraphQL layer uses it to
	// send an error message instead of a bare "complete".
	OnError func(ctx context.Context, err error)
}

func (o *Options) setDefaults() {
	if o.StockInterval <= 0 {
		o.StockInterval = 100 * time.Millisecond
	}
	if o.StockThrottle == 0 {
		o.StockThrottle = 200 * time.Millisecond
	}
	if o.SweepInterval <= 0 {
		o.SweepInterval = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Hub serves live streams from one subscription to the seckill change events. It is safe for
// concurrent use.
type Hub struct {
	svc    *seckill.Service
	db     *ent.Client
	opts   Options
	log    *slog.Logger
	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // listen and work

	stock  *feed[int, int]
	orders *feed[orderKey, seckillorder.Status]

	mu         sync.Mutex
	dirty      map[int]struct{}      // vouchers whose stock changed
	reread     map[orderKey]struct{} // orders to read again (moved under another id)
	catchUp    bool                  // read everything watched: a gap
	publishers map[string]publisher  // last sequence number per publisher
	wake       chan struct{}
	events     *redis.PubSub // closed by Close: Receive does not return at ctx's end

	m counters
}

type publisher struct {
	seq  uint64
	seen time.Time
}

type orderKey struct {
	user  int
	order int64
}

// New returns a Hub reading from the seckill service and, to tell a voucher whose sale state
// is not in Redis yet from no voucher at all, from the database. It subscribes to the change
// events at once; Close ends it.
func New(svc *seckill.Service, db *ent.Client, opts Options) *Hub {
	opts.setDefaults()
	h := &Hub{
		svc: svc, db: db, opts: opts, log: opts.Logger.With("component", "live"),
		dirty: map[int]struct{}{}, reread: map[orderKey]struct{}{}, publishers: map[string]publisher{},
		wake: make(chan struct{}, 1),
	}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	h.stock = &feed[int, int]{
		hub: h, name: "voucher_stock", throttle: max(opts.StockThrottle, 0),
		read: h.readStock, pending: h.checkVoucher, topics: map[int]*topic[int]{},
	}
	h.orders = &feed[orderKey, seckillorder.Status]{
		hub: h, name: "order_status", read: h.readOrder, topics: map[orderKey]*topic[seckillorder.Status]{},
	}
	if opts.Registerer != nil {
		newMetrics(opts.Registerer, h)
	}
	h.events = svc.SubscribeEvents(h.ctx)
	h.wg.Add(2)
	go h.listen()
	go h.work()
	return h
}

// Stock subscribes to a voucher's remaining stock (seckill.Service.Stock). The channel gets
// the current stock at once (or as soon as Redis holds the voucher's sale state), then each
// change, at most one value per Options.StockThrottle. It is closed when ctx ends, after
// Close, or (after OnError) if the voucher disappears. ErrNotFound if voucherID is not a
// seckill voucher.
func (h *Hub) Stock(ctx context.Context, voucherID int) (<-chan int, error) {
	ch, err := h.stock.subscribe(ctx, voucherID)
	attached(ctx, err)
	return ch, err
}

// OrderStatus subscribes to the status of one of a user's orders (seckill.Service.Order). The
// channel gets the current status at once, then each change; it is closed after the first
// status other than QUEUED, when ctx ends, after Close, or (after OnError) if the order
// disappears. ErrNotFound if the user has no such order.
func (h *Hub) OrderStatus(ctx context.Context, userID int, orderID int64) (<-chan seckillorder.Status, error) {
	ch, err := h.orders.subscribe(ctx, orderKey{user: userID, order: orderID})
	attached(ctx, err)
	return ch, err
}

// Listener hears, for one subscription, when its channel has something to read: a
// transport that sets one (WithListener, on the context of the subscription call) need not
// keep a goroutine blocked on the channel. The methods are called with the Hub's locks held
// and must not block.
type Listener interface {
	// Attached says the subscription call succeeded: each Ready, those before Attached
	// included, stands for one value put into the channel or for its close.
	Attached()
	// Ready says one more value is in the channel (a value that replaces one not yet read
	// is no more), or that the channel was closed.
	Ready()
}

type listenerKey struct{}

// WithListener returns ctx with a Listener for the subscription called with it.
func WithListener(ctx context.Context, l Listener) context.Context {
	return context.WithValue(ctx, listenerKey{}, l)
}

// attached tells the subscription's Listener, if any, that the call succeeded.
func attached(ctx context.Context, err error) {
	if l, ok := ctx.Value(listenerKey{}).(Listener); ok && err == nil {
		l.Attached()
	}
}

// Close ends every stream (their channels are closed, without error) and waits for the
// Hub's goroutines. Later subscriptions fail with ErrClosed.
func (h *Hub) Close() {
	h.stock.mu.Lock()
	h.orders.mu.Lock()
	h.cancel()
	h.orders.mu.Unlock()
	h.stock.mu.Unlock()
	_ = h.events.Close()
	h.stock.endAll()
	h.orders.endAll()
	h.wg.Wait()
}

// Stats counts what a Hub serves at one moment, and what it did so far.
type Stats struct {
	StockTopics, StockSubscribers int // voucher stock: vouchers watched, subscribers
	OrderTopics, OrderSubscribers int // order status: orders watched, subscribers
	StockReads, OrderReads        int64
	Events, Gaps, Sweeps, Drops   int64
}

// Stats returns the current topics and subscribers and the counters.
func (h *Hub) Stats() Stats {
	var s Stats
	s.StockTopics, s.StockSubscribers = h.stock.stats()
	s.OrderTopics, s.OrderSubscribers = h.orders.stats()
	s.StockReads, s.OrderReads = h.stock.reads.Load(), h.orders.reads.Load()
	s.Events, s.Gaps, s.Sweeps = h.m.events.Load(), h.m.gaps.Load(), h.m.sweeps.Load()
	s.Drops = h.stock.drops.Load() + h.orders.drops.Load()
	return s
}

func (h *Hub) signal() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// gap asks the worker to read everything watched again.
func (h *Hub) gap() {
	h.m.gaps.Add(1)
	h.mu.Lock()
	h.catchUp = true
	h.mu.Unlock()
	h.signal()
}

// listen holds the Hub's one subscription to the change events until Close. The client
// reconnects by itself; each (re)subscription confirmation is a possible gap.
func (h *Hub) listen() {
	defer h.wg.Done()
	ps := h.events
	var failing time.Time
	for {
		msg, err := ps.Receive(h.ctx)
		if h.ctx.Err() != nil {
			return
		}
		if err != nil {
			if failing.IsZero() {
				failing = time.Now()
				h.log.Warn("live events: subscription failing", "err", err)
			}
			wait.Sleep(h.ctx, 100*time.Millisecond)
			continue
		}
		if !failing.IsZero() {
			h.log.Info("live events: subscription back", "failed_for", time.Since(failing))
			failing = time.Time{}
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				h.gap() // first subscription or a reconnection: events may have been missed
			}
		case *redis.Message:
			h.handle(m.Payload)
		}
	}
}

// handle fans one message's events out.
func (h *Hub) handle(payload string) {
	b, err := seckill.ParseBatch(payload)
	if err != nil {
		h.log.Warn("live events: unreadable message", "err", err)
		h.gap()
		return
	}
	h.m.events.Add(int64(len(b.Events)))
	h.mu.Lock()
	p, known := h.publishers[b.Publisher]
	h.publishers[b.Publisher] = publisher{seq: b.Seq, seen: time.Now()}
	h.mu.Unlock()
	if (known && b.Seq != p.seq+1) || (!known && b.Seq != 1) {
		h.gap() // missed messages of that publisher (or of its start)
	}
	marked := false
	for _, ev := range b.Events {
		if ev.Order == 0 {
			if h.stock.has(ev.Voucher) {
				h.mu.Lock()
				h.dirty[ev.Voucher] = struct{}{}
				h.mu.Unlock()
				marked = true
			}
			continue
		}
		k := orderKey{user: ev.User, order: ev.Order}
		switch st := seckillorder.Status(ev.Status); st {
		case "", seckillorder.StatusQUEUED:
			if st == "" && h.orders.has(k) {
				h.mu.Lock()
				h.reread[k] = struct{}{}
				h.mu.Unlock()
				marked = true
			}
		default:
			h.orders.set(k, st, true)
		}
	}
	if marked {
		h.signal()
	}
}

// work reads what the events and gaps ask for, and sweeps: marked vouchers' stock at most
// once per StockInterval, orders to read again, and on a gap or sweep everything watched.
func (h *Hub) work() {
	defer h.wg.Done()
	tick := time.NewTicker(h.opts.StockInterval)
	defer tick.Stop()
	lastSweep := time.Now()
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-h.wake:
		case <-tick.C:
		}
		h.mu.Lock()
		all := h.catchUp || time.Since(lastSweep) >= h.opts.SweepInterval
		h.catchUp = false
		dirty, reread := h.dirty, h.reread
		h.dirty, h.reread = map[int]struct{}{}, map[orderKey]struct{}{}
		h.mu.Unlock()
		if all {
			lastSweep = time.Now()
			h.m.sweeps.Add(1)
			h.prune()
			h.sweepOrders()
			for _, keys := range h.stock.watched() {
				for _, v := range keys {
					dirty[v] = struct{}{}
				}
			}
		}
		for k := range reread {
			h.refreshOrder(k)
		}
		for v := range dirty {
			h.refreshStock(v)
		}
		if len(dirty) > 0 {
			// Throttle stock reads: at most one round per StockInterval.
			wait.Sleep(h.ctx, h.opts.StockInterval)
		}
	}
}

// prune forgets publishers not heard from for a while (restarted processes).
func (h *Hub) prune() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, p := range h.publishers {
		if time.Since(p.seen) > 10*time.Minute {
			delete(h.publishers, id)
		}
	}
}

// readTimeout bounds one catch-up or sweep read.
const readTimeout = 10 * time.Second

// sweepOrders reads every watched order, one batched read per voucher.
func (h *Hub) sweepOrders() {
	for v, keys := range h.orders.watched() {
		refs := make([]seckill.OrderRef, len(keys))
		for i, k := range keys {
			refs[i] = seckill.OrderRef{Order: k.order, User: k.user}
		}
		ctx, cancel := context.WithTimeout(h.ctx, readTimeout)
		states, err := h.svc.OrderStates(ctx, v, refs)
		cancel()
		h.orders.reads.Add(1)
		if err != nil {
			if h.ctx.Err() == nil {
				h.log.Warn("live: reading watched orders", "voucher", v, "err", err)
				h.mu.Lock()
				h.catchUp = true // try again at the next round
				h.mu.Unlock()
			}
			continue
		}
		for _, k := range keys {
			st, ok := states[k.order]
			switch {
			case !ok:
				h.refreshOrder(k) // stands under another id, or nowhere: read it alone
			case st == seckillorder.StatusQUEUED:
				h.orders.set(k, st, false)
			default:
				h.orders.set(k, st, true)
			}
		}
	}
}

func (h *Hub) refreshOrder(k orderKey) {
	if !h.orders.has(k) {
		return
	}
	ctx, cancel := context.WithTimeout(h.ctx, readTimeout)
	defer cancel()
	st, final, _, err := h.readOrder(ctx, k)
	h.orders.reads.Add(1)
	switch {
	case errors.Is(err, ErrNotFound):
		h.orders.end(k, ErrNotFound)
	case err != nil:
		if h.ctx.Err() == nil {
			h.log.Warn("live: reading an order", "order", k.order, "err", err)
		}
	default:
		h.orders.set(k, st, final)
	}
}

func (h *Hub) refreshStock(v int) {
	if !h.stock.has(v) {
		return
	}
	ctx, cancel := context.WithTimeout(h.ctx, readTimeout)
	defer cancel()
	n, _, _, err := h.readStock(ctx, v)
	h.stock.reads.Add(1)
	switch {
	case errors.Is(err, errPending):
	case errors.Is(err, ErrNotFound):
		h.stock.end(v, ErrNotFound)
	case err != nil:
		if h.ctx.Err() == nil {
			h.log.Warn("live: reading a stock", "voucher", v, "err", err)
		}
	default:
		h.stock.set(v, n, false)
	}
}

func (h *Hub) readStock(ctx context.Context, voucherID int) (int, bool, int, error) {
	n, err := h.svc.Stock(ctx, voucherID)
	switch {
	case errors.Is(err, seckill.ErrNoSuchVoucher):
		return 0, false, voucherID, ErrNotFound
	case errors.Is(err, seckill.ErrNotReady):
		return 0, false, voucherID, errPending
	}
	return n, false, voucherID, err
}

// checkVoucher tells whether a voucher whose stock Redis does not hold can ever have one.
func (h *Hub) checkVoucher(ctx context.Context, voucherID int) error {
	ok, err := h.db.Voucher.Query().Where(voucher.ID(voucherID), voucher.KindEQ(voucher.KindSECKILL)).Exist(ctx)
	if err == nil && !ok {
		return ErrNotFound
	}
	return err
}

func (h *Hub) readOrder(ctx context.Context, k orderKey) (seckillorder.Status, bool, int, error) {
	o, err := h.svc.Order(ctx, k.user, k.order)
	if errors.Is(err, seckill.ErrOrderLost) {
		return seckillorder.StatusLOST, true, 0, nil
	}
	if err != nil {
		return "", false, 0, err
	}
	if o == nil {
		return "", false, 0, ErrNotFound
	}
	return o.Status, o.Status != seckillorder.StatusQUEUED, o.VoucherID, nil
}
