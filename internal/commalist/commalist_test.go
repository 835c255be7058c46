package commalist

import (
	"reflect"
	"testing"
)

func TestSplit(t *testing.T) {
	for in, want := range map[string][]string{
		"":                 nil,
		" , ,":             nil,
		"a:1":              {"a:1"},
		" a:1, b:2 ,,c:3 ": {"a:1", "b:2", "c:3"},
	} {
		if got := Split(in); !reflect.DeepEqual(got, want) {
			t.Errorf("Split(%q) = %q, want %q", in, got, want)
		}
	}
}
