// Package live turns the seckill service's state into streams of changes for GraphQL
// subscriptions: a voucher's remaining stock and the status of a user's order.
//
// A [Hub] polls, it does not listen: Redis holds the stock (a plain counter the admission
// script decrements) and the database the orders, and neither announces changes. Polling is
// shared: all subscribers of one voucher (or of one user's order) in this process share ONE
// poller goroutine, started by the first subscriber and stopped when the last one leaves.
// Each poll result that differs from the previous one is offered to every subscriber of the
// key through a one-value slot that always holds the latest value: a slow subscriber never
// holds up the poller or the others, it skips intermediate values and still gets the latest.
//
// A subscription gets the current value at once (from the key's poller if it has one, else
// from a poll in the subscribing goroutine, so that an unknown key is an error of the
// subscription call itself), then each change. Stock messages are throttled per subscriber
// (at most one per [Options.StockThrottle]; the value sent after a pause is the latest). An
// order's stream ends after its first status other than QUEUED.
package live

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/surgekit/surge/ent"
	"github.com/surgekit/surge/ent/seckillorder"
	"github.com/surgekit/surge/ent/voucher"
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

// errPending is a poll that has no value yet (the voucher's sale state is not in Redis:
// never warmed, or being rebuilt). The tick is skipped; the stream goes on.
var errPending = errors.New("live: no value yet")

// Options configures a Hub. Zero values take the defaults noted.
type Options struct {
	StockInterval time.Duration // how often a voucher's stock is polled (100 ms)
	// StockThrottle is the least time between two stock messages to one subscriber (200 ms);
	// negative: no throttling.
	StockThrottle time.Duration
	OrderInterval time.Duration // how often an order's status is polled (100 ms)
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
	if o.OrderInterval <= 0 {
		o.OrderInterval = 100 * time.Millisecond
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Hub serves live streams from one process's pollers. It is safe for concurrent use.
type Hub struct {
	svc    *seckill.Service
	db     *ent.Client
	opts   Options
	log    *slog.Logger
	ctx    context.Context // ends at Close; parent of every poller's context
	cancel context.CancelFunc
	wg     sync.WaitGroup // pollers

	stock  *feed[int, int]
	orders *feed[orderKey, seckillorder.Status]
}

type orderKey struct {
	user  int
	order int64
}

// New returns a Hub reading from the seckill service and, to tell a voucher whose sale state
// is not in Redis yet from no voucher at all, from the database.
func New(svc *seckill.Service, db *ent.Client, opts Options) *Hub {
	opts.setDefaults()
	h := &Hub{svc: svc, db: db, opts: opts, log: opts.Logger.With("component", "live")}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	h.stock = &feed[int, int]{
		hub: h, name: "voucher_stock", interval: opts.StockInterval, throttle: max(opts.StockThrottle, 0),
		poll: h.pollStock, pending: h.checkVoucher, topics: map[int]*topic[int]{},
	}
	h.orders = &feed[orderKey, seckillorder.Status]{
		hub: h, name: "order_status", interval: opts.OrderInterval,
		poll: h.pollOrder, topics: map[orderKey]*topic[seckillorder.Status]{},
	}
	if opts.Registerer != nil {
		newMetrics(opts.Registerer, h.stock, h.orders)
	}
	return h
}

// Stock subscribes to a voucher's remaining stock (seckill.Service.Stock). The channel gets
// the current stock at once (or as soon as Redis holds the voucher's sale state), then each
// change, at most one value per Options.StockThrottle. It is closed when ctx ends, after
// Close, or (after OnError) if the voucher disappears. ErrNotFound if voucherID is not a
// seckill voucher.
func (h *Hub) Stock(ctx context.Context, voucherID int) (<-chan int, error) {
	return h.stock.subscribe(ctx, voucherID)
}

// OrderStatus subscribes to the status of one of a user's orders (seckill.Service.Order). The
// channel gets the current status at once, then each change; it is closed after the first
// status other than QUEUED, when ctx ends, after Close, or (after OnError) if the order
// disappears. ErrNotFound if the user has no such order.
func (h *Hub) OrderStatus(ctx context.Context, userID int, orderID int64) (<-chan seckillorder.Status, error) {
	return h.orders.subscribe(ctx, orderKey{user: userID, order: orderID})
}

// Close ends every stream (their channels are closed, without error) and waits for the
// pollers to stop. Later subscriptions fail with ErrClosed.
func (h *Hub) Close() {
	h.cancel()
	h.stock.endAll()
	h.orders.endAll()
	h.wg.Wait()
}

// Stats counts what a Hub runs at one moment.
type Stats struct {
	StockPollers, StockSubscribers int // voucher stock: pollers (one per voucher), subscribers
	OrderPollers, OrderSubscribers int // order status: pollers (one per user and order), subscribers
	StockPolls, OrderPolls         int64
}

// Stats returns the current number of pollers and subscribers, and the polls made so far.
func (h *Hub) Stats() Stats {
	var s Stats
	s.StockPollers, s.StockSubscribers, s.StockPolls = h.stock.stats()
	s.OrderPollers, s.OrderSubscribers, s.OrderPolls = h.orders.stats()
	return s
}

func (h *Hub) pollStock(ctx context.Context, voucherID int) (int, bool, error) {
	n, err := h.svc.Stock(ctx, voucherID)
	switch {
	case errors.Is(err, seckill.ErrNoSuchVoucher):
		return 0, false, ErrNotFound
	case errors.Is(err, seckill.ErrNotReady):
		return 0, false, errPending
	}
	return n, false, err
}

// checkVoucher tells whether a voucher whose stock Redis does not hold can ever have one.
func (h *Hub) checkVoucher(ctx context.Context, voucherID int) error {
	ok, err := h.db.Voucher.Query().Where(voucher.ID(voucherID), voucher.KindEQ(voucher.KindSECKILL)).Exist(ctx)
	if err == nil && !ok {
		return ErrNotFound
	}
	return err
}

func (h *Hub) pollOrder(ctx context.Context, k orderKey) (seckillorder.Status, bool, error) {
	o, err := h.svc.Order(ctx, k.user, k.order)
	if err != nil {
		return "", false, err
	}
	if o == nil {
		return "", false, ErrNotFound
	}
	return o.Status, o.Status != seckillorder.StatusQUEUED, nil
}
