// Package sales holds the shop's use cases that span the catalog (rules and storage of
// vouchers) and the flash-sale engine (seckill), so that no caller has to remember them:
// a new seckill voucher is warmed into Redis, every change of a voucher runs under
// seckill.Service.Guard so that Redis follows it, and a user's orders read the same whether
// written to the database or still queued in Redis. The GraphQL layer calls it and holds no
// such rule itself.
package sales

import (
	"context"
	"log/slog"
	"time"

	"github.com/surgekit/surge/ent"
	"github.com/surgekit/surge/ent/voucher"
	"github.com/surgekit/surge/internal/catalog"
	"github.com/surgekit/surge/seckill"
)

// Service runs the use cases on the services it is given; it holds no state of its own.
type Service struct {
	db      *ent.Client
	catalog *catalog.Service
	seckill *seckill.Service
	log     *slog.Logger
}

// New returns a Service. log receives the failures that do not fail a call (slog.Default if
// nil).
func New(db *ent.Client, cat *catalog.Service, sk *seckill.Service, log *slog.Logger) *Service {
	if log == nil {
		log = slog.Default()
	}
	return &Service{db: db, catalog: cat, seckill: sk, log: log}
}

// warmTimeout bounds the warm-up CreateVoucher waits for.
const warmTimeout = 10 * time.Second

// CreateVoucher creates a voucher (catalog's rules) and puts a seckill voucher's sale state
// into Redis, so that its first grabs are not answered NOT_READY. A failed warm-up is logged,
// not returned: the voucher exists, and the first grab rebuilds the state anyway.
func (s *Service) CreateVoucher(ctx context.Context, in catalog.VoucherInput) (*ent.Voucher, error) {
	v, err := s.catalog.CreateVoucher(ctx, in)
	if err != nil {
		return nil, err
	}
	if v.Kind == voucher.KindSECKILL {
		s.warmNew(ctx, v.ID)
	}
	return v, nil
}

func (s *Service) warmNew(ctx context.Context, voucherID int) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), warmTimeout)
	defer cancel()
	if err := s.seckill.Warm(ctx, voucherID); err != nil {
		s.log.ErrorContext(ctx, "warming a new seckill voucher (its first grab will rebuild it)",
			"voucher", voucherID, "err", err)
	}
}

// UpdateVoucher changes a voucher (catalog's rules) under the voucher's lock, and Redis's
// sale state follows before it returns (seckill.Service.Guard): the Redis stock becomes the
// new database stock minus the orders still queued, counted once.
func (s *Service) UpdateVoucher(ctx context.Context, id int, in catalog.VoucherUpdate) (*ent.Voucher, error) {
	var v *ent.Voucher
	err := s.seckill.Guard(ctx, id, func(ctx context.Context) (err error) {
		v, err = s.catalog.UpdateVoucher(ctx, id, in)
		return err
	})
	return v, err
}
