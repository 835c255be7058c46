package seckill

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
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
	DBOrders int `json:"db_orders"` // live orders (status other than FAILED or LOST)
	DBFailed int `json:"db_failed"` // FAILED and LOST orders (they hold no slot and no stock)
	// DBLost counts the LOST orders among DBFailed: orders their users were told that Redis
	// lost before they were written (LostIDs lists the first of them).
	DBLost  int     `json:"db_lost"`
	LostIDs []int64 `json:"lost_ids,omitempty"`

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

// reconciler is Service.Reconcile: it checks each voucher under its lock, in one pass over the
// database (reconcile_db.go) and one over Redis (reconcile_redis.go), and fixes by a rebuild.
type reconciler struct {
	strategy Strategy
	rdb      redis.UniversalClient
	keys     keyspace
	store    interface {
		recoveryStore
		reconcileStore
	}
	locks voucherLocks
	group string
	clock func() time.Time
	log   *slog.Logger
	// rebuild rebuilds a voucher's sale state; the caller holds its lock (recovery.warmLocked).
	rebuild func(ctx context.Context, voucherID int) error
}

func (rc *reconciler) reconcile(ctx context.Context, o ReconcileOptions) ([]VoucherReport, error) {
	if o.EndedWithin <= 0 {
		o.EndedWithin = 24 * time.Hour
	}
	if o.Examples <= 0 {
		o.Examples = 5
	}
	ids := o.VoucherIDs
	if len(ids) == 0 {
		var err error
		if ids, err = rc.candidates(ctx, o.EndedWithin); err != nil {
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
		r, err := rc.one(ctx, id, o)
		if err != nil {
			return reports, fmt.Errorf("seckill: reconciling voucher %d: %w", id, err)
		}
		reports = append(reports, r)
	}
	return reports, nil
}

// candidates lists the seckill vouchers whose sale ended less than within ago (or is on, or
// is to come) and the vouchers registered in Redis.
func (rc *reconciler) candidates(ctx context.Context, within time.Duration) ([]int, error) {
	ids, err := rc.store.vouchersEndingAfter(ctx, rc.clock().Add(-within))
	if err != nil {
		return nil, fmt.Errorf("seckill: listing vouchers to reconcile: %w", err)
	}
	if rc.strategy != StrategySync {
		members, err := rc.rdb.ZRange(ctx, rc.keys.registry(), 0, -1).Result()
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

// one checks (and fixes) one voucher.
func (rc *reconciler) one(ctx context.Context, id int, o ReconcileOptions) (VoucherReport, error) {
	if rc.strategy == StrategySync {
		return rc.databaseOnly(ctx, id)
	}
	l, err := rc.locks.lock(ctx, id)
	if err != nil {
		return VoucherReport{VoucherID: id}, err
	}
	defer l.Release(context.WithoutCancel(ctx))
	lctx, done := holding(ctx, l) // ends with ctx too: its deadline bounds the check
	defer done()
	lost := l.Context()
	r, err := rc.inspectHeld(lctx, id, o, lost)
	if err != nil || !o.Fix || r.OK() || !r.fixable {
		r.finish()
		return r, err
	}
	return rc.fix(ctx, lctx, r, o, lost)
}

// databaseOnly is the report of StrategySync, which keeps no sale state in Redis.
func (rc *reconciler) databaseOnly(ctx context.Context, id int) (VoucherReport, error) {
	r := VoucherReport{VoucherID: id}
	if err := rc.inspectDB(ctx, &r, nil); err != nil {
		return r, err
	}
	if !r.Seckill {
		r.problem(false, "no seckill voucher %d in the database", id)
	}
	r.note("strategy sync: Redis holds no sale state, only the database figures are reported")
	r.finish()
	return r, nil
}

// fix rebuilds a voucher whose Redis state disagrees with the database, holding its lock
// (lctx), and checks it again. The rebuild first settles the entries already in the
// database, as the consumer would on redelivery, so that it does not count them as queued.
func (rc *reconciler) fix(ctx, lctx context.Context, r VoucherReport, o ReconcileOptions, lost context.Context) (VoucherReport, error) {
	found := r.Problems
	fixErr := rc.rebuild(lctx, r.VoucherID)
	if lost.Err() != nil {
		return r, fmt.Errorf("lock on the voucher lost during the fix: %w", context.Cause(lost))
	}
	if err := ctx.Err(); err != nil {
		return r, err
	}
	r2, err := rc.inspectHeld(lctx, r.VoucherID, o, lost)
	r2.Found = found
	if fixErr != nil {
		r2.FixError = fixErr.Error()
	}
	r2.Fixed = fixErr == nil && r2.OK()
	r2.finish()
	if r2.Fixed {
		rc.log.Info("voucher reconciled: Redis rebuilt from the database", "voucher", r.VoucherID, "problems", strings.Join(found, "; "))
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
