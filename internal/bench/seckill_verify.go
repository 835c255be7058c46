package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/seckill"
)

// Verification is the invariant check after a seckill run.
type Verification struct {
	OK         bool     `json:"ok"`
	Skipped    string   `json:"skipped,omitempty"`
	Violations []string `json:"violations"`
	Notes      []string `json:"notes,omitempty"`

	DrainMS       float64 `json:"drain_ms"`    // waiting for the order stream to empty
	StreamLeft    int64   `json:"stream_left"` // orders still queued when the checks ran
	Admitted      int64   `json:"admitted_users"`
	Expected      int     `json:"expected_orders"` // min(stock, users)
	OrdersDB      int     `json:"orders_db"`       // live orders of the voucher in MySQL
	FailedDB      int     `json:"failed_orders_db"`
	StockDB       int     `json:"stock_db"`
	StockRedis    *int64  `json:"stock_redis,omitempty"`
	BuyersRedis   *int64  `json:"buyers_redis,omitempty"`
	InitialStock  int     `json:"initial_stock"`
	UnservedUsers int     `json:"unserved_users"` // users whose every attempt ended without a definitive answer
}

// verifyInput is what the load recorded, per user index.
type verifyInput struct {
	voucherID     int
	initial       int
	users         []int   // user ids
	orders        []int64 // the order id of the user's admitted answer, or 0
	already       []int64 // an order id an ALREADY_PURCHASED answer named, or 0
	served        []bool  // the user got a definitive answer (admitted, sold out, already purchased)
	outcomes      Outcomes
	dupAdmissions int64
	drainTimeout  time.Duration
	drained       *drainResult // the caller's wait for the stream to drain, if it waited
	buckets       int          // the voucher's stock buckets (0 or 1: its own keys)
}

// testHookAfterDrain, when set (by tests), runs after the stream drained and before the checks:
// it can tamper with the state to prove the checks fail.
var testHookAfterDrain func(ctx context.Context, db *sql.DB, rdb redis.UniversalClient, prefix string, voucherID int)

// drainResult is how waiting for a voucher's order stream to empty ended.
type drainResult struct {
	left int64 // entries still queued
	took time.Duration
	err  error
}

