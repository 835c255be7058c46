package e2e_test

// Issue 23, item 7: bad input answered with a clean coded error: a cursor that does not decode,
// and Int variables that are not whole JSON numbers within 32 bits.

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/surgekit/surge/ent"
)

// A cursor that is base64 but not one of ours (here {"a":1}, whose first byte msgpack reads as
// code 0x7b) is BAD_USER_INPUT with a message that says what to send, not the decoder's.
func TestBadCursorAnswersWithoutLibraryDetail(t *testing.T) {
	e := start(t)
	for name, tc := range map[string]struct {
		query string
		vars  map[string]any
	}{
		"literal {\"a\":1}": {`{ shops(first: 2, after: "eyJhIjoxfQ") { totalCount } }`, nil},
		"variable":          {`query($c: Cursor) { shops(first: 2, before: $c) { totalCount } }`, map[string]any{"c": "eyJhIjoxfQ"}},
		"not base64":        {`{ shops(first: 2, after: "%%%") { totalCount } }`, nil},
		"empty":             {`{ shops(first: 2, after: "") { totalCount } }`, nil},
		"truncated":         {`{ shops(first: 2, after: "gqFpzwAAAAEAAAAB") { totalCount } }`, nil},
	} {
		r := e.do("", tc.query, tc.vars)
		if r.code() != "BAD_USER_INPUT" {
			t.Errorf("%s: %d %s; want BAD_USER_INPUT", name, r.Status, r.Raw)
			continue
		}
		msg := r.Errors[0].Message
		for _, leak := range []string{"msgpack", "code=", "decoding", "base64", "illegal"} {
			if strings.Contains(msg, leak) {
				t.Errorf("%s: the message %q names a library detail (%s)", name, msg, leak)
			}
		}
		if !strings.Contains(msg, "cursor") {
			t.Errorf("%s: the message %q does not say the cursor is wrong", name, msg)
		}
	}
}

// An Int variable must be a JSON number holding a whole number within 32 bits: the string "5"
// is refused (gqlgen used to parse it), 1.5 says what is wrong with it (it used to say "cannot
// use value 0 as Int"), wherever the Int sits: the variable itself, a list, an input object.
// Each is a request error, BAD_USER_INPUT, naming the variable and the value; nothing runs.
func TestIntVariablesMustBeWholeNumbers(t *testing.T) {
	e := start(t)
	const first = `query($n: Int) { shops(first: $n) { totalCount } }`
	const where = `query($w: ShopWhereInput) { shops(first: 1, where: $w) { totalCount } }`
	for name, tc := range map[string]struct {
		query string
		vars  map[string]any
		want  []string // in the message
	}{
		"string 5":          {first, map[string]any{"n": "5"}, []string{`"$n"`, `"5"`, "non-numeric"}},
		"1.5":               {first, map[string]any{"n": 1.5}, []string{`"$n"`, "1.5", "non-integer"}},
		"5.0001":            {first, map[string]any{"n": 5.0001}, []string{"5.0001", "non-integer"}},
		"2^31":              {first, map[string]any{"n": int64(1) << 31}, []string{"2147483648", "32 bits"}},
		"true":              {first, map[string]any{"n": true}, []string{"true", "non-numeric"}},
		"in an input":       {where, map[string]any{"w": map[string]any{"avgPriceGT": "5"}}, []string{`"$w"`, `"w.avgPriceGT"`, `"5"`}},
		"in a list":         {where, map[string]any{"w": map[string]any{"avgPriceIn": []any{1, 2.5}}}, []string{`"w.avgPriceIn[1]"`, "2.5"}},
		"in a nested input": {where, map[string]any{"w": map[string]any{"or": []any{map[string]any{"sold": "1"}}}}, []string{`"w.or[0].sold"`}},
	} {
		r := e.do("", tc.query, tc.vars)
		if r.code() != "BAD_USER_INPUT" || r.Status != http.StatusBadRequest || r.Data != nil {
			t.Errorf("%s: %d %s; want 400 BAD_USER_INPUT and no data", name, r.Status, r.Raw)
			continue
		}
		msg := r.Errors[0].Message
		if strings.Contains(msg, "value 0") {
			t.Errorf("%s: %q speaks of a value 0 nobody sent", name, msg)
		}
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: the message %q lacks %s", name, msg, w)
			}
		}
	}
	// Whole numbers still work, as variables and as literals.
	for _, vars := range []map[string]any{{"n": 2}, {"n": -0}, {"n": nil}} {
		if r := e.do("", first, vars); r.Status != http.StatusOK || len(r.Errors) > 0 {
			t.Errorf("%v: %d %s", vars, r.Status, r.Raw)
		}
	}
	e.ok("", where, map[string]any{"w": map[string]any{"avgPriceIn": []any{1, 2}, "soldGT": 0}})

	// The same over a WebSocket.
	c := e.ws(nil, nil)
	c.subscribe("1", first, map[string]any{"n": "5"})
	if err := c.nextError("1"); err.Extensions["code"] != "BAD_USER_INPUT" || !strings.Contains(err.Message, `"5"`) {
		t.Errorf("over a WebSocket: %+v; want BAD_USER_INPUT naming \"5\"", err)
	}
}

