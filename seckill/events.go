package seckill

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/ent/seckillorder"
	"github.com/surgekit/surge/internal/wait"
)

// Change events: the code paths that change an order (persisted → CREATED, dead-lettered →
// FAILED, re-homed or superseded after a Redis loss) or a voucher's stock announce it on one
// Redis pub/sub channel per deployment (Service.EventChannel), for live subscriptions in every
// server process (channel <namespace>:<prefix>:events, "seckill:events" by default). Pub/sub is at-most-once: readers must treat the events as hints that cut
// latency and still catch up after a gap (see Batch.Seq) and sweep now and then.
//
// Events are published from Go after the change (after the database commit for orders), by
// one goroutine per Service that drains a bounded queue and publishes what it holds in one
// PUBLISH: a grab or a commit only appends to the queue, never waits for Redis, and a full
// queue drops events (counted; the sequence number shows the gap to readers). On a Cluster a
// plain PUBLISH reaches every node's subscribers, whatever the slot.
//
// A payload is lines of text: "<publisher> <seq>" then one event per line, "o <order> <user>
// <voucher> <status>" (status "" when the order must be read again: it now stands under
// another id) or "s <voucher>" (its stock changed; readers read it).

// Event is one change.
type Event struct {
	Order   int64  // 0 for a stock event
	User    int    // the order's user
	Voucher int    // the voucher of the order, or whose stock changed
	Status  string // the order's new status; "" if it has to be read again
}

// Batch is one published message: the events a publisher had queued, with its id and a
// sequence number that grows by one per message (dropped ones included), so a reader that
// sees a jump knows it missed events.
type Batch struct {
	Publisher string
	Seq       uint64
	Events    []Event
}

// ParseBatch reads a message published on Service.EventChannel.
func ParseBatch(payload string) (Batch, error) {
	lines := strings.Split(payload, "\n")
	var b Batch
	head := strings.Fields(lines[0])
	if len(head) != 2 {
		return b, fmt.Errorf("seckill: bad event header %q", lines[0])
	}
	seq, err := strconv.ParseUint(head[1], 10, 64)
	if err != nil {
		return b, fmt.Errorf("seckill: bad event sequence %q", head[1])
	}
	b.Publisher, b.Seq = head[0], seq
	for _, l := range lines[1:] {
		f := strings.Split(l, " ")
		switch {
		case len(f) == 2 && f[0] == "s":
			v, err := strconv.Atoi(f[1])
			if err != nil {
				return b, fmt.Errorf("seckill: bad stock event %q", l)
			}
			b.Events = append(b.Events, Event{Voucher: v})
		case len(f) == 5 && f[0] == "o":
			o, err1 := strconv.ParseInt(f[1], 10, 64)
			u, err2 := strconv.Atoi(f[2])
			v, err3 := strconv.Atoi(f[3])
			if err := errors.Join(err1, err2, err3); err != nil {
				return b, fmt.Errorf("seckill: bad order event %q", l)
			}
			b.Events = append(b.Events, Event{Order: o, User: u, Voucher: v, Status: f[4]})
		default:
			return b, fmt.Errorf("seckill: bad event %q", l)
		}
	}
	return b, nil
}

// eventQueueSize bounds the events waiting for the publisher; past it they are dropped.
const eventQueueSize = 1 << 14

// events publishes change events. A nil *events publishes nothing.
type events struct {
	rdb     redis.UniversalClient
	channel string
	id      string
	log     *slog.Logger

	mu      sync.Mutex
	orders  []Event
	stock   map[int]struct{} // vouchers whose stock changed (one event each per message)
	dropped bool             // events were dropped since the last message
	wake    chan struct{}
	seq     uint64

	drops atomic.Int64
	stop  context.CancelFunc
	done  chan struct{}
}

func newEvents(rdb redis.UniversalClient, channel string, log *slog.Logger) *events {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	e := &events{
		rdb: rdb, channel: channel, id: hex.EncodeToString(b), log: log,
		stock: map[int]struct{}{}, wake: make(chan struct{}, 1), done: make(chan struct{}),
	}
	var ctx context.Context
	ctx, e.stop = context.WithCancel(context.Background())
	go e.run(ctx)
	return e
}

func (e *events) order(orderID int64, userID, voucherID int, status seckillorder.Status) {
	if e == nil {
		return
	}
	voucherID = voucherOf(voucherID) // a stock bucket's reference (buckets.go)
	e.mu.Lock()
	if len(e.orders) >= eventQueueSize {
		e.dropped = true
		e.drops.Add(1)
	} else {
		e.orders = append(e.orders, Event{Order: orderID, User: userID, Voucher: voucherID, Status: string(status)})
	}
	e.mu.Unlock()
	e.signal()
}

func (e *events) stockChanged(voucherID int) {
	if e == nil {
		return
	}
	voucherID = voucherOf(voucherID) // a stock bucket's reference (buckets.go)
	e.mu.Lock()
	e.stock[voucherID] = struct{}{}
	e.mu.Unlock()
	e.signal()
}

func (e *events) signal() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// publishTimeout bounds one PUBLISH; a message that fails is dropped (readers see the gap).
// publishGap is the least time between two messages: during a surge every grab changes the
// stock, and without it the publisher would send a message per round trip, each with the same
// "s <voucher>" events; with it, at most 100 messages a second carry all the changes.
const (
	publishTimeout = time.Second
	publishGap     = 10 * time.Millisecond
)