// waitDrained waits until the voucher's order stream is empty, at most timeout.
func waitDrained(ctx context.Context, st *stateAccess, voucherID, buckets int, timeout time.Duration) *drainResult {
	start := time.Now()
	deadline := start.Add(timeout)
	d := &drainResult{}
	for {
		var n int64
		var err error
		for b := range max(buckets, 1) {
			l, lerr := st.rdb.XLen(ctx, seckill.BucketKeysOf(st.prefix, voucherID, b, max(buckets, 1)).Orders).Result()
			if lerr != nil && !errors.Is(lerr, redis.Nil) {
				err = lerr
			}
			n += l
		}
		if err != nil {
			d.err = err
			break
		}
		d.left = n
		if n == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	d.took = time.Since(start)
	return d
}

// verify waits (bounded, unless the caller already did) for the voucher's order stream to
// drain, then checks the invariants in Redis and the database.
func verify(ctx context.Context, st *stateAccess, in verifyInput) Verification {
	v := Verification{InitialStock: in.initial, Violations: []string{}}
	bad := func(format string, args ...any) { v.Violations = append(v.Violations, fmt.Sprintf(format, args...)) }
	note := func(format string, args ...any) { v.Notes = append(v.Notes, fmt.Sprintf(format, args...)) }
	if st.lua {
		d := in.drained
		if d == nil {
			d = waitDrained(ctx, st, in.voucherID, in.buckets, in.drainTimeout)
		}
		v.StreamLeft, v.DrainMS = d.left, ms(d.took)
		if d.err != nil {
			bad("reading the order stream: %v", d.err)
		} else if v.StreamLeft > 0 {
			bad("the order stream did not drain within %v: %d orders still queued", in.drainTimeout, v.StreamLeft)
		}
	}
	if testHookAfterDrain != nil {
		testHookAfterDrain(ctx, st.db, st.rdb, st.prefix, in.voucherID)
	}

	// What the load saw.
	byUser := make(map[int]int, len(in.users)) // user id -> index
	for i, u := range in.users {
		byUser[u] = i
	}
	for i := range in.orders {
		if in.orders[i] != 0 {
			v.Admitted++
		}
		if i < len(in.served) && !in.served[i] {
			v.UnservedUsers++
		}
	}
	v.Expected = min(in.initial, len(in.users))
	if in.dupAdmissions > 0 {
		bad("%d admitted answers went to users already admitted (one order per user broken)", in.dupAdmissions)
	}

	// The database.
	type row struct {
		user   int
		status string
	}
	rows := map[int64]row{}
	q, err := st.db.QueryContext(ctx, "SELECT id, user_id, status FROM tb_voucher_order WHERE voucher_id = ?", in.voucherID)
	if err != nil {
		bad("reading orders: %v", err)
		return finish(v)
	}
	live := map[int]int{} // user -> live orders
	for q.Next() {
		var id int64
		var r row
		if err := q.Scan(&id, &r.user, &r.status); err != nil {
			q.Close()
			bad("reading orders: %v", err)
			return finish(v)
		}
		rows[id] = r
		if r.status == "FAILED" || r.status == "LOST" {
			v.FailedDB++
			continue
		}
		v.OrdersDB++
		live[r.user]++
	}
	q.Close()
	if err := q.Err(); err != nil {
		bad("reading orders: %v", err)
		return finish(v)
	}
	if err := st.db.QueryRowContext(ctx, "SELECT stock FROM vouchers WHERE id = ?", in.voucherID).Scan(&v.StockDB); err != nil {
		bad("reading the voucher's stock: %v", err)
		return finish(v)
	}

	// Orders = admitted answers (an errored call may hide an admission, so errors widen it).
	errs := int(in.outcomes.Errors)
	switch {
	case errs == 0 && v.OrdersDB != int(v.Admitted):
		bad("MySQL holds %d orders of the voucher, but %d users were told they were admitted", v.OrdersDB, v.Admitted)
	case errs > 0 && (v.OrdersDB < int(v.Admitted) || v.OrdersDB > int(v.Admitted)+errs):
		bad("MySQL holds %d orders, outside [admitted %d, admitted + errored calls %d]", v.OrdersDB, v.Admitted, int(v.Admitted)+errs)
	}
	if v.OrdersDB > in.initial {
		bad("oversold: %d orders for a stock of %d", v.OrdersDB, in.initial)
	}
	switch {
	case v.UnservedUsers == 0 && v.OrdersDB != v.Expected:
		bad("%d orders, want min(stock %d, users %d) = %d", v.OrdersDB, in.initial, len(in.users), v.Expected)
	case v.UnservedUsers > 0 && in.outcomes.SoldOut > 0 && v.OrdersDB != in.initial:
		bad("sold-out answers were given, but only %d of %d units were sold", v.OrdersDB, in.initial)
	case v.UnservedUsers > 0:
		note("%d users got no definitive answer (rate limited, not ready or errors): min(stock, users) is not checked", v.UnservedUsers)
	}
	dups := 0
	for _, n := range live {
		if n > 1 {
			dups++
		}
	}
	if dups > 0 {
		bad("%d users hold two or more live orders of the voucher", dups)
	}
	strangers := 0
	for _, r := range rows {
		if _, ok := byUser[r.user]; !ok {
			strangers++
		}
	}
	if strangers > 0 {
		bad("%d orders of the voucher belong to users this run did not create", strangers)
	}
	missing, wrongUser, failed, mismatched := 0, 0, 0, 0
	for i, id := range in.orders {
		if id == 0 {
			if a := in.already[i]; a != 0 {
				// The user's admitted answer was lost (an error); the order must still be theirs.
				if r, ok := rows[a]; !ok || r.user != in.users[i] {
					mismatched++
				}
			}
			continue
		}
		r, ok := rows[id]
		switch {
		case !ok:
			missing++
		case r.user != in.users[i]:
			wrongUser++
		case r.status == "FAILED" || r.status == "LOST":
			failed++
		}
		if a := in.already[i]; a != 0 && a != id {
			mismatched++
		}
	}
	if missing > 0 {
		bad("%d admitted orders are missing from MySQL", missing)
	}
	if wrongUser > 0 {
		bad("%d admitted orders are in MySQL under another user", wrongUser)
	}
	if failed > 0 {
		bad("%d admitted orders were given up on (FAILED, dead-lettered, or LOST with Redis's data)", failed)
	}
	if mismatched > 0 {
		bad("%d ALREADY_PURCHASED answers named an order that is not the user's", mismatched)
	}
	if v.StockDB+v.OrdersDB != in.initial {
		bad("MySQL stock %d + orders %d = %d, want the initial %d", v.StockDB, v.OrdersDB, v.StockDB+v.OrdersDB, in.initial)
	}

	// Redis (lua strategy).
	if !st.lua {
		note("sync strategy: no Redis state to check")
		return finish(v)
	}
	// Summed over the voucher's stock buckets (one: the voucher's own keys).
	var stock, buyers int64
	for b := range max(in.buckets, 1) {
		k := seckill.BucketKeysOf(st.prefix, in.voucherID, b, max(in.buckets, 1))
		n, err := st.rdb.Get(ctx, k.Stock).Int64()
		if err != nil {
			bad("reading the Redis stock %s: %v", k.Stock, err)
			return finish(v)
		}
		m, err := st.rdb.HLen(ctx, k.Buyers).Result()
		if err != nil {
			bad("reading the Redis buyers %s: %v", k.Buyers, err)
			return finish(v)
		}
		stock, buyers = stock+n, buyers+m
	}
	v.StockRedis, v.BuyersRedis = &stock, &buyers
	if stock+buyers != int64(in.initial) {
		bad("Redis stock %d + buyers %d = %d, want the initial %d", stock, buyers, stock+buyers, in.initial)
	}
	if buyers != int64(v.OrdersDB) {
		bad("Redis holds %d buyers, MySQL %d orders", buyers, v.OrdersDB)
	}
	if stock != int64(v.StockDB) {
		bad("Redis stock %d, MySQL stock %d (nothing is queued any more)", stock, v.StockDB)
	}
	return finish(v)
}

func finish(v Verification) Verification {
	v.OK = len(v.Violations) == 0
	return v
}

func printVerification(out *output, v Verification) {
	switch {
	case v.Skipped != "":
		out.printf("  verification skipped: %s\n", v.Skipped)
		return
	case v.OK:
		out.printf("  verification OK (stream drained in %.0f ms): %d orders = admitted %d (min(stock, users) = %d), MySQL stock %d + orders = %d",
			v.DrainMS, v.OrdersDB, v.Admitted, v.Expected, v.StockDB, v.InitialStock)
		if v.StockRedis != nil {
			out.printf(", Redis stock %d + buyers %d = %d", *v.StockRedis, *v.BuyersRedis, v.InitialStock)
		}
		out.printf(", no duplicates\n")
	default:
		out.printf("  VERIFICATION FAILED:\n")
		for _, s := range v.Violations {
			out.printf("    - %s\n", s)
		}
	}
	for _, s := range v.Notes {
		out.printf("  note: %s\n", s)
	}
}
