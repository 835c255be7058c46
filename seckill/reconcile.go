package seckill

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/ent"
	"github.com/surgekit/surge/ent/seckillorder"
	"github.com/surgekit/surge/ent/voucher"
	"github.com/surgekit/surge/redisctx"
)

// ReconcileOptions says which vouchers Reconcile checks and whether it repairs them.
type ReconcileOptions struct {
	// VoucherIDs are the vouchers to check, in this order. Empty: every seckill voucher of the
	// database whose sale has not ended or ended less than EndedWithin ago, and every voucher
	// registered in Redis (the consumer's list, which keeps a voucher until its stream is empty
	// and its sale ended Options.Linger ago), in id order.
	VoucherIDs []int
	// EndedWithin bounds the vouchers chosen when VoucherIDs is empty. (24 h)
	EndedWithin time.Duration
	// Fix rebuilds each voucher whose Redis state disagrees with the database (as Rebuild does,
	// under the same hold of the voucher's lock as the check) and checks it again. Problems in
	// the database itself (negative stock, two live orders of one user) are reported, never
	// fixed.
	Fix bool
	// Examples is how many examples of each kind of buyer difference a report lists. (5)
	Examples int
}

// Results of a VoucherReport.
const (
	ReconcileOK      = "OK"      // Redis and the database agree
	ReconcileProblem = "PROBLEM" // they do not (after the fix, if Fix was asked)
	ReconcileFixed   = "FIXED"   // they did not, and the rebuild made them agree
)

// VoucherReport is what Reconcile found for one voucher. The figures are those of the last
// check (after the fix, when one ran).
type VoucherReport struct {
	VoucherID int    `json:"voucher_id"`
	Result    string `json:"result"` // OK, PROBLEM or FIXED
	// Seckill is false when the database holds no seckill voucher of this id.
	Seckill bool       `json:"seckill"`
	Status  string     `json:"status,omitempty"` // the voucher's status in the database
	BeginAt *time.Time `json:"begin_at,omitempty"`
	EndAt   *time.Time `json:"end_at,omitempty"`

	// The database.
	DBStock  int `json:"db_stock"`
	DBOrders int `json:"db_orders"` // live orders (status other than FAILED)
	DBFailed int `json:"db_failed"` // FAILED orders

	// Redis; all zero with StrategySync (RedisChecked false).
	RedisChecked bool `json:"redis_checked"`
	// Ready: the meta hash exists, so admission runs (with the stock key).
	Ready bool `json:"ready"`
	// Registered: the voucher is in the consumer's list of streams.
	Registered bool   `json:"registered"`
	RedisStock *int64 `json:"redis_stock"` // nil when the key is missing
	// ExpectedStock is max(0, DBStock - queued orders not yet in the database).
	ExpectedStock int64 `json:"expected_stock"`
	Buyers        int   `json:"buyers"` // entries of the buyers hash
	// ExpectedBuyers counts the users of the live database orders and of the stream.
	ExpectedBuyers int   `json:"expected_buyers"`
	Queued         int64 `json:"queued"`  // entries in the orders stream
	Pending        int64 `json:"pending"` // entries delivered to a consumer, not yet acknowledged
	DeadLetters    int64 `json:"dead_letters"`
	// QueuedPersisted counts stream entries whose order is already in the database (written,
	// then the acknowledgement failed); the consumer settles them when it takes them again.
	QueuedPersisted  int      `json:"queued_persisted"`
	MissingBuyers    int      `json:"missing_buyers"`    // expected user -> order pairs Redis lacks
	ExtraBuyers      int      `json:"extra_buyers"`      // users in Redis no order accounts for
	MismatchedBuyers int      `json:"mismatched_buyers"` // users Redis gives another order
	BuyerExamples    []string `json:"buyer_examples,omitempty"`

	// Orders standing under another id than the one their user was told, which only a Redis
	// that lost state causes (order(id) follows the alias): Rehomed were stored under a fresh
	// id because their id was another order's, Superseded lost to the user's existing order.
	// RehomedOrders lists the re-homed ones (the first 1000).
	Rehomed       int            `json:"rehomed"`
	Superseded    int            `json:"superseded"`
	RehomedOrders []RehomedOrder `json:"rehomed_orders,omitempty"`
	// Stale: Redis restarted or failed over since the state was last rebuilt, so it may be
	// older than what admission and the consumer last saw; the consumer rebuilds it.
	Stale bool `json:"stale"`

	// Problems are the disagreements left; empty means OK.
	Problems []string `json:"problems"`
	// Notes are facts worth knowing that are not disagreements.
	Notes []string `json:"notes,omitempty"`
	// Found are the problems the first check found, when a fix was attempted.
	Found    []string `json:"found,omitempty"`
	Fixed    bool     `json:"fixed"`
	FixError string   `json:"fix_error,omitempty"`

	// fixable: some problem is on the Redis side and the voucher is a seckill voucher.
	fixable bool
}

