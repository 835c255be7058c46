// Package catalog holds the rules for shops, shop types and vouchers: validation that gives
// clear errors before anything is written, and the reads the API serves.
package catalog

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/surgekit/surge/cache"
	"github.com/surgekit/surge/ent"
	"github.com/surgekit/surge/ent/shop"
	"github.com/surgekit/surge/ent/shoptype"
	"github.com/surgekit/surge/ent/voucher"
	"github.com/surgekit/surge/internal/apperr"
	"github.com/surgekit/surge/internal/store"
)

// Shop returns a shop, or (nil, nil) when there is none. It is read in mutex mode behind the
// shop Bloom filter: one database read per key across all servers on a miss, and ids that
// never existed answered without touching Redis keys or the database. A load serves every
// caller of its key: it draws on no request's database time (store.WithoutBudget).
func (s *Service) Shop(ctx context.Context, id int) (*ent.Shop, error) {
	sh, err := s.shops.GetOrLoad(ctx, strconv.Itoa(id), func(ctx context.Context, _ string) (*ent.Shop, error) {
		sh, err := s.db.Shop.Get(store.WithoutBudget(ctx), id) // a load by key, shared by its callers
		if ent.IsNotFound(err) {
			return nil, cache.ErrNotFound
		}
		return sh, err
	})
	if errors.Is(err, cache.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return s.db.Shop.Attach(sh), nil
}

// Shops returns the shops of ids that exist, by id, like Shop does for one: the cached ones in
// one Redis round trip, the misses loaded with one database query (absent ids stay out of
// the map, and the Bloom filter keeps never-existing ones from the database).
func (s *Service) Shops(ctx context.Context, ids []int) (map[int]*ent.Shop, error) {
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = strconv.Itoa(id)
	}
	cached, err := s.shops.LoadMany(ctx, keys, func(ctx context.Context, keys []string) (map[string]*ent.Shop, error) {
		missing, err := atoiAll(keys)
		if err != nil {
			return nil, err
		}
		shops, err := s.db.Shop.Query().Where(shop.IDIn(missing...)).All(store.WithoutBudget(ctx))
		out := make(map[string]*ent.Shop, len(shops))
		for _, sh := range shops {
			out[strconv.Itoa(sh.ID)] = sh
		}
		return out, err
	})
	if err != nil {
		return nil, err
	}
	out := make(map[int]*ent.Shop, len(cached))
	for _, sh := range cached {
		out[sh.ID] = s.db.Shop.Attach(sh)
	}
	return out, nil
}

func atoiAll(keys []string) ([]int, error) {
	out := make([]int, len(keys))
	for i, k := range keys {
		var err error
		if out[i], err = strconv.Atoi(k); err != nil {
			return nil, fmt.Errorf("catalog: shop key %q: %w", k, err)
		}
	}
	return out, nil
}

// Vouchers returns the vouchers of ids that exist, by id, in one query.
func (s *Service) Vouchers(ctx context.Context, ids []int) (map[int]*ent.Voucher, error) {
	vs, err := s.db.Voucher.Query().Where(voucher.IDIn(ids...)).All(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[int]*ent.Voucher, len(vs))
	for _, v := range vs {
		out[v.ID] = v
	}
	return out, nil
}

// ShopTypes lists every shop type in display order. The list is kept in logical expiry mode:
// it never disappears from Redis, and a stale list is served while one background rebuild
// refreshes it.
func (s *Service) ShopTypes(ctx context.Context) ([]*ent.ShopType, error) {
	types, err := s.shopTypes.GetOrLoad(ctx, shopTypesKey, func(ctx context.Context, _ string) ([]*ent.ShopType, error) {
		return s.db.ShopType.Query().Order(ent.Asc(shoptype.FieldSort), ent.Asc(shoptype.FieldID)).All(store.WithoutBudget(ctx))
	})
	for _, t := range types {
		s.db.ShopType.Attach(t)
	}
	return types, err
}

// Voucher returns a voucher, or (nil, nil) when there is none.
func (s *Service) Voucher(ctx context.Context, id int) (*ent.Voucher, error) {
	v, err := s.db.Voucher.Get(ctx, id)
	if ent.IsNotFound(err) {
		return nil, nil
	}
	return v, err
}

