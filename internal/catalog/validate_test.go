package catalog

import (
	"errors"
	"testing"
	"time"

	"github.com/surgekit/surge/ent"
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
		"stock":        func(v *VoucherInput) { v.Stock = stock(-1) },
		"stock nil":    func(v *VoucherInput) { v.Stock = nil },
		"stock huge":   func(v *VoucherInput) { v.Stock = stock(MaxStock + 1) },
		"no window":    func(v *VoucherInput) { v.BeginAt = nil },
		"begin > end":  func(v *VoucherInput) { v.BeginAt, v.EndAt = &later, &now },
		"begin = end":  func(v *VoucherInput) { v.EndAt = &now },
		"title":        func(v *VoucherInput) { v.Title = " \t" },
		"pay":          func(v *VoucherInput) { v.PayValue = -1 },
		"actual":       func(v *VoucherInput) { v.ActualValue = -1 },
		"pay > value":  func(v *VoucherInput) { v.PayValue, v.ActualValue = 1_000_000_000, 1 },
		"NUL title":    func(v *VoucherInput) { v.Title = "a\x00b" },
		"C1 subtitle":  func(v *VoucherInput) { v.Subtitle = "a\u009bb" },
		"tab in rules": func(v *VoucherInput) { v.Rules = "a\tb" },
		"kind":         func(v *VoucherInput) { v.Kind = "BOGUS" },
		"status":       func(v *VoucherInput) { v.Status = "BOGUS" },
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

func TestVoucherUpdateValidate(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	later, earlier := now.Add(time.Hour), now.Add(-time.Hour)
	stock := 5
	seckill := &ent.Voucher{Kind: voucher.KindSECKILL, Stock: &stock, BeginAt: &now, EndAt: &later}
	normal := &ent.Voucher{Kind: voucher.KindNORMAL}
	priced := &ent.Voucher{Kind: voucher.KindNORMAL, PayValue: 100, ActualValue: 200}
	overpriced := &ent.Voucher{Kind: voucher.KindNORMAL, PayValue: 300, ActualValue: 200} // stored before the rule
	n := func(v int) *int { return &v }
	m := func(v int64) *int64 { return &v }
	s := func(v string) *string { return &v }
	ts := func(v time.Time) *time.Time { return &v }
	inactive := voucher.StatusINACTIVE
	bogus := voucher.Status("BOGUS")

	good := []struct {
		name string
		cur  *ent.Voucher
		in   VoucherUpdate
	}{
		{"empty", seckill, VoucherUpdate{}},
		{"empty normal", normal, VoucherUpdate{}},
		{"stock 0", seckill, VoucherUpdate{Stock: n(0)}},
		{"stock max", seckill, VoucherUpdate{Stock: n(MaxStock)}},
		{"end later", seckill, VoucherUpdate{EndAt: ts(later.Add(time.Hour))}},
		{"begin earlier", seckill, VoucherUpdate{BeginAt: ts(earlier)}},
		{"both moved past the old end", seckill, VoucherUpdate{BeginAt: ts(later.Add(time.Hour)), EndAt: ts(later.Add(2 * time.Hour))}},
		{"normal fields", normal, VoucherUpdate{Title: s("t"), Subtitle: s(""), Rules: s("r"), PayValue: m(0), ActualValue: m(1), Status: &inactive}},
		{"pay the whole value", priced, VoucherUpdate{PayValue: m(200)}},
		{"rules a line each", seckill, VoucherUpdate{Rules: s("one\ntwo")}},
		{"an overpriced voucher's title", overpriced, VoucherUpdate{Title: s("t")}},
	}
	for _, c := range good {
		if err := c.in.Validate(c.cur); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}

	bad := []struct {
		name, field string
		cur         *ent.Voucher
		in          VoucherUpdate
	}{
		{"blank title", "title", seckill, VoucherUpdate{Title: s("  ")}},
		{"negative pay", "payValue", seckill, VoucherUpdate{PayValue: m(-1)}},
		{"negative actual", "actualValue", normal, VoucherUpdate{ActualValue: m(-1)}},
		{"bogus status", "status", seckill, VoucherUpdate{Status: &bogus}},
		{"negative stock", "stock", seckill, VoucherUpdate{Stock: n(-1)}},
		{"huge stock", "stock", seckill, VoucherUpdate{Stock: n(MaxStock + 1)}},
		{"end before begin", "endAt", seckill, VoucherUpdate{EndAt: ts(earlier)}},
		{"end equals begin", "endAt", seckill, VoucherUpdate{EndAt: ts(now)}},
		{"begin after end", "beginAt", seckill, VoucherUpdate{BeginAt: ts(later.Add(time.Second))}},
		{"both, reversed", "endAt", seckill, VoucherUpdate{BeginAt: ts(later), EndAt: ts(now)}},
		{"normal with stock", "stock", normal, VoucherUpdate{Stock: n(1)}},
		{"normal with begin", "beginAt", normal, VoucherUpdate{BeginAt: ts(now)}},
		{"normal with end", "endAt", normal, VoucherUpdate{EndAt: ts(later)}},
		{"pay above the value", "payValue", priced, VoucherUpdate{PayValue: m(201)}},
		{"value below pay", "actualValue", priced, VoucherUpdate{ActualValue: m(99)}},
		{"both, pay above", "payValue", priced, VoucherUpdate{PayValue: m(5), ActualValue: m(4)}},
		{"NUL in title", "title", seckill, VoucherUpdate{Title: s("a\x00")}},
		{"escape in subtitle", "subtitle", seckill, VoucherUpdate{Subtitle: s("\x1b[2J")}},
		{"CR in rules", "rules", seckill, VoucherUpdate{Rules: s("one\r\ntwo")}},
	}
	for _, c := range bad {
		err := c.in.Validate(c.cur)
		var ae *apperr.Error
		if !errors.As(err, &ae) || ae.Code != apperr.BadUserInput || ae.Field != c.field {
			t.Errorf("%s: err = %#v, want BAD_USER_INPUT on %s", c.name, err, c.field)
		}
	}

	in := VoucherUpdate{Title: s("  Flash  ")}
	if err := in.Validate(seckill); err != nil || *in.Title != "Flash" {
		t.Fatalf("title not trimmed: %q %v", *in.Title, err)
	}
}

// TestVoucherBuckets: a SECKILL voucher takes 1..64 buckets, a NORMAL one none, and an update
// changes them only before the sale begins.
func TestVoucherBuckets(t *testing.T) {
	now := time.Now()
	later := now.Add(time.Hour)
	n := func(v int) *int { return &v }
	in := VoucherInput{ShopID: 1, Title: "t", PayValue: 1, ActualValue: 2, Kind: voucher.KindSECKILL,
		Stock: n(10), BeginAt: &now, EndAt: &later}
	for _, c := range []struct {
		buckets *int
		ok      bool
	}{{nil, true}, {n(1), true}, {n(3), true}, {n(64), true}, {n(0), false}, {n(65), false}} {
		in.Buckets = c.buckets
		if err := in.Validate(); (err == nil) != c.ok {
			t.Errorf("buckets %v: %v", c.buckets, err)
		}
	}
	normal := VoucherInput{ShopID: 1, Title: "t", PayValue: 1, ActualValue: 2, Kind: voucher.KindNORMAL, Buckets: n(2)}
	if err := normal.Validate(); err == nil {
		t.Error("a NORMAL voucher took buckets")
	}
	future, past := now.Add(time.Minute), now.Add(-time.Minute)
	end := now.Add(2 * time.Hour)
	before := &ent.Voucher{Kind: voucher.KindSECKILL, Stock: n(5), BeginAt: &future, EndAt: &end, Buckets: 1}
	during := &ent.Voucher{Kind: voucher.KindSECKILL, Stock: n(5), BeginAt: &past, EndAt: &end, Buckets: 1}
	if err := (&VoucherUpdate{Buckets: n(3)}).Validate(before); err != nil {
		t.Errorf("buckets changed before the sale: %v", err)
	}
	var ae *apperr.Error
	if err := (&VoucherUpdate{Buckets: n(3)}).Validate(during); !errors.As(err, &ae) {
		t.Errorf("buckets changed during the sale: %v, want an invalid-input error", err)
	}
	if err := (&VoucherUpdate{Buckets: n(1)}).Validate(during); err != nil {
		t.Errorf("the same bucket count during the sale: %v", err)
	}
}
