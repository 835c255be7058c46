package seckill

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/ent/voucher"
	"github.com/surgekit/surge/lua"
)

// Page sizes of reconcile's scans of the buyers hash and the orders stream, which keep large
// sales from blocking Redis; maxKept bounds the buyer differences kept for examples.
const (
	buyersScanPage = 1000
	streamScanPage = 1000
	maxKept        = 1000
)

// streamID is a stream entry id, ordered.
type streamID struct{ ms, seq uint64 }

func parseStreamID(s string) streamID {
	a, b, _ := strings.Cut(s, "-")
	ms, _ := strconv.ParseUint(a, 10, 64)
	seq, _ := strconv.ParseUint(b, 10, 64)
	return streamID{ms, seq}
}

func (a streamID) after(b streamID) bool { return a.ms > b.ms || (a.ms == b.ms && a.seq > b.seq) }

// redisView is what reconcile read of a voucher's sale in Redis.
type redisView struct {
	meta         map[string]string
	registered   bool
	endScore     int64    // the registry's end of sale
	snapLast     streamID // the last entry at the snapshot: later ones were admitted during the check
	groupMissing bool     // the orders stream has no consumer group
	buyers       map[string]string
	queued       map[int]queued // user -> its last queued order
	scan         streamScan
}

// queued is a user's order in the stream.
type queued struct {
	order int64
	late  bool // admitted after the snapshot, during the check
}

// streamScan is what the stream's entries say, against the database.
type streamScan struct {
	unpersisted, persisted    int64
	superseding, twice, taken []string
	failedAgain, bad          int
}

// inspectRedis reads the voucher's keys and compares them with the database.
func (rc *reconciler) inspectRedis(ctx context.Context, r *VoucherReport, db *dbOrders, o ReconcileOptions) error {
	if k, err := rc.bucketCount(ctx, r.VoucherID); err != nil || k > 1 {
		if err != nil {
			return fmt.Errorf("reading the voucher's buckets: %w", err)
		}
		return rc.inspectBuckets(ctx, r, db, o, k) // reconcile_buckets.go
	}
	var v redisView
	var err error
	if err = rc.snapshot(ctx, r, &v); err != nil {
		return err
	}
	if v.buyers, err = rc.scanBuyers(ctx, r); err != nil {
		return err
	}
	if err = rc.scanStream(ctx, r, db, &v); err != nil {
		return err
	}
	want := expectFromStream(r, db, &v)
	if !rc.checkReady(r, &v) {
		return nil
	}
	rc.checkState(ctx, r, &v)
	compareBuyers(r, want, &v, db, o)
	noteFacts(r, &v, rc.group, rc.keys.sale(r.VoucherID), o)
	return nil
}

// snapshotCmds are the small figures, read in one transaction.
type snapshotCmds struct {
	meta  *redis.MapStringStringCmd
	stock *redis.StringCmd
	qlen  *redis.IntCmd
	tail  *redis.XMessageSliceCmd
	dead  *redis.IntCmd
	pend  *redis.XPendingCmd
}

// snapshot reads the small figures in one atomic step (a grab moves stock and stream
// together) and the registry, into r and v.
func (rc *reconciler) snapshot(ctx context.Context, r *VoucherReport, v *redisView) error {
	k := rc.keys.sale(r.VoucherID)
	var c snapshotCmds
	_, err := rc.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		c = snapshotCmds{
			meta: p.HGetAll(ctx, k.Meta), stock: p.Get(ctx, k.Stock), qlen: p.XLen(ctx, k.Orders),
			tail: p.XRevRangeN(ctx, k.Orders, "+", "-", 1), dead: p.XLen(ctx, k.Dead), pend: p.XPending(ctx, k.Orders, rc.group),
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) && !replyError(err) {
		return fmt.Errorf("reading Redis: %w", err)
	}
	score, err := rc.rdb.ZScore(ctx, rc.keys.registry(), strconv.Itoa(r.VoucherID)).Result()
	switch {
	case errors.Is(err, redis.Nil):
	case err != nil:
		return fmt.Errorf("reading the registry: %w", err)
	default:
		v.registered, v.endScore = true, int64(score)
	}
	r.Registered = v.registered
	c.record(r, v, k)
	return nil
}