// ShopVouchers lists the active vouchers of a shop; an unknown shop is NOT_FOUND.
func (s *Service) ShopVouchers(ctx context.Context, shopID int) ([]*ent.Voucher, error) {
	ok, err := s.db.Shop.Query().Where(shop.ID(shopID)).Exist(ctx)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, apperr.New(apperr.NotFound, "shop %d not found", shopID)
	}
	return s.db.Voucher.Query().
		Where(voucher.ShopID(shopID), voucher.StatusEQ(voucher.StatusACTIVE)).
		Order(ent.Asc(voucher.FieldID)).All(ctx)
}

// CreateShop validates and inserts a shop.
func (s *Service) CreateShop(ctx context.Context, in ent.CreateShopInput) (*ent.Shop, error) {
	if err := trimName(&in.Name); err != nil {
		return nil, err
	}
	if err := firstErr(plainText("name", &in.Name), plainText("area", in.Area), plainText("address", in.Address),
		plainText("openHours", in.OpenHours), plainTexts("images", in.Images)); err != nil {
		return nil, err
	}
	if err := s.checkShopType(ctx, in.TypeID); err != nil {
		return nil, err
	}
	tx, err := s.db.Tx(ctx)
	if err != nil {
		return nil, FromEnt(err)
	}
	sh, err := tx.Shop.Create().SetInput(in).Save(ctx)
	if err != nil {
		_ = tx.Rollback()
		return nil, FromEnt(err)
	}
	// The insert's id is known inside the transaction; the commit is the write that creates
	// the row, run through the cache's create path: the id enters the Bloom filter before the
	// commit and any cached absence of it goes after, in every server, crash-safe.
	if err := s.invalidate(ctx, sh.ID, func(context.Context) error { return tx.Commit() }, cache.Created); err != nil {
		_ = tx.Rollback()
		return nil, FromEnt(err)
	}
	return sh.Unwrap(), nil
}

// invalidate runs a shop write through the cache's delete-after-write (see writeThrough).
func (s *Service) invalidate(ctx context.Context, id int, write func(context.Context) error, opts ...cache.InvalidateOption) error {
	return writeThrough(ctx, s, s.shops, strconv.Itoa(id), write, opts...)
}

// writeThrough runs a write through c's delete-after-write. The database is the source of
// truth, so a write runs even while Redis is down (WriteUnrecorded), and one whose cache
// delete is still pending has succeeded: the cache retries the delete until Redis is back
// (logged, and counted in surge_cache_invalidations_pending).
func writeThrough[V any](ctx context.Context, s *Service, c *cache.Cache[V], key string, write func(context.Context) error, opts ...cache.InvalidateOption) error {
	err := c.Invalidate(ctx, key, write, append(opts, cache.WriteUnrecorded)...)
	if errors.Is(err, cache.ErrInvalidationPending) {
		s.log.Warn("written; the cache entry is deleted once Redis answers", "key", key, "err", err)
		return nil
	}
	return err
}

// UpdateShop validates and applies a partial update; an unknown shop is NOT_FOUND.
func (s *Service) UpdateShop(ctx context.Context, id int, in ent.UpdateShopInput) (*ent.Shop, error) {
	if err := trimName(in.Name); err != nil {
		return nil, err
	}
	if err := firstErr(plainText("name", in.Name), plainText("area", in.Area), plainText("address", in.Address),
		plainText("openHours", in.OpenHours), plainTexts("images", in.Images), plainTexts("appendImages", in.AppendImages)); err != nil {
		return nil, err
	}
	if in.TypeID != nil {
		if err := s.checkShopType(ctx, *in.TypeID); err != nil {
			return nil, err
		}
	}
	var sh *ent.Shop
	update := func(ctx context.Context) (err error) {
		sh, err = s.db.Shop.UpdateOneID(id).SetInput(in).Save(ctx)
		return err
	}
	// Delete-after-write, crash-safe: the cache entry goes even if this process dies between
	// the update and the delete.
	err := s.invalidate(ctx, id, update)
	if ent.IsNotFound(err) {
		return nil, apperr.New(apperr.NotFound, "shop %d not found", id)
	}
	if err != nil {
		return nil, FromEnt(err)
	}
	return sh, nil
}

// shopTypesKey is the one entry of the shop types cache: the whole list.
const shopTypesKey = "all"

// CreateShopType validates and inserts a shop type; the cached list follows at once.
func (s *Service) CreateShopType(ctx context.Context, in ent.CreateShopTypeInput) (*ent.ShopType, error) {
	if err := trimName(&in.Name); err != nil {
		return nil, err
	}
	if err := firstErr(plainText("name", &in.Name), plainText("icon", in.Icon)); err != nil {
		return nil, err
	}
	var st *ent.ShopType
	err := writeThrough(ctx, s, s.shopTypes, shopTypesKey, func(ctx context.Context) (err error) {
		st, err = s.db.ShopType.Create().SetInput(in).Save(ctx)
		return err
	})
	if err != nil {
		return nil, FromEnt(err)
	}
	return st, nil
}

