package e2e_test

// Issue 23, item 7: bad input answered with a clean coded error: a cursor that does not decode,
// and Int variables that are not whole JSON numbers within 32 bits.

import (
	"net/http"
	"strings"
	"testing"
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
