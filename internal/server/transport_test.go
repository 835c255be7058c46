package server

import "testing"

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
