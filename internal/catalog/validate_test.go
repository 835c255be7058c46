package catalog

import (
	"testing"
	"time"

	"github.com/surgekit/surge/ent/voucher"
	"github.com/surgekit/surge/internal/apperr"
)

func TestVoucherInputValidate(t *testing.T) {
	now := time.Now()
	later := now.Add(time.Hour)
	stock := func(n int) *int { return &n }
	ok := func() VoucherInput {
		return VoucherInput{ShopID: 1, Title: "t", PayValue: 1, ActualValue: 2, Kind: voucher.KindSECKILL,
			Stock: stock(10), BeginAt: &now, EndAt: &later}
	}
	good := []VoucherInput{ok(), {ShopID: 1, Title: "n", Kind: voucher.KindNORMAL}}
	for _, in := range good {
		if err := in.Validate(); err != nil {
			t.Errorf("%+v: %v", in, err)
		}
	}
	zero := ok()
	zero.Stock = stock(0)
	if err := zero.Validate(); err != nil {
		t.Errorf("stock 0 is a valid (sold out) seckill: %v", err)
	}
	bad := map[string]func(*VoucherInput){
		"stock":       func(v *VoucherInput) { v.Stock = stock(-1) },
		"stock nil":   func(v *VoucherInput) { v.Stock = nil },
		"stock huge":  func(v *VoucherInput) { v.Stock = stock(MaxStock + 1) },
		"no window":   func(v *VoucherInput) { v.BeginAt = nil },
		"begin > end": func(v *VoucherInput) { v.BeginAt, v.EndAt = &later, &now },
		"begin = end": func(v *VoucherInput) { v.EndAt = &now },
		"title":       func(v *VoucherInput) { v.Title = " \t" },
		"pay":         func(v *VoucherInput) { v.PayValue = -1 },
		"actual":      func(v *VoucherInput) { v.ActualValue = -1 },
		"kind":        func(v *VoucherInput) { v.Kind = "BOGUS" },
		"status":      func(v *VoucherInput) { v.Status = "BOGUS" },
		"normal+stock": func(v *VoucherInput) {
			v.Kind = voucher.KindNORMAL
		},
	}
	for name, mutate := range bad {
		in := ok()
		mutate(&in)
		if err := in.Validate(); apperr.CodeOf(err) != apperr.BadUserInput {
			t.Errorf("%s: err = %v, want BAD_USER_INPUT", name, err)
		}
	}
}