// RehomedOrder is an order stored under another id than the one its user was told.
type RehomedOrder struct {
	User     int   `json:"user_id"`
	Admitted int64 `json:"admitted_id"` // the id the user was told
	Order    int64 `json:"order_id"`    // the id it is stored under
	Failed   bool  `json:"failed,omitempty"`
}

// maxListed bounds the re-homed orders a report lists.
const maxListed = 1000

// OK reports whether no problem is left.
func (r *VoucherReport) OK() bool { return len(r.Problems) == 0 }

func (r *VoucherReport) problem(redisSide bool, format string, args ...any) {
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
	if redisSide {
		r.fixable = r.Seckill
	}
}

func (r *VoucherReport) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// Reconcile compares each voucher's sale state in Redis with the database and reports the
// differences; with o.Fix it repairs what a rebuild can repair. Each voucher is checked under
// its lock, so the stream consumer commits nothing meanwhile and every admitted order is seen
// either in the database or in the stream; grabs go on during the check (a grab admitted while
// the check reads Redis is not held against it).
//
// What it expects, for a voucher whose Redis state is ready:
//   - Redis stock = max(0, database stock - queued orders not yet in the database);
//   - buyers (user -> order) = the live orders of the database, with the users of the stream
//     on top (their order is the queued one);
//   - the meta hash holds the database's window and on/off, and the voucher is registered for
//     the consumer.
//
// A voucher Redis does not hold is a problem if Redis still holds part of its state (the
// registry, stock, buyers or queued orders), or if its sale is on (ACTIVE, not ended) and it
// has orders: Redis lost it. A voucher on sale without orders was merely never warmed, and one
// whose sale is over needs nothing from Redis; a grab would warm either. In the
// database it flags a negative stock, users holding two live orders and rows whose slot
// disagrees with their status. Buyers are read with HSCAN and the stream in pages, so large
// sales do not block Redis; the voucher's lock is held for the whole check (and fix), which
// delays that voucher's order persistence by as long.
//
// With StrategySync there is no Redis state: the reports carry the database figures and
// problems only, and say so in their notes.
//
// Dead-lettering runs outside the voucher's lock: an entry given up on during the check can
// show as a transient difference; check again.
//
// It returns at ctx's deadline whatever the Redis client's settings.
func (s *Service) Reconcile(ctx context.Context, o ReconcileOptions) ([]VoucherReport, error) {
	return redisctx.Do(ctx, s.rdb, func(ctx context.Context) ([]VoucherReport, error) { return s.reconcile(ctx, o) })
}