// UpdateShopType validates and applies a partial update; an unknown type is NOT_FOUND. The
// cached list follows at once.
func (s *Service) UpdateShopType(ctx context.Context, id int, in ent.UpdateShopTypeInput) (*ent.ShopType, error) {
	if err := trimName(in.Name); err != nil {
		return nil, err
	}
	if err := firstErr(plainText("name", in.Name), plainText("icon", in.Icon)); err != nil {
		return nil, err
	}
	var st *ent.ShopType
	err := writeThrough(ctx, s, s.shopTypes, shopTypesKey, func(ctx context.Context) (err error) {
		st, err = s.db.ShopType.UpdateOneID(id).SetInput(in).Save(ctx)
		return err
	})
	if ent.IsNotFound(err) {
		return nil, apperr.New(apperr.NotFound, "shop type %d not found", id)
	}
	if err != nil {
		return nil, FromEnt(err)
	}
	return st, nil
}

// trimName trims a shop's or shop type's name in place (nil: not being changed) and refuses
// one left empty.
func trimName(name *string) error {
	if name == nil {
		return nil
	}
	if *name = strings.TrimSpace(*name); *name == "" {
		return apperr.Invalid("name", "name must not be empty")
	}
	return nil
}

func (s *Service) checkShopType(ctx context.Context, id int) error {
	ok, err := s.db.ShopType.Query().Where(shoptype.ID(id)).Exist(ctx)
	if err != nil {
		return err
	}
	if !ok {
		return apperr.Invalid("typeID", "shop type %d does not exist", id)
	}
	return nil
}

// VoucherInput is what createVoucher accepts. Money is in cents.
type VoucherInput struct {
	ShopID      int
	Title       string
	Subtitle    string
	Rules       string
	PayValue    int64
	ActualValue int64
	Kind        voucher.Kind
	Status      voucher.Status
	Stock       *int
	BeginAt     *time.Time
	EndAt       *time.Time
	Buckets     *int // SECKILL only: stock buckets, 1..MaxBuckets (nil: 1)
}

// MaxBuckets bounds a seckill voucher's stock buckets (the ent schema's range).
const MaxBuckets = 64

// validBuckets checks a bucket count.
func validBuckets(n *int) error {
	if n != nil && (*n < 1 || *n > MaxBuckets) {
		return apperr.Invalid("buckets", "buckets must be in 1..%d, got %d", MaxBuckets, *n)
	}
	return nil
}

// MaxStock bounds a seckill stock to something a sale can plausibly hold.
const MaxStock = 100_000_000

// Validate checks the input without touching the database.
func (in *VoucherInput) Validate() error {
	in.Title = strings.TrimSpace(in.Title)
	switch {
	case in.Title == "":
		return apperr.Invalid("title", "title must not be empty")
	case in.PayValue < 0:
		return apperr.Invalid("payValue", "payValue must be >= 0 (cents)")
	case in.ActualValue < 0:
		return apperr.Invalid("actualValue", "actualValue must be >= 0 (cents)")
	}
	if err := firstErr(plainText("title", &in.Title), plainText("subtitle", &in.Subtitle), ruleText(&in.Rules),
		checkPrice("payValue", in.PayValue, in.ActualValue)); err != nil {
		return err
	}
	if in.Status == "" {
		in.Status = voucher.StatusACTIVE
	}
	if err := voucher.StatusValidator(in.Status); err != nil {
		return apperr.Invalid("status", "invalid status %q", in.Status)
	}
	switch in.Kind {
	case voucher.KindNORMAL:
		if in.Stock != nil || in.BeginAt != nil || in.EndAt != nil || in.Buckets != nil {
			return apperr.Invalid("kind", "a NORMAL voucher takes no stock, beginAt, endAt or buckets")
		}
	case voucher.KindSECKILL:
		switch {
		case in.Stock == nil:
			return apperr.Invalid("stock", "a SECKILL voucher needs a stock")
		case *in.Stock < 0:
			return apperr.Invalid("stock", "stock must be >= 0, got %d", *in.Stock)
		case *in.Stock > MaxStock:
			return apperr.Invalid("stock", "stock must be <= %d", MaxStock)
		case in.BeginAt == nil || in.EndAt == nil:
			return apperr.Invalid("beginAt", "a SECKILL voucher needs beginAt and endAt")
		case !in.BeginAt.Before(*in.EndAt):
			return apperr.Invalid("endAt", "endAt must be after beginAt")
		}
		if err := validBuckets(in.Buckets); err != nil {
			return err
		}
	default:
		return apperr.Invalid("kind", "invalid kind %q", in.Kind)
	}
	return nil
}

