package seckill

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/lua"
)

// told remembers, per voucher, the orders this process told its users (admitted, QUEUED) until
// they are known to be written, so that an order Redis loses before any consumer reads it (a
// flush, a failover to a replica that lagged, an AOF's lost tail: the backlog of the stream
// goes with the state) ends as a LOST row rather than as an id that answers nothing.
//
// Every second, for each voucher with orders remembered, one script call (lua.ReadSaleState)
// tells when the sale was last rebuilt in full and when the oldest order still in its stream
// was added. Orders told before a rebuild (which follows every loss, before admission resumes)
// are checked: one whose user's buyer entry no longer names it (after a rebuild the buyers are
// the database's live orders plus the stream's) and that stands nowhere in the database was
// lost, and is recorded LOST, its user told through the order's status. Orders told before the
// oldest one still queued, with no rebuild since, are written: forgotten. So the memory held is
// the backlog not yet written plus a few seconds, and an idle voucher costs nothing.
//
// What it cannot cover: orders told by a process that died too before the rebuild (Service.Order
// then infers the loss from the order id's second and the id counter's latest durable fence,
// see status.go), and vouchers whose Redis state is not rebuilt (then nothing was lost).
type told struct {
	rdb   redis.UniversalClient
	keys  keyspace
	store toldStore
	emit  func(o order, voucherID int) // the order is LOST: tell its subscribers
	m     *metrics
	log   *slog.Logger

	mu       sync.Mutex
	vouchers map[int]*toldVoucher
}

// toldStore is what told needs of the database.
type toldStore interface {
	// recordToldLost records LOST the orders that stand nowhere in the database (under the
	// voucher's row lock, checked again) and returns those it recorded.
	recordToldLost(ctx context.Context, voucherID int, orders []order) ([]order, error)
}

// toldVoucher is one voucher's orders told and not yet known written, in the order told, in
// chunks of toldChunk: a surge appends one per grab, and a chunked list never copies what it
// holds to grow, as one slice would (the copies cost a hot voucher's grabs a tenth of their CPU).
type toldVoucher struct {
	chunks  [][]toldOrder
	checked time.Time // the last rebuild whose losses were looked for
}

// toldOrder is an order told. It holds no pointers, so the collector does not scan the backlog.
type toldOrder struct {
	id   int64
	user int
	at   int64 // Unix ns, this process's clock
}

const toldChunk = 1024

func (o toldOrder) order() order { return order{id: o.id, user: o.user, at: time.Unix(0, o.at)} }

// len is how many orders v remembers.
func (v *toldVoucher) len() int {
	n := 0
	for _, c := range v.chunks {
		n += len(c)
	}
	return n
}

func (v *toldVoucher) add(o toldOrder) {
	last := len(v.chunks) - 1
	if last < 0 || len(v.chunks[last]) == cap(v.chunks[last]) {
		v.chunks = append(v.chunks, make([]toldOrder, 0, toldChunk))
		last++
	}
	v.chunks[last] = append(v.chunks[last], o)
}

// keepAfter forgets the orders told at or before t (Unix ns).
func (v *toldVoucher) keepAfter(t int64) {
	chunks := v.chunks[:0]
	for _, c := range v.chunks {
		keep := c[:0]
		for _, o := range c {
			if o.at > t {
				keep = append(keep, o)
			}
		}
		if len(keep) > 0 {
			chunks = append(chunks, keep)
		}
	}
	clear(v.chunks[len(chunks):])
	v.chunks = chunks
}

// toldSlack covers the difference between this process's clock (an order's at) and Redis's
// (the rebuild's and the stream's times): an order told within it of a rebuild is checked, and
// one is forgotten only when told this long before the oldest order queued.
const toldSlack = 2 * time.Second

// toldEvery is how often the orders told are compared with Redis; toldPage how many buyers
// one read asks for.
const (
	toldEvery = time.Second
	toldPage  = 500
)

// note remembers an order told to its user.
func (t *told) note(voucherID, userID int, orderID int64, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.vouchers == nil {
		t.vouchers = map[int]*toldVoucher{}
	}
	v := t.vouchers[voucherID]
	if v == nil {
		v = &toldVoucher{}
		t.vouchers[voucherID] = v
	}
	v.add(toldOrder{id: orderID, user: userID, at: at.UnixNano()})
}

// run compares the orders told with Redis every toldEvery until life ends.
func (t *told) run(life context.Context) {
	tick := time.NewTicker(toldEvery)
	defer tick.Stop()
	for {
		select {
		case <-life.Done():
			return
		case <-tick.C:
			t.sweep(life)
		}
	}
}