// record puts the figures into r and v; an unreadable one is a problem.
func (c *snapshotCmds) record(r *VoucherReport, v *redisView, k Keys) {
	var err error
	if v.meta, err = c.meta.Result(); err != nil {
		r.problem(true, "meta %s unreadable: %v", k.Meta, err)
	}
	r.Ready = len(v.meta) > 0
	switch n, err := c.stock.Int64(); {
	case errors.Is(err, redis.Nil):
	case err != nil:
		r.problem(true, "stock %s unreadable: %v", k.Stock, err)
	default:
		r.RedisStock = &n
	}
	if r.Queued, err = c.qlen.Result(); err != nil {
		r.problem(true, "orders stream %s unreadable: %v", k.Orders, err)
	}
	if msgs, err := c.tail.Result(); err == nil && len(msgs) > 0 {
		v.snapLast = parseStreamID(msgs[0].ID)
	}
	if r.DeadLetters, err = c.dead.Result(); err != nil {
		r.problem(true, "dead-letter stream %s unreadable: %v", k.Dead, err)
	}
	if p, err := c.pend.Result(); err == nil {
		r.Pending = p.Count
	} else if isNoGroup(err) {
		v.groupMissing = true
	} else {
		r.problem(true, "pending entries of %s unreadable: %v", k.Orders, err)
	}
}

