package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestCORSAllows(t *testing.T) {
	c := CORS{Origins: []string{"https://app.example.com", "https://*.preview.example.com", "http://localhost:*"}}
	for origin, want := range map[string]bool{
		"https://app.example.com":               true,
		"https://APP.example.com":               true,
		"http://app.example.com":                false, // another scheme is another origin
		"https://app.example.com:8443":          false,
		"https://pr-1.preview.example.com":      true,
		"https://preview.example.com":           false,
		"https://evil.com/.preview.example.com": false,
		"http://localhost:5173":                 true,
		"http://localhost.evil.com:5173":        false,
		"null":                                  false,
	} {
		if got := c.allows(origin); got != want {
			t.Errorf("allows(%q) = %v, want %v", origin, got, want)
		}
	}
	if !(CORS{Origins: []string{"*"}}).allows("null") {
		t.Error(`"*" refuses the origin null`)
	}
}

// Issue 33, item 3: an origin is parsed strictly (scheme, a valid host name, an optional port)
// before it is matched; what no browser sends never matches a glob.
func TestCORSParsesOriginsStrictly(t *testing.T) {
	c := CORS{Origins: []string{"https://*.example.com", "http://localhost:*", "https://app.example.com"}, Credentials: true}
	for _, origin := range []string{
		"https://evil.net#.example.com", "https://evil.net?.example.com", `https://evil.net\.example.com`,
		"https://evil.net%2F.example.com", "https://.example.com", "https://a..example.com",
		"https://evil.net/.example.com", "https://user@a.example.com", "https://a.example.com/", "https://a.example.com.",
		"https://a.example.com:", "https://a.example.com:99999", "https://a.example.com:8x", "https://a b.example.com",
		" https://a.example.com", "https://a.example.com ", "https://a.example.com\t", "https://é.example.com",
		"https://a*.example.com", "https://a[.example.com", "https://-a.example.com", "https://a-.example.com",
		"https://" + strings.Repeat("a", 64) + ".example.com", "https:///a.example.com", "https:a.example.com",
		"http://localhost:0", "http://localhost:080808", "http://localhost:05173", "https://app.example.com:443x",
		"http://[::1%25eth0]:5173", "http://[::1]x", "http://[127.0.0.1]:5173", "https://a_b.example.com", "null",
	} {
		if c.allows(origin) {
			t.Errorf("allows(%q) = true, want false", origin)
		}
	}
	for _, origin := range []string{
		"https://a.example.com", "https://a-b.c.example.com", "https://xn--fiq228c.example.com", "https://A.Example.com",
		"http://localhost:5173", "https://app.example.com", "https://" + strings.Repeat("a", 63) + ".example.com",
	} {
		if !c.allows(origin) {
			t.Errorf("allows(%q) = false, want true", origin)
		}
	}
}

func TestSameOriginParsesStrictly(t *testing.T) {
	for _, c := range []struct {
		host, origin string
		want         bool
	}{
		{"api.example.com", "http://api.example.com", true},
		{"API.example.com:8080", "http://api.example.com:8080", true},
		{"[::1]:8080", "http://[::1]:8080", true},
		{"api.example.com", "https://api.example.com", false}, // served over plain http
		{"api.example.com", "http://api.example.com#x", false},
		{"api.example.com", "http://u@api.example.com", false},
		{"[::1]:8080", "http://[::1]:8080/", false},
	} {
		r := httptest.NewRequest(http.MethodGet, "/query", nil)
		r.Host = c.host
		if got := sameOrigin(r, c.origin, false); got != c.want {
			t.Errorf("sameOrigin(Host %s, Origin %s) = %v, want %v", c.host, c.origin, got, c.want)
		}
	}
}
