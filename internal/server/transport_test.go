package server

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestNegotiate(t *testing.T) {
	for accept, want := range map[string]string{
		"":                                  mediaJSON,
		"*/*":                               mediaJSON,
		"application/*":                     mediaJSON,
		"application/json":                  mediaJSON,
		"application/json; charset=utf-8":   mediaJSON,
		"application/graphql-response+json": mediaGraphQLResponse,
		"application/json, application/graphql-response+json":                  mediaGraphQLResponse, // tie
		"application/graphql-response+json;q=0.9, application/json":            mediaJSON,
		"text/html, application/xhtml+xml, */*;q=0.8":                          mediaJSON,            // a browser
		"application/graphql-response+json, application/json, multipart/mixed": mediaGraphQLResponse, // GraphiQL
		"text/html":                                                   "",
		"application/json;q=0, text/plain":                            "",
		"application/graphql-response+json;q=0, */*":                  mediaJSON,
		"application/json;q=bogus, application/graphql-response+json": mediaGraphQLResponse,
	} {
		got, ok := negotiate(accept)
		if got != want || ok != (want != "") {
			t.Errorf("Accept %q: %q %v, want %q", accept, got, ok, want)
		}
	}
}

func TestClientAddress(t *testing.T) {
	for name, c := range map[string]struct {
		remote, header, value, want string
	}{
		"peer v4":                {"203.0.113.7:5000", "", "", "203.0.113.7"},
		"peer v6 is its /64":     {"[2001:db8:1:2:3:4:5:6]:443", "", "", "2001:db8:1:2::/64"},
		"v4-mapped v6":           {"[::ffff:203.0.113.7]:1", "", "", "203.0.113.7"},
		"untrusted header":       {"203.0.113.7:1", "", "198.51.100.1", "203.0.113.7"},
		"trusted header":         {"10.0.0.2:1", "X-Forwarded-For", "198.51.100.1", "198.51.100.1"},
		"forged entries ignored": {"10.0.0.2:1", "X-Forwarded-For", "1.2.3.4, 5.6.7.8, 198.51.100.1", "198.51.100.1"},
		"malformed falls back":   {"10.0.0.2:1", "X-Forwarded-For", "not-an-ip", "10.0.0.2"},
		"header absent":          {"10.0.0.2:1", "X-Real-IP", "", "10.0.0.2"},
	} {
		r := httptest.NewRequest(http.MethodPost, "/query", nil)
		r.RemoteAddr = c.remote
		if c.value != "" {
			r.Header.Set("X-Forwarded-For", c.value)
		}
		if got := clientAddress(r, c.header); got != c.want {
			t.Errorf("%s: %q, want %q", name, got, c.want)
		}
	}
}

func TestCheckJSON(t *testing.T) {
	tr := httpTransport{limits: DocumentLimits{MaxTokens: 10, MaxNesting: 3}}
	for raw, want := range map[string]string{
		`{"query":"{ a }"}`: "",
		` {"query":"{ a }", "variables": {"a": [1, {"b": null}]}} `: "",
		`{"query":"x","query":"y"}`:                                 CodeBadRequest, // a smuggled second query
		`{"v":{"a":1,"\u0061":2}}`:                                  CodeBadRequest, // the same name, escaped
		`{"query":"x"} {"query":"y"}`:                               CodeBadRequest,
		`{"query":"x"}]`:                                            CodeBadRequest,
		"\xef\xbb\xbf{\"query\":\"x\"}":                             CodeBadRequest, // BOM
		"{\"query\":\"\xff\"}":                                      CodeBadRequest, // invalid UTF-8
		`{"query":`:                                                 CodeBadRequest,
		`{"a":{"b":{"c":{"d":{}}}}}`:                                CodeDocumentTooLarge, // 5 levels > 3 + envelope
		`{"a":{"b":{"c":{}}}}`:                                      "",
		`{"v":[1,2,3,4,5,6,7,8,9,10,11,12,13,14]}`:                  CodeDocumentTooLarge, // 16 values > 10 + 5
		`{"v":[1,2,3,4,5,6,7,8,9,10,11,12,13]}`:                     "",                   // 15: names do not count
	} {
		err := tr.checkJSON([]byte(raw), "the body")
		got := ""
		if err != nil {
			got, _ = err.err.Extensions["code"].(string)
		}
		if got != want {
			t.Errorf("%q: %q (%v), want %q", raw, got, err, want)
		}
	}
}
