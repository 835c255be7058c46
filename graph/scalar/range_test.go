package scalar

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/surgekit/surge/internal/apperr"
)

func TestIntStaysWithin32Bits(t *testing.T) {
	for in, ok := range map[any]bool{
		json.Number("2147483647"): true, json.Number("-2147483648"): true,
		json.Number("2147483648"): false, json.Number("-2147483649"): false,
		json.Number("1.5"): false, int64(1 << 40): false, 12: true, "x": false,
	} {
		n, err := UnmarshalInt64(in)
		if (err == nil) != ok {
			t.Errorf("%v: %d, %v; want ok=%v", in, n, err, ok)
		}
		if err != nil && apperr.CodeOf(err) != apperr.BadUserInput {
			t.Errorf("%v: %v is not BAD_USER_INPUT", in, err)
		}
	}
}

func TestTimeStaysWithinTimestamp(t *testing.T) {
	for in, ok := range map[string]bool{
		"1970-01-01T00:00:01Z": true, "2038-01-19T03:14:07Z": true, "2030-06-01T08:00:00+08:00": true,
		"1970-01-01T00:00:00Z": false, "2038-01-19T03:14:08Z": false, "0001-01-01T00:00:00Z": false,
		"2039-01-01T00:00:00Z": false, "yesterday": false,
	} {
		v, err := UnmarshalTime(in)
		if (err == nil) != ok {
			t.Errorf("%s: %v, %v; want ok=%v", in, v, err, ok)
		}
		if err != nil && apperr.CodeOf(err) != apperr.BadUserInput {
			t.Errorf("%s: %v is not BAD_USER_INPUT", in, err)
		}
	}
	if !MaxTime.Equal(time.Unix(1<<31-1, 0)) {
		t.Fatalf("MaxTime %v is not the last second of a signed 32-bit Unix time", MaxTime)
	}
}
