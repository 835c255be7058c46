package server

import "testing"

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