// CreateVoucher validates and inserts a voucher.
func (s *Service) CreateVoucher(ctx context.Context, in VoucherInput) (*ent.Voucher, error) {
	if err := in.Validate(); err != nil {
		return nil, err
	}
	ok, err := s.db.Shop.Query().Where(shop.ID(in.ShopID)).Exist(ctx)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, apperr.Invalid("shopID", "shop %d does not exist", in.ShopID)
	}
	v, err := s.db.Voucher.Create().
		SetShopID(in.ShopID).SetTitle(in.Title).SetSubtitle(in.Subtitle).SetRules(in.Rules).
		SetPayValue(in.PayValue).SetActualValue(in.ActualValue).
		SetKind(in.Kind).SetStatus(in.Status).
		SetNillableStock(in.Stock).SetNillableBeginAt(in.BeginAt).SetNillableEndAt(in.EndAt).
		SetNillableBuckets(in.Buckets).
		Save(ctx)
	return v, FromEnt(err)
}

// VoucherUpdate is what updateVoucher accepts: nil fields stay as they are. Money is in cents.
// The kind of a voucher never changes.
type VoucherUpdate struct {
	Title       *string
	Subtitle    *string
	Rules       *string
	PayValue    *int64
	ActualValue *int64
	Status      *voucher.Status
	Stock       *int
	// AddStock adds units to the current stock in one statement (stock = stock + n), so that
	// units the order consumer takes meanwhile are not lost, as with a read of the stock
	// followed by Stock. At least 1; not with Stock.
	AddStock *int
	BeginAt  *time.Time
	EndAt    *time.Time
	// Buckets changes a SECKILL voucher's stock buckets, only before its sale begins (a user's
	// bucket follows from the count).
	Buckets *int
}

// Validate checks the update against the voucher it changes, with the rules of VoucherInput
// applied to the result: a NORMAL voucher takes no stock or window; a SECKILL one keeps a
// stock in 0..MaxStock and beginAt before endAt. It trims the title.
func (u *VoucherUpdate) Validate(cur *ent.Voucher) error {
	if u.Title != nil {
		title := strings.TrimSpace(*u.Title)
		if title == "" {
			return apperr.Invalid("title", "title must not be empty")
		}
		u.Title = &title
	}
	switch {
	case u.PayValue != nil && *u.PayValue < 0:
		return apperr.Invalid("payValue", "payValue must be >= 0 (cents)")
	case u.ActualValue != nil && *u.ActualValue < 0:
		return apperr.Invalid("actualValue", "actualValue must be >= 0 (cents)")
	}
	if err := firstErr(plainText("title", u.Title), plainText("subtitle", u.Subtitle), ruleText(u.Rules), u.checkPrice(cur)); err != nil {
		return err
	}
	if u.Status != nil {
		if err := voucher.StatusValidator(*u.Status); err != nil {
			return apperr.Invalid("status", "invalid status %q", *u.Status)
		}
	}
	if cur.Kind != voucher.KindSECKILL {
		var field string
		switch {
		case u.Stock != nil:
			field = "stock"
		case u.AddStock != nil:
			field = "addStock"
		case u.BeginAt != nil:
			field = "beginAt"
		case u.EndAt != nil:
			field = "endAt"
		case u.Buckets != nil:
			field = "buckets"
		default:
			return nil
		}
		return apperr.Invalid(field, "a NORMAL voucher takes no stock, beginAt, endAt or buckets")
	}
	if err := validBuckets(u.Buckets); err != nil {
		return err
	}
	if u.Buckets != nil && *u.Buckets != cur.Buckets && cur.BeginAt != nil && !time.Now().Before(*cur.BeginAt) {
		return apperr.Invalid("buckets", "the sale began at %s: its buckets can no longer change", cur.BeginAt.UTC().Format(time.RFC3339))
	}
	switch {
	case u.Stock != nil && *u.Stock < 0:
		return apperr.Invalid("stock", "stock must be >= 0, got %d", *u.Stock)
	case u.Stock != nil && *u.Stock > MaxStock:
		return apperr.Invalid("stock", "stock must be <= %d", MaxStock)
	case u.AddStock != nil && u.Stock != nil:
		return apperr.Invalid("addStock", "give stock (the units left) or addStock (units to add), not both")
	case u.AddStock != nil && *u.AddStock < 1:
		return apperr.Invalid("addStock", "addStock must be >= 1, got %d", *u.AddStock)
	case u.AddStock != nil && cur.Stock != nil && *cur.Stock > MaxStock-*u.AddStock:
		return apperr.Invalid("addStock", "the stock would exceed %d", MaxStock)
	}
	begin, end := cur.BeginAt, cur.EndAt
	if u.BeginAt != nil {
		begin = u.BeginAt
	}
	if u.EndAt != nil {
		end = u.EndAt
	}
	field := "endAt"
	if u.EndAt == nil {
		field = "beginAt"
	}
	switch {
	case begin == nil || end == nil:
		return apperr.Invalid(field, "a SECKILL voucher needs beginAt and endAt")
	case !begin.Before(*end):
		if field == "beginAt" {
			return apperr.Invalid(field, "beginAt must be before endAt (%s)", end.UTC().Format(time.RFC3339))
		}
		return apperr.Invalid(field, "endAt must be after beginAt (%s)", begin.UTC().Format(time.RFC3339))
	}
	return nil
}