// scanBuyers reads the buyers hash. It is read before the stream: a buyer the scan sees has
// its entry in the stream already, since one script adds both.
func (rc *reconciler) scanBuyers(ctx context.Context, r *VoucherReport) (map[string]string, error) {
	key := rc.keys.sale(r.VoucherID).Buyers
	buyers := map[string]string{}
	var cursor uint64
	for {
		kv, next, err := rc.rdb.HScan(ctx, key, cursor, "", buyersScanPage).Result()
		if replyError(err) {
			r.problem(true, "buyers %s unreadable: %v", key, err)
			break
		}
		if err != nil {
			return nil, fmt.Errorf("scanning the buyers: %w", err)
		}
		for i := 0; i+1 < len(kv); i += 2 {
			buyers[kv[i]] = kv[i+1]
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	r.Buyers = len(buyers)
	return buyers, nil
}

// scanStream reads the orders stream in pages and sorts its entries by how they stand in the
// database; entries admitted after the snapshot are only noted as queued.
func (rc *reconciler) scanStream(ctx context.Context, r *VoucherReport, db *dbOrders, v *redisView) error {
	stream := rc.keys.sale(r.VoucherID).Orders
	v.queued = map[int]queued{}
	start := "-"
	for {
		msgs, err := rc.rdb.XRangeN(ctx, stream, start, "+", streamScanPage).Result()
		if replyError(err) {
			return nil // reported from XLEN
		}
		if err != nil {
			return fmt.Errorf("reading the orders stream: %w", err)
		}
		for _, msg := range msgs {
			v.scan.entry(msg, parseStreamID(msg.ID).after(v.snapLast), r.VoucherID, db, v.queued)
		}
		if len(msgs) < streamScanPage {
			return nil
		}
		start = "(" + msgs[len(msgs)-1].ID
	}
}

// entry sorts one stream entry; late: admitted after the snapshot.
func (sc *streamScan) entry(msg redis.XMessage, late bool, voucherID int, db *dbOrders, users map[int]queued) {
	e, err := parseEntry(msg)
	if err != nil {
		if !late {
			sc.bad++
			sc.unpersisted++
		}
		return
	}
	if prev, ok := users[e.user]; ok && !late && !prev.late {
		sc.twice = append(sc.twice, fmt.Sprintf("user %d: orders %d and %d", e.user, prev.order, e.id))
	}
	users[e.user] = queued{order: e.id, late: late}
	if late {
		return
	}
	switch classify(e, voucherID, db.rows, db.aliases).standing {
	case standsOwn, standsElsewhere:
		sc.persisted++
	case standsFailed:
		sc.failedAgain++
		sc.unpersisted++
	case standsTaken:
		sc.unpersisted++
		sc.taken = append(sc.taken, fmt.Sprintf("user %d: queued %d, an order of user %d", e.user, e.id, db.rows[e.id].user))
	default:
		sc.unpersisted++
		if have, ok := db.live[e.user]; ok && have != e.id {
			sc.superseding = append(sc.superseding, fmt.Sprintf("user %d: queued %d, database %d", e.user, e.id, have))
		}
	}
}

// expectedBuyers are the database's live orders with the stream's on top (as a rebuild does).
// expectFromStream sets what Redis should hold given the database and the stream's scan:
// the stock (the database's less the orders queued and not yet written, a problem if that is
// negative) and the buyers, which it returns.
func expectFromStream(r *VoucherReport, db *dbOrders, v *redisView) map[int]queued {
	r.QueuedPersisted = int(v.scan.persisted)
	expected := int64(r.DBStock) - v.scan.unpersisted
	if expected < 0 && r.DBStock >= 0 {
		r.problem(false, "%d orders queued but the database stock is %d: %d of them will fail (Redis admitted more than the database holds)",
			v.scan.unpersisted, r.DBStock, -expected)
	}
	r.ExpectedStock = max(0, expected)
	want := expectedBuyers(db, v.queued)
	r.ExpectedBuyers = len(want)
	return want
}

func expectedBuyers(db *dbOrders, stream map[int]queued) map[int]queued {
	want := make(map[int]queued, len(db.live)+len(stream))
	for u, id := range db.live {
		want[u] = queued{order: id}
	}
	for u, q := range stream {
		want[u] = q
	}
	return want
}

// checkReady judges a voucher by whether Redis holds its sale; true if it does, and the rest
// of the state is to be compared.
func (rc *reconciler) checkReady(r *VoucherReport, v *redisView) bool {
	onSale := r.Seckill && r.Status == string(voucher.StatusACTIVE) && rc.clock().Before(*r.EndAt)
	holdsSomething := v.registered || r.RedisStock != nil || len(v.buyers) > 0 || r.Queued > 0
	switch {
	case !r.Seckill:
		if r.Ready || holdsSomething {
			r.problem(false, "Redis holds sale state (ready %v, registered %v, %d buyers, %d queued) for a voucher the database does not have as a seckill voucher",
				r.Ready, v.registered, len(v.buyers), r.Queued)
		} else {
			r.problem(false, "no seckill voucher %d in the database", r.VoucherID)
		}
		return false
	case !r.Ready && (holdsSomething || onSale && r.DBOrders+r.DBFailed > 0):
		why := "Redis still holds part of its state"
		if !holdsSomething {
			why = "its sale is on and it has orders (Redis lost it)"
		}
		r.problem(true, "not ready: Redis has no sale state (meta %s missing) although %s; grabs answer NOT_READY until a rebuild",
			rc.keys.sale(r.VoucherID).Meta, why)
	case !r.Ready && onSale:
		r.note("not warmed yet (no order, nothing in Redis): the first grab warms it, answering NOT_READY meanwhile")
	case !r.Ready:
		r.note("not in Redis (sale ended or voucher not active): nothing to compare; a grab would rebuild it")
	}
	return r.Ready
}

// checkState compares a ready sale's state with the database: current, meta, registry, stock.
func (rc *reconciler) checkState(ctx context.Context, r *VoucherReport, v *redisView) {
	k := rc.keys.sale(r.VoucherID)
	if st, err := lua.ReadSaleState(ctx, rc.rdb, lua.SeckillKeys(k)); err != nil {
		r.problem(true, "sale state unreadable: %v", err)
	} else if st.Ready && !st.Current {
		r.Stale = true
		r.problem(true, "Redis restarted or failed over since this voucher was last rebuilt: it may have come back with an older state (a replica that lagged, an AOF that lost its tail); the consumer rebuilds it within seconds")
	}
	begin, end := strconv.FormatInt(r.BeginAt.UnixMilli(), 10), strconv.FormatInt(r.EndAt.UnixMilli(), 10)
	on := "0"
	if r.Status == string(voucher.StatusACTIVE) {
		on = "1"
	}
	if m := v.meta; m["begin"] != begin || m["end"] != end || m["on"] != on {
		r.problem(true, "meta (begin %s, end %s, on %s) differs from the database (begin %s, end %s, on %s)",
			m["begin"], m["end"], m["on"], begin, end, on)
	}
	// The registry matters while orders can still come or wait: the consumer drops a voucher
	// Linger after its sale, once its stream is empty.
	if r.Queued > 0 || rc.clock().Before(*r.EndAt) {
		switch {
		case !v.registered:
			r.problem(true, "not registered in %s: no consumer reads its stream", rc.keys.registry())
		case v.endScore != r.EndAt.UnixMilli():
			r.problem(true, "registered with end %d, the database says %d: the consumer may stop reading too early or late",
				v.endScore, r.EndAt.UnixMilli())
		}
	}
	switch {
	case r.RedisStock == nil:
		r.problem(true, "stock %s missing: grabs answer NOT_READY", k.Stock)
	case *r.RedisStock != r.ExpectedStock:
		r.problem(true, "Redis stock %d, expected %d (database %d - %d queued not yet in the database)",
			*r.RedisStock, r.ExpectedStock, r.DBStock, v.scan.unpersisted)
	}
}

// compareBuyers compares the buyers hash with the expected buyers. Examples are kept up to a
// bound, then sorted so that reports are stable.
func compareBuyers(r *VoucherReport, want map[int]queued, v *redisView, db *dbOrders, o ReconcileOptions) {
	var missing, extra, other []string
	keep := func(l *[]string, format string, args ...any) {
		if len(*l) < maxKept {
			*l = append(*l, fmt.Sprintf(format, args...))
		}
	}
	for u, w := range want {
		have, ok := v.buyers[strconv.Itoa(u)]
		switch {
		case w.late:
			// Admitted during the check: the scan may or may not have seen it.
		case !ok:
			r.MissingBuyers++
			keep(&missing, "user %d: order %d missing", u, w.order)
		case have != strconv.FormatInt(w.order, 10):
			r.MismatchedBuyers++
			keep(&other, "user %d: Redis order %s, expected %d", u, have, w.order)
		}
	}
	for u, have := range v.buyers {
		id, err := strconv.Atoi(u)
		if _, ok := want[id]; err != nil || !ok {
			r.ExtraBuyers++
			keep(&extra, "user %s: order %s not in the database nor queued", u, have)
		}
	}
	if r.MissingBuyers+r.ExtraBuyers+r.MismatchedBuyers == 0 {
		return
	}
	for _, l := range [][]string{missing, extra, other} {
		sort.Strings(l)
		r.BuyerExamples = append(r.BuyerExamples, l[:min(o.Examples, len(l))]...)
	}
	r.problem(true, "buyers: %d missing, %d extra, %d with another order (Redis holds %d, expected %d: %d live orders in the database, %d queued users); e.g. %s",
		r.MissingBuyers, r.ExtraBuyers, r.MismatchedBuyers, len(v.buyers), len(want), len(db.live), len(v.queued), strings.Join(r.BuyerExamples, "; "))
}

// noteFacts notes what is worth knowing and is no disagreement.
func noteFacts(r *VoucherReport, v *redisView, group string, k Keys, o ReconcileOptions) {
	sc := &v.scan
	if sc.persisted > 0 {
		r.note("%d queued entries are already in the database (written, not acknowledged); the consumer settles them when it takes them again", sc.persisted)
	}
	examples := func(l []string) string { return strings.Join(l[:min(o.Examples, len(l))], "; ") }
	if len(sc.superseding) > 0 {
		r.note("%d queued orders belong to users holding another order in the database; the consumer will supersede them (e.g. %s)",
			len(sc.superseding), examples(sc.superseding))
	}
	if len(sc.taken) > 0 {
		r.note("%d queued orders carry an id that is another order's (Redis lost the id counter); the consumer will re-home them under fresh ids (e.g. %s)",
			len(sc.taken), examples(sc.taken))
	}
	if len(sc.twice) > 0 {
		r.note("%d users have two orders queued; the consumer keeps the first (e.g. %s)", len(sc.twice), examples(sc.twice))
	}
	if sc.failedAgain > 0 {
		r.note("%d queued entries are FAILED in the database; the consumer will dead-letter them", sc.failedAgain)
	}
	if sc.bad > 0 {
		r.note("%d queued entries are unreadable; the consumer will dead-letter them", sc.bad)
	}
	if v.groupMissing && r.Queued > 0 {
		r.note("consumer group %q missing on %s; the consumer recreates it", group, k.Orders)
	}
	if r.DeadLetters > 0 {
		r.note("%d orders in the dead-letter stream %s (FAILED, their admission compensated)", r.DeadLetters, k.Dead)
	}
}