// Issue 33, item 5: a voucher that charges more than it is worth, and text with control
// characters (a NUL, an escape), were stored. Each is BAD_USER_INPUT naming the field and the
// rule, and writes nothing; a voucher's rules may still hold line breaks.
func TestPricesAndTextAreChecked(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	typeID, shopID := firstTypeAndShop(e)
	admin := e.login(e.admin)
	voucherID := str(e.ok(admin, createVoucher, map[string]any{"in": map[string]any{
		"shopID": shopID, "title": "Plain", "payValue": 100, "actualValue": 200}}), "createVoucher", "id")
	typeOnly := str(e.ok(admin, createShopType, map[string]any{"in": map[string]any{"name": "Kiosk"}}), "createShopType", "id")
	const updateShopType = `mutation($id: ID!, $in: UpdateShopTypeInput!) { updateShopType(id: $id, input: $in) { id } }`
	snapshot := func() string {
		return fmt.Sprint(e.app.DB.Ent.Voucher.Query().Order(ent.Asc("id")).AllX(ctx),
			e.app.DB.Ent.Shop.Query().Order(ent.Asc("id")).AllX(ctx),
			e.app.DB.Ent.ShopType.Query().Order(ent.Asc("id")).AllX(ctx))
	}
	before := snapshot()
	voucher := func(over map[string]any) map[string]any {
		in := map[string]any{"shopID": shopID, "title": "Flash", "payValue": 100, "actualValue": 1000}
		for k, v := range over {
			in[k] = v
		}
		return map[string]any{"in": in}
	}
	shop := func(over map[string]any) map[string]any {
		in := map[string]any{"name": "S", "typeID": typeID, "longitude": 1, "latitude": 1}
		for k, v := range over {
			in[k] = v
		}
		return map[string]any{"in": in}
	}
	update := func(id string, in map[string]any) map[string]any { return map[string]any{"id": id, "in": in} }
	const price, control = "payValue must be <= actualValue", "control character"
	for _, c := range []struct {
		name, query string
		vars        map[string]any
		field, rule string
	}{
		{"pay 10^9 for a value of 1", createVoucher, voucher(map[string]any{"payValue": 1_000_000_000, "actualValue": 1}), "payValue", price},
		{"update pay above the value", updateVoucher, update(voucherID, map[string]any{"payValue": 201}), "payValue", price},
		{"update the value below pay", updateVoucher, update(voucherID, map[string]any{"actualValue": 99}), "actualValue", price},
		{"update both, pay above", updateVoucher, update(voucherID, map[string]any{"payValue": 5, "actualValue": 4}), "payValue", price},
		{"NUL in a title", createVoucher, voucher(map[string]any{"title": "Fla\x00sh"}), "title", control},
		{"escape in a title", createVoucher, voucher(map[string]any{"title": "\x1b[31mFlash"}), "title", control},
		{"C1 control in a subtitle", createVoucher, voucher(map[string]any{"subtitle": "a\u0085b"}), "subtitle", control},
		{"NUL in rules", createVoucher, voucher(map[string]any{"rules": "one\x00two"}), "rules", control},
		{"carriage return in rules", createVoucher, voucher(map[string]any{"rules": "one\r\ntwo"}), "rules", control},
		{"tab in an updated title", updateVoucher, update(voucherID, map[string]any{"title": "a\tb"}), "title", control},
		{"NUL in a shop name", createShop, shop(map[string]any{"name": "Sh\x00p"}), "name", control},
		{"newline in a shop name", createShop, shop(map[string]any{"name": "Shop\nTwo"}), "name", control},
		{"bell in an address", createShop, shop(map[string]any{"address": "1 Road\x07"}), "address", control},
		{"NUL in an image", createShop, shop(map[string]any{"images": []string{"https://a/b.png", "x\x00"}}), "images", control},
		{"DEL in an updated shop name", updateShop, update(shopID, map[string]any{"name": "Sh\x7fop"}), "name", control},
		{"escape in opening hours", updateShop, update(shopID, map[string]any{"openHours": "9-5\x1b"}), "openHours", control},
		{"NUL in a shop type name", createShopType, map[string]any{"in": map[string]any{"name": "T\x00"}}, "name", control},
		{"escape in a shop type icon", updateShopType, update(typeOnly, map[string]any{"icon": "\x1b"}), "icon", control},
	} {
		r := e.do(admin, c.query, c.vars)
		if r.code() != "BAD_USER_INPUT" || r.Errors[0].Extensions["field"] != c.field || !strings.Contains(r.Errors[0].Message, c.rule) {
			t.Errorf("%s: %d %s; want BAD_USER_INPUT on %s saying %q", c.name, r.Status, r.Raw, c.field, c.rule)
		}
	}
	if snapshot() != before {
		t.Error("refused input changed the database")
	}

	// What stays allowed: paying the whole value, free vouchers, line breaks in rules, text
	// beyond ASCII.
	d := e.ok(admin, `mutation($in: CreateVoucherInput!) { createVoucher(input: $in) { rules } }`,
		voucher(map[string]any{"payValue": 1000, "actualValue": 1000, "rules": "全场通用\n无需预约", "title": "秒杀 — 50% off"}))
	if str(d, "createVoucher", "rules") != "全场通用\n无需预约" {
		t.Errorf("rules with a line break: %v", d)
	}
	e.ok(admin, createVoucher, voucher(map[string]any{"payValue": 0, "actualValue": 0}))
	e.ok(admin, updateVoucher, update(voucherID, map[string]any{"payValue": 200}))
}