func (s *Service) reconcile(ctx context.Context, o ReconcileOptions) ([]VoucherReport, error) {
	if o.EndedWithin <= 0 {
		o.EndedWithin = 24 * time.Hour
	}
	if o.Examples <= 0 {
		o.Examples = 5
	}
	ids := o.VoucherIDs
	if len(ids) == 0 {
		var err error
		if ids, err = s.reconcileCandidates(ctx, o.EndedWithin); err != nil {
			return nil, err
		}
	} else {
		seen := map[int]bool{}
		ids = slices.DeleteFunc(slices.Clone(ids), func(id int) bool {
			dup := seen[id]
			seen[id] = true
			return dup
		})
	}
	reports := make([]VoucherReport, 0, len(ids))
	for _, id := range ids {
		r, err := s.reconcileOne(ctx, id, o)
		if err != nil {
			return reports, fmt.Errorf("seckill: reconciling voucher %d: %w", id, err)
		}
		reports = append(reports, r)
	}
	return reports, nil
}

// reconcileCandidates lists the seckill vouchers whose sale ended less than within ago (or is
// on, or is to come) and the vouchers registered in Redis.
func (s *Service) reconcileCandidates(ctx context.Context, within time.Duration) ([]int, error) {
	ids, err := s.db.Voucher.Query().
		Where(voucher.KindEQ(voucher.KindSECKILL), voucher.EndAtGT(s.opts.Clock().Add(-within))).
		IDs(ctx)
	if err != nil {
		return nil, fmt.Errorf("seckill: listing vouchers to reconcile: %w", err)
	}
	if s.opts.Strategy != StrategySync {
		members, err := s.rdb.ZRange(ctx, s.registryKey(), 0, -1).Result()
		if err != nil {
			return nil, fmt.Errorf("seckill: listing registered vouchers: %w", err)
		}
		for _, m := range members {
			if id, err := strconv.Atoi(m); err == nil && id > 0 {
				ids = append(ids, id)
			}
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

func (s *Service) reconcileOne(ctx context.Context, id int, o ReconcileOptions) (VoucherReport, error) {
	if s.opts.Strategy == StrategySync {
		r := VoucherReport{VoucherID: id}
		if err := s.inspectDB(ctx, &r, nil); err != nil {
			return r, err
		}
		if !r.Seckill {
			r.problem(false, "no seckill voucher %d in the database", id)
		}
		r.note("strategy sync: Redis holds no sale state, only the database figures are reported")
		r.finish()
		return r, nil
	}
	l, err := s.lockVoucher(ctx, id)
	if err != nil {
		return VoucherReport{VoucherID: id}, err
	}
	defer l.Release(context.WithoutCancel(ctx))
	lctx, done := holding(ctx, l) // ends with ctx too: its deadline bounds the check
	defer done()
	lost := l.Context()
	r, err := s.inspectHeld(lctx, id, o)
	if err == nil && lost.Err() != nil {
		err = fmt.Errorf("lock on the voucher lost during the check: %w", context.Cause(lost))
	}
	if err != nil || !o.Fix || r.OK() || !r.fixable {
		r.finish()
		return r, err
	}
	found := r.Problems
	// The rebuild first settles the entries already in the database, as the consumer would on
	// redelivery, so that it does not count them as queued.
	fixErr := s.warmLocked(lctx, id, true)
	if lost.Err() != nil {
		return r, fmt.Errorf("lock on the voucher lost during the fix: %w", context.Cause(lost))
	}
	if err := ctx.Err(); err != nil {
		return r, err
	}
	r2, err := s.inspectHeld(lctx, id, o)
	if err == nil && lost.Err() != nil {
		err = fmt.Errorf("lock on the voucher lost during the check: %w", context.Cause(lost))
	}
	r2.Found = found
	if fixErr != nil {
		r2.FixError = fixErr.Error()
	}
	r2.Fixed = fixErr == nil && r2.OK()
	r2.finish()
	if r2.Fixed {
		s.log.Info("voucher reconciled: Redis rebuilt from the database", "voucher", id, "problems", strings.Join(found, "; "))
	}
	return r2, err
}

func (r *VoucherReport) finish() {
	switch {
	case r.Fixed:
		r.Result = ReconcileFixed
	case r.OK():
		r.Result = ReconcileOK
	default:
		r.Result = ReconcileProblem
	}
	if r.Problems == nil {
		r.Problems = []string{}
	}
}

// dbOrders is a voucher's orders as the database has them.
type dbOrders struct {
	live    map[int]int64         // user -> live order holding the slot
	rows    map[int64]orderRow    // every order of the voucher
	aliases map[aliasKey]aliasRow // every alias of the voucher (see classify)
}

// inspectHeld inspects a voucher holding its row lock as well, so that no batch commits
// during the snapshot: consumers serialise on that row lock (with MySQL they do not take the
// voucher's Redis lock). It is released before a fix, whose rebuild takes it again.
func (s *Service) inspectHeld(ctx context.Context, id int, o ReconcileOptions) (VoucherReport, error) {
	release, err := s.lockRow(ctx, id)
	if err != nil {
		return VoucherReport{VoucherID: id}, err
	}
	defer release()
	return s.inspect(ctx, id, o)
}

// inspect checks one voucher; the caller holds its lock.
func (s *Service) inspect(ctx context.Context, id int, o ReconcileOptions) (VoucherReport, error) {
	r := VoucherReport{VoucherID: id, RedisChecked: true}
	var db dbOrders
	if err := s.inspectDB(ctx, &r, &db); err != nil {
		return r, err
	}
	if err := s.inspectRedis(ctx, &r, &db, o); err != nil {
		return r, err
	}
	return r, nil
}

// inspectDB reads the voucher and its orders, and flags what is wrong in the database alone.
func (s *Service) inspectDB(ctx context.Context, r *VoucherReport, out *dbOrders) error {
	v, err := s.db.Voucher.Get(ctx, r.VoucherID)
	if err != nil && !ent.IsNotFound(err) {
		return fmt.Errorf("reading the voucher: %w", err)
	}
	if v != nil && v.Kind == voucher.KindSECKILL && v.Stock != nil && v.BeginAt != nil && v.EndAt != nil {
		r.Seckill = true
		r.Status = string(v.Status)
		r.DBStock = *v.Stock
		r.BeginAt, r.EndAt = v.BeginAt, v.EndAt
		if r.DBStock < 0 {
			r.problem(false, "database: stock %d is negative (oversold)", r.DBStock)
		}
	}
	db := dbOrders{live: map[int]int64{}, rows: map[int64]orderRow{}}
	dups := map[int][]int64{}
	var slotless, failedSlot []string
	const page = 5000
	last := 0
	for {
		rows, err := s.db.SeckillOrder.Query().
			Where(seckillorder.VoucherID(r.VoucherID), seckillorder.IDGT(last)).
			Order(ent.Asc(seckillorder.FieldID)).Limit(page).
			Select(seckillorder.FieldID, seckillorder.FieldUserID, seckillorder.FieldStatus, seckillorder.FieldSlot).
			All(ctx)
		if err != nil {
			return fmt.Errorf("reading the orders: %w", err)
		}
		for _, row := range rows {
			db.rows[int64(row.ID)] = orderRow{user: row.UserID, voucher: r.VoucherID, failed: row.Status == seckillorder.StatusFAILED}
			holds := row.Slot != nil && *row.Slot
			if row.Status == seckillorder.StatusFAILED {
				r.DBFailed++
				if holds {
					failedSlot = append(failedSlot, strconv.Itoa(row.ID))
				}
				continue
			}
			r.DBOrders++
			if !holds {
				slotless = append(slotless, strconv.Itoa(row.ID))
				continue
			}
			if prev, ok := db.live[row.UserID]; ok {
				if len(dups[row.UserID]) == 0 {
					dups[row.UserID] = []int64{prev}
				}
				dups[row.UserID] = append(dups[row.UserID], int64(row.ID))
			}
			db.live[row.UserID] = int64(row.ID) // the last one, as a rebuild loads them
		}
		if len(rows) < page {
			break
		}
		last = rows[len(rows)-1].ID
	}
	if len(dups) > 0 {
		users := make([]int, 0, len(dups))
		for u := range dups {
			users = append(users, u)
		}
		sort.Ints(users)
		var ex []string
		for _, u := range users[:min(5, len(users))] {
			ex = append(ex, fmt.Sprintf("user %d: orders %v", u, dups[u]))
		}
		r.problem(false, "database: %d users hold more than one live order (oversold); e.g. %s", len(dups), strings.Join(ex, ", "))
	}
	if len(slotless) > 0 {
		r.problem(false, "database: %d live orders hold no slot (a rebuild would not count their buyers); e.g. %s",
			len(slotless), strings.Join(slotless[:min(5, len(slotless))], ", "))
	}
	if len(failedSlot) > 0 {
		r.problem(false, "database: %d FAILED orders still hold the user's slot; e.g. %s",
			len(failedSlot), strings.Join(failedSlot[:min(5, len(failedSlot))], ", "))
	}
	if !r.Seckill && (r.DBOrders > 0 || r.DBFailed > 0) {
		r.problem(false, "database: %d orders of a voucher that is not a seckill voucher", r.DBOrders+r.DBFailed)
	}
	if db.aliases, err = s.inspectAliases(ctx, r); err != nil {
		return err
	}
	if out != nil {
		*out = db
	}
	return nil
}

// inspectAliases reads the voucher's aliases: the orders standing under another id than the
// one their user was told. They are facts, not problems: Redis lost state and the consumer
// kept the orders.
func (s *Service) inspectAliases(ctx context.Context, r *VoucherReport) (map[aliasKey]aliasRow, error) {
	aliases := map[aliasKey]aliasRow{}
	err := scanRows(ctx, s.db, "SELECT a.user_id, a.admitted_id, a.order_id, a.reason, o.status FROM tb_voucher_order_alias a"+
		" JOIN tb_voucher_order o ON o.id = a.order_id WHERE a.voucher_id = ? ORDER BY a.id", []any{r.VoucherID},
		func(rows *sql.Rows) error {
			var k aliasKey
			var a aliasRow
			var reason, status string
			err := rows.Scan(&k.user, &k.id, &a.to, &reason, &status)
			a.superseded, a.failed = reason == aliasSuperseded, status == string(seckillorder.StatusFAILED)
			aliases[k] = a
			if a.superseded {
				r.Superseded++
				return err
			}
			r.Rehomed++
			if len(r.RehomedOrders) < maxListed {
				r.RehomedOrders = append(r.RehomedOrders, RehomedOrder{User: k.user, Admitted: k.id, Order: a.to, Failed: a.failed})
			}
			return err
		})
	if err != nil {
		return nil, fmt.Errorf("reading the order aliases: %w", err)
	}
	if r.Rehomed > 0 {
		var ex []string
		for _, o := range r.RehomedOrders[:min(5, len(r.RehomedOrders))] {
			ex = append(ex, fmt.Sprintf("user %d: told %d, stored as %d", o.User, o.Admitted, o.Order))
		}
		r.note("%d orders re-homed under a fresh id: their id was another order's (Redis lost the id counter); their users find them under the id they were told; e.g. %s",
			r.Rehomed, strings.Join(ex, ", "))
	}
	if r.Superseded > 0 {
		r.note("%d orders admitted to users who already held one (Redis lost the buyers); the users keep their first order, which the later id leads to", r.Superseded)
	}
	return aliases, nil
}

// streamID is a stream entry id, ordered.
type streamID struct{ ms, seq uint64 }

func parseStreamID(s string) streamID {
	a, b, _ := strings.Cut(s, "-")
	ms, _ := strconv.ParseUint(a, 10, 64)
	seq, _ := strconv.ParseUint(b, 10, 64)
	return streamID{ms, seq}
}

func (a streamID) after(b streamID) bool { return a.ms > b.ms || (a.ms == b.ms && a.seq > b.seq) }

// replyError reports whether err is an error answered by Redis (a wrong type, no group), not
// a failure to talk to it.
func replyError(err error) bool {
	var re redis.Error
	return err != nil && !errors.Is(err, redis.Nil) && errors.As(err, &re)
}

// inspectRedis reads the voucher's keys and compares them with the database.
func (s *Service) inspectRedis(ctx context.Context, r *VoucherReport, db *dbOrders, o ReconcileOptions) error {
	k := s.keys(r.VoucherID)
	// One atomic snapshot of the small figures: a grab moves stock and stream together.
	var (
		meta  *redis.MapStringStringCmd
		stock *redis.StringCmd
		qlen  *redis.IntCmd
		tail  *redis.XMessageSliceCmd
		dead  *redis.IntCmd
		pend  *redis.XPendingCmd
	)
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		meta = p.HGetAll(ctx, k.Meta)
		stock = p.Get(ctx, k.Stock)
		qlen = p.XLen(ctx, k.Orders)
		tail = p.XRevRangeN(ctx, k.Orders, "+", "-", 1)
		dead = p.XLen(ctx, k.Dead)
		pend = p.XPending(ctx, k.Orders, s.opts.Group)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) && !replyError(err) {
		return fmt.Errorf("reading Redis: %w", err)
	}
	registered := true
	score, err := s.rdb.ZScore(ctx, s.registryKey(), strconv.Itoa(r.VoucherID)).Result()
	if errors.Is(err, redis.Nil) {
		registered = false
	} else if err != nil {
		return fmt.Errorf("reading the registry: %w", err)
	}
	r.Registered = registered

	m, err := meta.Result()
	if err != nil {
		r.problem(true, "meta %s unreadable: %v", k.Meta, err)
	}
	r.Ready = len(m) > 0
	switch n, err := stock.Int64(); {
	case errors.Is(err, redis.Nil):
	case err != nil:
		r.problem(true, "stock %s unreadable: %v", k.Stock, err)
	default:
		r.RedisStock = &n
	}
	if r.Queued, err = qlen.Result(); err != nil {
		r.problem(true, "orders stream %s unreadable: %v", k.Orders, err)
	}
	var snapLast streamID
	if msgs, err := tail.Result(); err == nil && len(msgs) > 0 {
		snapLast = parseStreamID(msgs[0].ID)
	}
	if r.DeadLetters, err = dead.Result(); err != nil {
		r.problem(true, "dead-letter stream %s unreadable: %v", k.Dead, err)
	}
	groupMissing := false
	if p, err := pend.Result(); err == nil {
		r.Pending = p.Count
	} else if strings.HasPrefix(err.Error(), "NOGROUP") {
		groupMissing = true
	} else {
		r.problem(true, "pending entries of %s unreadable: %v", k.Orders, err)
	}

	// The buyers, then the stream (in that order: a buyer the scan sees has its entry in the
	// stream already, since one script adds both).
	buyers := map[string]string{}
	var cursor uint64
	for {
		kv, next, err := s.rdb.HScan(ctx, k.Buyers, cursor, "", 1000).Result()
		if err != nil {
			if replyError(err) {
				r.problem(true, "buyers %s unreadable: %v", k.Buyers, err)
				break
			}
			return fmt.Errorf("scanning the buyers: %w", err)
		}
		for i := 0; i+1 < len(kv); i += 2 {
			buyers[kv[i]] = kv[i+1]
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	r.Buyers = len(buyers)

	type queued struct {
		order int64
		late  bool // admitted after the snapshot, during the check
	}
	stream := map[int]queued{} // user -> its last queued order
	var (
		unpersisted, persisted    int64
		superseding, twice, taken []string
		failedAgain, bad          int
	)
	start := "-"
	for {
		msgs, err := s.rdb.XRangeN(ctx, k.Orders, start, "+", 1000).Result()
		if err != nil {
			if replyError(err) {
				break // reported above from XLEN
			}
			return fmt.Errorf("reading the orders stream: %w", err)
		}
		for _, msg := range msgs {
			late := parseStreamID(msg.ID).after(snapLast)
			e, err := parseEntry(msg)
			if err != nil {
				if !late {
					bad++
					unpersisted++
				}
				continue
			}
			if prev, ok := stream[e.user]; ok && !late && !prev.late {
				twice = append(twice, fmt.Sprintf("user %d: orders %d and %d", e.user, prev.order, e.id))
			}
			stream[e.user] = queued{order: e.id, late: late}
			if late {
				continue
			}
			switch classify(e, r.VoucherID, db.rows, db.aliases).standing {
			case standsOwn, standsElsewhere:
				persisted++
			case standsFailed:
				failedAgain++
				unpersisted++
			case standsTaken:
				unpersisted++
				taken = append(taken, fmt.Sprintf("user %d: queued %d, an order of user %d", e.user, e.id, db.rows[e.id].user))
			default:
				unpersisted++
				if have, ok := db.live[e.user]; ok && have != e.id {
					superseding = append(superseding, fmt.Sprintf("user %d: queued %d, database %d", e.user, e.id, have))
				}
			}
		}
		if len(msgs) < 1000 {
			break
		}
		start = "(" + msgs[len(msgs)-1].ID
	}
	r.QueuedPersisted = int(persisted)

	// Stock.
	expected := int64(r.DBStock) - unpersisted
	if expected < 0 && r.DBStock >= 0 {
		r.problem(false, "%d orders queued but the database stock is %d: %d of them will fail (Redis admitted more than the database holds)",
			unpersisted, r.DBStock, -expected)
	}
	r.ExpectedStock = max(0, expected)

	// Expected buyers: the database's, with the stream's on top (as a rebuild does).
	want := make(map[int]queued, len(db.live)+len(stream))
	for u, id := range db.live {
		want[u] = queued{order: id}
	}
	for u, q := range stream {
		want[u] = q
	}
	r.ExpectedBuyers = len(want)

	now := s.opts.Clock()
	onSale := r.Seckill && r.Status == string(voucher.StatusACTIVE) && now.Before(*r.EndAt)
	holdsSomething := registered || r.RedisStock != nil || len(buyers) > 0 || r.Queued > 0
	switch {
	case !r.Seckill:
		if r.Ready || holdsSomething {
			r.problem(false, "Redis holds sale state (ready %v, registered %v, %d buyers, %d queued) for a voucher the database does not have as a seckill voucher",
				r.Ready, registered, len(buyers), r.Queued)
		} else {
			r.problem(false, "no seckill voucher %d in the database", r.VoucherID)
		}
		return nil
	case !r.Ready && (holdsSomething || onSale && r.DBOrders+r.DBFailed > 0):
		why := "Redis still holds part of its state"
		if !holdsSomething {
			why = "its sale is on and it has orders (Redis lost it)"
		}
		r.problem(true, "not ready: Redis has no sale state (meta %s missing) although %s; grabs answer NOT_READY until a rebuild", k.Meta, why)
	case !r.Ready && onSale:
		r.note("not warmed yet (no order, nothing in Redis): the first grab warms it, answering NOT_READY meanwhile")
	case !r.Ready:
		r.note("not in Redis (sale ended or voucher not active): nothing to compare; a grab would rebuild it")
	}
	if !r.Ready {
		return nil
	}
	if ready, current, err := s.saleState(ctx, r.VoucherID); err != nil {
		r.problem(true, "sale state unreadable: %v", err)
	} else if ready && !current {
		r.Stale = true
		r.problem(true, "Redis restarted or failed over since this voucher was last rebuilt: it may have come back with an older state (a replica that lagged, an AOF that lost its tail); the consumer rebuilds it within seconds")
	}

	// Meta, registry, stock.
	begin, end := strconv.FormatInt(r.BeginAt.UnixMilli(), 10), strconv.FormatInt(r.EndAt.UnixMilli(), 10)
	on := "0"
	if r.Status == string(voucher.StatusACTIVE) {
		on = "1"
	}
	if m["begin"] != begin || m["end"] != end || m["on"] != on {
		r.problem(true, "meta (begin %s, end %s, on %s) differs from the database (begin %s, end %s, on %s)",
			m["begin"], m["end"], m["on"], begin, end, on)
	}
	// The registry matters while orders can still come or wait: the consumer drops a voucher
	// Linger after its sale, once its stream is empty.
	if r.Queued > 0 || now.Before(*r.EndAt) {
		switch {
		case !registered:
			r.problem(true, "not registered in %s: no consumer reads its stream", s.registryKey())
		case int64(score) != r.EndAt.UnixMilli():
			r.problem(true, "registered with end %d, the database says %d: the consumer may stop reading too early or late",
				int64(score), r.EndAt.UnixMilli())
		}
	}
	switch {
	case r.RedisStock == nil:
		r.problem(true, "stock %s missing: grabs answer NOT_READY", k.Stock)
	case *r.RedisStock != r.ExpectedStock:
		r.problem(true, "Redis stock %d, expected %d (database %d - %d queued not yet in the database)",
			*r.RedisStock, r.ExpectedStock, r.DBStock, unpersisted)
	}

	// Buyers. Examples are kept up to a bound, then sorted so that reports are stable.
	var missing, extra, other []string
	keep := func(l *[]string, format string, args ...any) {
		if len(*l) < 1000 {
			*l = append(*l, fmt.Sprintf(format, args...))
		}
	}
	for u, w := range want {
		have, ok := buyers[strconv.Itoa(u)]
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
	for u, have := range buyers {
		id, err := strconv.Atoi(u)
		if _, ok := want[id]; err != nil || !ok {
			r.ExtraBuyers++
			keep(&extra, "user %s: order %s not in the database nor queued", u, have)
		}
	}
	if r.MissingBuyers+r.ExtraBuyers+r.MismatchedBuyers > 0 {
		for _, l := range [][]string{missing, extra, other} {
			sort.Strings(l)
			r.BuyerExamples = append(r.BuyerExamples, l[:min(o.Examples, len(l))]...)
		}
		r.problem(true, "buyers: %d missing, %d extra, %d with another order (Redis holds %d, expected %d: %d live orders in the database, %d queued users); e.g. %s",
			r.MissingBuyers, r.ExtraBuyers, r.MismatchedBuyers, len(buyers), len(want), len(db.live), len(stream), strings.Join(r.BuyerExamples, "; "))
	}

	// Facts that are not disagreements.
	if persisted > 0 {
		r.note("%d queued entries are already in the database (written, not acknowledged); the consumer settles them when it takes them again", persisted)
	}
	if len(superseding) > 0 {
		r.note("%d queued orders belong to users holding another order in the database; the consumer will supersede them (e.g. %s)",
			len(superseding), strings.Join(superseding[:min(o.Examples, len(superseding))], "; "))
	}
	if len(taken) > 0 {
		r.note("%d queued orders carry an id that is another order's (Redis lost the id counter); the consumer will re-home them under fresh ids (e.g. %s)",
			len(taken), strings.Join(taken[:min(o.Examples, len(taken))], "; "))
	}
	if len(twice) > 0 {
		r.note("%d users have two orders queued; the consumer keeps the first (e.g. %s)",
			len(twice), strings.Join(twice[:min(o.Examples, len(twice))], "; "))
	}
	if failedAgain > 0 {
		r.note("%d queued entries are FAILED in the database; the consumer will dead-letter them", failedAgain)
	}
	if bad > 0 {
		r.note("%d queued entries are unreadable; the consumer will dead-letter them", bad)
	}
	if groupMissing && r.Queued > 0 {
		r.note("consumer group %q missing on %s; the consumer recreates it", s.opts.Group, k.Orders)
	}
	if r.DeadLetters > 0 {
		r.note("%d orders in the dead-letter stream %s (FAILED, their admission compensated)", r.DeadLetters, k.Dead)
	}
	return nil
}