// checkPrice applies checkPrice to the prices the update leaves, when it changes one (a
// voucher stored before the rule keeps its other fields editable).
func (u *VoucherUpdate) checkPrice(cur *ent.Voucher) error {
	if u.PayValue == nil && u.ActualValue == nil {
		return nil
	}
	pay, actual, field := cur.PayValue, cur.ActualValue, "actualValue"
	if u.ActualValue != nil {
		actual = *u.ActualValue
	}
	if u.PayValue != nil {
		pay, field = *u.PayValue, "payValue"
	}
	return checkPrice(field, pay, actual)
}

// UpdateVoucher validates and applies a partial update of a voucher; an unknown voucher is
// NOT_FOUND, invalid input BAD_USER_INPUT with nothing written. A seckill voucher's sale state
// in Redis is not touched here: run the update under seckill's Service.Guard, which holds the
// voucher's lock across the write and brings Redis in line after it.
func (s *Service) UpdateVoucher(ctx context.Context, id int, in VoucherUpdate) (*ent.Voucher, error) {
	cur, err := s.db.Voucher.Get(ctx, id)
	if ent.IsNotFound(err) {
		return nil, apperr.New(apperr.NotFound, "voucher %d not found", id)
	}
	if err != nil {
		return nil, err
	}
	if err := in.Validate(cur); err != nil {
		return nil, err
	}
	update := s.db.Voucher.UpdateOneID(id).
		SetNillableTitle(in.Title).SetNillableSubtitle(in.Subtitle).SetNillableRules(in.Rules).
		SetNillablePayValue(in.PayValue).SetNillableActualValue(in.ActualValue).
		SetNillableStatus(in.Status).
		SetNillableStock(in.Stock).SetNillableBeginAt(in.BeginAt).SetNillableEndAt(in.EndAt).
		SetNillableBuckets(in.Buckets)
	if in.AddStock != nil {
		// One statement: the consumer's "stock = stock - n" can land before or after it, never
		// in between. The limit is checked again in it (Validate read the stock earlier).
		update.AddStock(*in.AddStock).Where(voucher.StockLTE(MaxStock - *in.AddStock))
	}
	v, err := update.Save(ctx)
	switch {
	case ent.IsNotFound(err) && in.AddStock != nil:
		return nil, apperr.Invalid("addStock", "the stock would exceed %d", MaxStock)
	case ent.IsNotFound(err):
		return nil, apperr.New(apperr.NotFound, "voucher %d not found", id)
	}
	return v, FromEnt(err)
}

// FromEnt turns ent's validation and constraint errors into client errors that do not leak
// SQL; other errors pass through unchanged.
func FromEnt(err error) error {
	var ve *ent.ValidationError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ve):
		return apperr.Invalid(ve.Name, "invalid %s: %s", ve.Name, strings.TrimPrefix(errors.Unwrap(ve).Error(), "ent: "))
	case ent.IsConstraintError(err):
		return apperr.New(apperr.BadUserInput, "the change conflicts with existing data")
	}
	return fmt.Errorf("catalog: %w", err)
}
