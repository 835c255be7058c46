package seckill

import (
	"context"
	"time"

	"github.com/surgekit/surge/ent"
	"github.com/surgekit/surge/ent/voucher"
	"github.com/surgekit/surge/lua"
)

// orderStore is where sales and orders live in the database. Each part of the service sees
// only the methods it uses; sqlStore (store_sql.go, store_read.go) is the one implementation
// and the only code of the package that knows SQL, tables or the dialect.
type orderStore interface {
	admissionStore
	batchStore
	recoveryStore
	orderReader
	reconcileStore
	toldStore
}

// admissionStore serves the admission part (admission.go, sync.go).
type admissionStore interface {
	// isSeckill reports whether a seckill voucher of this id exists.
	isSeckill(ctx context.Context, voucherID int) (bool, error)
	// buyNow is a whole grab of StrategySync in one transaction (see sync.go).
	buyNow(ctx context.Context, userID, voucherID int, now time.Time) (Admission, error)
}

// batchStore serves the order consumer (consumer.go, persist.go, claim.go).
type batchStore interface {
	// guardCommits returns what a batch commit must run under besides its transaction, and a
	// release: nothing where the voucher's row lock serialises commits with rebuilds; the
	// voucher's Redis lock where the database has no row locks.
	guardCommits(ctx context.Context, voucherID int) (context.Context, func(), error)
	// writeGang persists several vouchers' batches in one transaction when none needs more
	// than an insert and its stock update (else errGangSplit); mine vetoes the commit as
	// writeBatch's does, for every batch. Any failure writes nothing. Only where canGang.
	writeGang(ctx context.Context, batches []gangBatch, mine func(context.Context) error) ([]settlement, error)
	canGang() bool
	// writeBatch persists orders of one voucher in one transaction and reports how each
	// stands; mine, called under the voucher's row lock before the commit, vetoes it (the
	// entries stopped being this consumer's).
	writeBatch(ctx context.Context, voucherID int, orders []order, mine func(context.Context) error) (settlement, error)
	// recordFailed records an order given up on as FAILED unless it stands already, and
	// returns how it stood.
	recordFailed(ctx context.Context, voucherID int, o order) (trace, error)
	// recordLost records FAILED the orders whose entries Redis lost (gone reports, under the
	// voucher's row lock, which are still gone), and returns how many it recorded.
	recordLost(ctx context.Context, voucherID int, orders []order, gone func(context.Context) ([]bool, error)) (int, error)
	// ping tells whether the database answers.
	ping(ctx context.Context) error
}

// recoveryStore serves warm, rebuild and reconcile (recovery.go, reconcile*.go).
type recoveryStore interface {
	// sale reads a seckill voucher's sale; ErrNoSuchVoucher if there is none.
	sale(ctx context.Context, voucherID int) (sale, error)
	// vouchersOnSale lists the active seckill vouchers whose sale has not ended at now.
	vouchersOnSale(ctx context.Context, now time.Time) ([]int, error)
	// holdVoucher takes the voucher's row lock until release, where the database has row
	// locks: no batch commits meanwhile. Reads under the lock go through held, which runs on
	// the lock's own connection: the batches waiting on the lock may hold every other
	// connection of the pool, and would wait for it until the database's lock wait timeout.
	holdVoucher(ctx context.Context, voucherID int) (held orderStore, release func(), err error)
	// trace tells how each order of a voucher stands in the database.
	trace(ctx context.Context, voucherID int, orders []order) ([]trace, error)
	// maxOrderID is the largest order id the database knows as issued (orders and aliases).
	maxOrderID(ctx context.Context) (int64, error)
	// buyers lists a page of a voucher's live orders with ids above after, by id.
	buyers(ctx context.Context, voucherID int, after int64, limit int) ([]lua.Buyer, error)
}

// orderReader serves the status reads (status.go).
type orderReader interface {
	// savedOrder is the user's order under orderID, or the one an alias from it leads to.
	savedOrder(ctx context.Context, userID int, orderID int64) (*ent.SeckillOrder, error)
	// issued reports whether the database holds the order id as any user's order or alias.
	issued(ctx context.Context, orderID int64) (bool, error)
	// unsaved keeps the user's order ids that the database holds neither as rows nor aliases.
	unsaved(ctx context.Context, userID int, orderIDs []int) ([]int, error)
	// queued builds the API's view of a user's queued orders (order id -> voucher id), in the
	// order of ids, their voucher and user edges loaded.
	queued(ctx context.Context, userID int, ids []int, voucherOf map[int]int) ([]*ent.SeckillOrder, error)
	// stock is a voucher's database stock.
	stock(ctx context.Context, voucherID int) (int, error)
}

// reconcileStore serves reconcile's view of the database (reconcile_db.go).
type reconcileStore interface {
	// vouchersEndingAfter lists the seckill vouchers whose sale ends after t.
	vouchersEndingAfter(ctx context.Context, t time.Time) ([]int, error)
	// eachOrder calls fn for every order of a voucher, by id.
	eachOrder(ctx context.Context, voucherID int, fn func(orderRecord)) error
	// aliases lists a voucher's aliases (orders standing under another id than the one their
	// user was told), oldest first.
	aliases(ctx context.Context, voucherID int) ([]aliasRecord, error)
}

// sale is a seckill voucher's sale as the database has it.
type sale struct {
	status     voucher.Status
	stock      int
	begin, end time.Time
	buckets    int // stock buckets (buckets.go); 1: none
}

// on reports whether the voucher is on sale (ACTIVE), whatever the window says.
func (s sale) on() bool { return s.status == voucher.StatusACTIVE }

// refusalAt is the refusal the sale's window and status give a grab at now, or nil: the
// rule seckill_grab.lua applies in Redis, for StrategySync.
func (s sale) refusalAt(now time.Time) error {
	switch {
	case !s.on() || !now.Before(s.end):
		return ErrEnded
	case now.Before(s.begin):
		return ErrNotStarted
	}
	return nil
}

// script is the sale as lua.WarmCommit sets it.
func (s sale) script() lua.Sale {
	return lua.Sale{Begin: s.begin, End: s.end, On: s.on(), Stock: int64(s.stock)}
}

// orderRecord is one order row as reconcile reads it.
type orderRecord struct {
	id     int64
	user   int
	failed bool // FAILED or LOST: holds no slot
	lost   bool // LOST
	slot   bool // holds the user's one live order of the voucher
}

// aliasRecord is one alias as reconcile reads it.
type aliasRecord struct {
	from aliasKey
	to   aliasRow
}