// sweep checks each voucher with orders told once.
func (t *told) sweep(ctx context.Context) {
	t.mu.Lock()
	ids := make([]int, 0, len(t.vouchers))
	for id := range t.vouchers {
		ids = append(ids, id)
	}
	t.mu.Unlock()
	for _, id := range ids {
		if ctx.Err() != nil {
			return
		}
		if err := t.check(ctx, id); err != nil {
			if ctx.Err() == nil {
				t.log.Warn("checking the orders told for losses (retried in a second)", "voucher", id, "err", err)
			}
			return // Redis or the database is failing: the others would wait for it in turn
		}
	}
}

// check looks for the losses of one voucher's orders told, and forgets those written.
func (t *told) check(ctx context.Context, voucherID int) error {
	st, err := bounded(ctx, t.rdb, func(ctx context.Context) (lua.SaleState, error) {
		return lua.ReadSaleState(ctx, t.rdb, t.keys.script(voucherID))
	})
	if err != nil {
		return err
	}
	if !st.Ready || !st.Current {
		return nil // lost, or from before a restart: a rebuild is due; look after it
	}
	t.mu.Lock()
	v := t.vouchers[voucherID]
	var suspects []order
	if st.Rebuilt.After(v.checked) {
		cut := st.Rebuilt.Add(toldSlack).UnixNano()
		for _, c := range v.chunks {
			for _, o := range c {
				if o.at <= cut {
					suspects = append(suspects, o.order())
				}
			}
		}
	}
	t.mu.Unlock()
	if len(suspects) > 0 {
		if err := t.recordLost(ctx, voucherID, suspects); err != nil {
			return err
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if st.Rebuilt.After(v.checked) {
		v.checked = st.Rebuilt
	}
	// Told before the oldest order queued (or before now, with nothing queued), with no
	// rebuild since: written.
	written := time.Now().Add(-toldSlack)
	if !st.Oldest.IsZero() {
		written = st.Oldest.Add(-toldSlack)
	}
	v.keepAfter(written.UnixNano())
	if len(v.chunks) == 0 {
		delete(t.vouchers, voucherID)
	}
	return nil
}

// recordLost records LOST the suspects that neither Redis's buyers nor the database hold.
func (t *told) recordLost(ctx context.Context, voucherID int, suspects []order) error {
	var missing []order
	for start := 0; start < len(suspects); start += toldPage {
		page := suspects[start:min(len(suspects), start+toldPage)]
		users := make([]string, len(page))
		for i, o := range page {
			users[i] = strconv.Itoa(o.user)
		}
		held, err := bounded(ctx, t.rdb, func(ctx context.Context) ([]any, error) {
			return t.rdb.HMGet(ctx, t.keys.sale(voucherID).Buyers, users...).Result()
		})
		if err != nil {
			return fmt.Errorf("reading buyers: %w", err)
		}
		for i, o := range page {
			if s, ok := held[i].(string); !ok || s != strconv.FormatInt(o.id, 10) {
				missing = append(missing, o)
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	// After a rebuild the buyers hold every order of the stream; one removed by hand (or by a
	// bug) must still not be taken for lost while its entry waits: look in the stream too.
	missing, err := t.notQueued(ctx, voucherID, missing)
	if err != nil || len(missing) == 0 {
		return err
	}
	lost, err := t.store.recordToldLost(ctx, voucherID, missing)
	if err != nil {
		return fmt.Errorf("recording lost orders: %w", err)
	}
	for _, o := range lost {
		t.m.toldLost.Inc()
		t.log.Error("order told to its user lost with Redis's state before it was written: recorded LOST (its unit is back on sale)",
			"voucher", voucherID, "order", o.id, "user", o.user)
		t.emit(o, voucherID)
	}
	return nil
}

// notQueued keeps the orders whose entry is not in the voucher's stream: it reads the entries
// added in the orders' time span (stream ids are Redis's clock at XADD; toldSlack either side
// for the clocks), in pages.
func (t *told) notQueued(ctx context.Context, voucherID int, orders []order) ([]order, error) {
	from, to := orders[0].at, orders[0].at
	for _, o := range orders {
		from, to = minTime(from, o.at), maxTime(to, o.at)
	}
	start := strconv.FormatInt(from.Add(-toldSlack).UnixMilli(), 10)
	end := strconv.FormatInt(to.Add(toldSlack).UnixMilli(), 10)
	queued := map[int64]bool{}
	for {
		msgs, err := bounded(ctx, t.rdb, func(ctx context.Context) ([]redis.XMessage, error) {
			return t.rdb.XRangeN(ctx, t.keys.sale(voucherID).Orders, start, end, toldPage).Result()
		})
		if err != nil {
			return nil, fmt.Errorf("reading the queue: %w", err)
		}
		for _, m := range msgs {
			if o, err := parseEntry(m); err == nil {
				queued[o.id] = true
			}
		}
		if len(msgs) < toldPage {
			break
		}
		start = "(" + msgs[len(msgs)-1].ID
	}
	keep := orders[:0:0]
	for _, o := range orders {
		if !queued[o.id] {
			keep = append(keep, o)
		}
	}
	return keep, nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
