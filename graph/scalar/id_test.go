package scalar

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/surgekit/surge/internal/apperr"
)

func TestIDRoundTripKeepsAll64Bits(t *testing.T) {
	id := 1<<62 | 123456789
	var b bytes.Buffer
	MarshalID(id).MarshalGQL(&b)
	if b.String() != `"4611686018550844693"` {
		t.Fatalf("marshalled %s, want a JSON string", b.String())
	}
	var s string
	if err := json.Unmarshal(b.Bytes(), &s); err != nil {
		t.Fatal(err)
	}
	got, err := UnmarshalID(s)
	if err != nil || got != id {
		t.Fatalf("round trip = %d, %v", got, err)
	}
	if got, err := UnmarshalID(json.Number("42")); err != nil || got != 42 {
		t.Fatalf("json number = %d, %v", got, err)
	}
}

func TestIDRejectsGarbage(t *testing.T) {
	for _, v := range []any{"", "abc", "-1", "0", "1.5", "1e3", " 1", "99999999999999999999", 3.5, true, nil} {
		if _, err := UnmarshalID(v); apperr.CodeOf(err) != apperr.BadUserInput {
			t.Errorf("%#v: err = %v, want BAD_USER_INPUT", v, err)
		}
	}
}
