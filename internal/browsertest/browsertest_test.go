package browsertest

import (
	"encoding/json"
	"errors"
	"os"
	"testing"
)

func TestChromium(t *testing.T) {
	// make test installs Chromium (scripts/ensure-chromium.sh): a missing one is a failure.
	p, err := Chromium()
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil || fi.Mode()&0o111 == 0 {
		t.Fatalf("Chromium() = %q, not an executable file (%v)", p, err)
	}
}

func TestChromiumMissing(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := findChromium(t.TempDir() + "/chromium")
	if !errors.Is(err, ErrNoChromium) {
		t.Fatalf("Chromium() with an empty PATH: err = %v, want ErrNoChromium", err)
	}
}

func TestJSString(t *testing.T) {
	for _, s := range []string{"", "{ hello }", "query {\n\tx(a: \"b\\\\c\")\n}", "</script>\u2028\u2029é"} {
		lit := jsString(s)
		var back string
		if err := json.Unmarshal([]byte(lit), &back); err != nil || back != s {
			t.Errorf("jsString(%q) = %s, decodes to %q (%v)", s, lit, back, err)
		}
	}
}
