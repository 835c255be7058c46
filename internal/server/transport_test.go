package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
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

// TestDecodeBodyMembers: the body's members are matched by their exact names, as GraphQL over
// HTTP spells them: a "Query" or "QUERY" beside "query" is an unknown member, ignored, not a
// second query that replaces the first past the duplicate-name check (encoding/json matched
// names case-insensitively, the last one winning).
func TestDecodeBodyMembers(t *testing.T) {
	tr := httpTransport{maxBody: 1 << 20, limits: DocumentLimits{MaxTokens: 10, MaxNesting: 3}}
	for raw, want := range map[string]string{
		`{"query":"{ a }","Query":"mutation { b }"}`:      "{ a }",
		`{"Query":"mutation { b }","query":"{ a }"}`:      "{ a }",
		`{"query":"{ a }","QUERY":"mutation { b }"}`:      "{ a }",
		`{"QUERY":"mutation { b }"}`:                      CodeBadRequest, // no query
		`{"query":"{ a }","OperationName":"B"}`:           "{ a }",
		`null`:                                            CodeBadRequest, // no query
		`{"query":1}`:                                     CodeBadRequest,
		`{"query":"{ a }","variables":[1]}`:               CodeBadRequest,
		`{"query":"{ a }","operationName":null}`:          "{ a }",
		`{"query":1,"v":[1,2,3,4,5,6,7,8,9,10,11,12,13]}`: CodeDocumentTooLarge, // the limit first, wherever it is
	} {
		p, err := tr.decodeBody([]byte(raw), http.Header{})
		got := ""
		if err != nil {
			got, _ = err.err.Extensions["code"].(string)
		} else {
			got = p.Query
		}
		if got != want {
			t.Errorf("%s: %q (%v), want %q", raw, got, err, want)
		}
	}
}

// TestDecodeBodyValues: variables and extensions decode as gqlgen's decoding of a request
// makes them (objects map[string]any, arrays []any, numbers json.Number).
func TestDecodeBodyValues(t *testing.T) {
	tr := httpTransport{maxBody: 1 << 20, limits: DocumentLimits{MaxTokens: 100, MaxNesting: 5}}
	raw := `{"query":"q","operationName":"Op","documentId":"d1","variables":{"n":1.50,"big":12345678901234567890,` +
		`"s":"a\u00e9\"","l":[true,false,null,{"x":[]}],"o":{}},"extensions":{"persistedQuery":{"version":1}},"other":{"a":[1]}}`
	p, err := tr.decodeBody([]byte(raw), http.Header{"X": {"y"}})
	if err != nil {
		t.Fatal(err.err)
	}
	want := httpParams{DocumentID: "d1"}
	want.Query, want.OperationName, want.Headers = "q", "Op", http.Header{"X": {"y"}}
	want.Variables = map[string]any{"n": json.Number("1.50"), "big": json.Number("12345678901234567890"), "s": "aé\"",
		"l": []any{true, false, nil, map[string]any{"x": []any{}}}, "o": map[string]any{}}
	want.Extensions = map[string]any{"persistedQuery": map[string]any{"version": json.Number("1")}}
	if !reflect.DeepEqual(*p, want) {
		t.Errorf("decoded\n%#v\nwant\n%#v", *p, want)
	}
}