func (e *events) run(ctx context.Context) {
	defer close(e.done)
	var logged time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.wake:
		}
		e.mu.Lock()
		if len(e.orders) == 0 && len(e.stock) == 0 {
			e.mu.Unlock()
			continue
		}
		if e.dropped {
			e.seq++ // the lost events' message: readers see a jump and catch up
			e.dropped = false
		}
		e.seq++
		msg := e.message()
		e.orders = e.orders[:0]
		clear(e.stock)
		e.mu.Unlock()
		pctx, cancel := context.WithTimeout(ctx, publishTimeout)
		err := e.rdb.Publish(pctx, e.channel, msg).Err()
		cancel()
		if err != nil {
			e.drops.Add(1)
			e.mu.Lock()
			e.dropped = true
			e.mu.Unlock()
			if ctx.Err() == nil && time.Since(logged) > 30*time.Second {
				logged = time.Now()
				e.log.Warn("publishing change events", "err", err)
			}
		}
		if !wait.Sleep(ctx, publishGap) {
			return
		}
	}
}

// message is the payload of the events queued (e.mu held).
func (e *events) message() []byte {
	b := make([]byte, 0, 32+32*len(e.orders)+16*len(e.stock))
	b = append(b, e.id...)
	b = strconv.AppendUint(append(b, ' '), e.seq, 10)
	for _, ev := range e.orders {
		b = strconv.AppendInt(append(b, "\no "...), ev.Order, 10)
		b = strconv.AppendInt(append(b, ' '), int64(ev.User), 10)
		b = strconv.AppendInt(append(b, ' '), int64(ev.Voucher), 10)
		b = append(append(b, ' '), ev.Status...)
	}
	for v := range e.stock {
		b = strconv.AppendInt(append(b, "\ns "...), int64(v), 10)
	}
	return b
}

func (e *events) close() {
	if e == nil {
		return
	}
	e.stop()
	<-e.done
}

// EventChannel is the pub/sub channel of this deployment's change events (see Event).
func (s *Service) EventChannel() string { return s.events.channel }

// SubscribeEvents subscribes to the change events. The caller reads it with Receive (a
// *redis.Subscription after each (re)connection means events may have been missed) and
// closes it.
func (s *Service) SubscribeEvents(ctx context.Context) *redis.PubSub {
	return s.rdb.Subscribe(ctx, s.events.channel)
}

// EventsDropped counts change events this process could not publish (queue full, or Redis
// failing).
func (s *Service) EventsDropped() int64 { return s.events.drops.Load() }

// OrderRef names one order of a user.
type OrderRef struct {
	Order int64
	User  int
}

// orderStatesChunk bounds the ids of one database query.
const orderStatesChunk = 1000

// OrderStates reads where orders of one voucher stand, in one database query per 1 000 orders
// and one Redis command: each order's status (QUEUED if it is still in Redis's queue). An
// order missing from the result has to be read alone (Service.Order): it stands under
// another id, or nowhere.
func (s *Service) OrderStates(ctx context.Context, voucherID int, orders []OrderRef) (map[int64]seckillorder.Status, error) {
	out := make(map[int64]seckillorder.Status, len(orders))
	for start := 0; start < len(orders); start += orderStatesChunk {
		chunk := orders[start:min(start+orderStatesChunk, len(orders))]
		ids := make([]int, len(chunk))
		for i, o := range chunk {
			ids[i] = int(o.Order)
		}
		rows, err := s.db.SeckillOrder.Query().
			Where(seckillorder.VoucherID(voucherID), seckillorder.IDIn(ids...)).
			Select(seckillorder.FieldID, seckillorder.FieldUserID, seckillorder.FieldStatus).All(ctx)
		if err != nil {
			return nil, fmt.Errorf("seckill: reading orders: %w", err)
		}
		users := make(map[int64]int, len(rows))
		for _, r := range rows {
			users[int64(r.ID)] = r.UserID
			out[int64(r.ID)] = r.Status
		}
		for _, o := range chunk {
			if u, ok := users[o.Order]; ok && u != o.User {
				delete(out, o.Order) // another user's order under the same id
			}
		}
	}
	if s.opts.Strategy == StrategySync {
		return out, nil
	}
	var fields []string
	var waiting []OrderRef
	for _, o := range orders {
		if _, ok := out[o.Order]; !ok {
			fields = append(fields, strconv.Itoa(o.User))
			waiting = append(waiting, o)
		}
	}
	if len(fields) == 0 {
		return out, nil
	}
	// The buyers hash names each buyer's order; it keeps persisted buyers, whose rows the
	// query above found, so a buyer naming the order and no row means QUEUED.
	vals, err := s.rdb.HMGet(ctx, newKeyspace(&s.opts).sale(voucherID).Buyers, fields...).Result()
	if err != nil {
		return nil, fmt.Errorf("seckill: reading buyers: %w", err)
	}
	for i, v := range vals {
		if str, ok := v.(string); ok && str == strconv.FormatInt(waiting[i].Order, 10) {
			out[waiting[i].Order] = seckillorder.StatusQUEUED
		}
	}
	return out, nil
}
