package e2e_test

// Issue 23, item 7: the Host allowlist (DNS rebinding) and the scheme in the same-origin check.

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// hostRequest sends method path to the server at base with the Host header set to host, and
// Origin set when origin is not empty; with upgrade, as a WebSocket handshake. It returns the
// status and the body.
func hostRequest(t *testing.T, base, method, path, host, origin, body string, upgrade bool) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if upgrade {
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "websocket")
		req.Header.Set("Sec-WebSocket-Version", "13")
		req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		req.Header.Set("Sec-WebSocket-Protocol", "graphql-transport-ws")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return resp.StatusCode, "" // the body is the connection now
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A dev server (the real binary on the embedded default) answers for localhost, 127.0.0.1 and
// [::1] on any port, and refuses every other Host with 421 HOST_NOT_ALLOWED before anything
// runs: a page on an attacker's name that resolves to the developer's machine (DNS rebinding)
// is same-origin with the server for the browser, and must not get the admin's login code.
// The probes answer whatever the Host.
func TestDevServerAnswersOnlyLoopbackHosts(t *testing.T) {
	p := startSurge(t, nil)
	port := p.url[strings.LastIndexByte(p.url, ':')+1:]
	sendCode := `{"query":"mutation { sendLoginCode(phone: \"13800000000\") { devCode } }"}`
	for _, host := range []string{"localhost:" + port, "127.0.0.1:" + port, "[::1]:" + port, "LOCALHOST:" + port, "localhost"} {
		if status, body := hostRequest(t, p.url, http.MethodPost, "/query", host, "", `{"query":"{ __typename }"}`, false); status != http.StatusOK || !strings.Contains(body, `"Query"`) {
			t.Errorf("Host %s: %d %s; want 200", host, status, body)
		}
	}
	for _, host := range []string{"rebind.attacker.example:" + port, "127.0.0.1.nip.io:" + port, "localhost.attacker.example:" + port, "192.168.1.20:" + port} {
		origin := "http://" + host
		status, body := hostRequest(t, p.url, http.MethodPost, "/query", host, origin, sendCode, false)
		if status != http.StatusMisdirectedRequest || !strings.Contains(body, `"HOST_NOT_ALLOWED"`) || strings.Contains(body, "devCode") {
			t.Errorf("sendLoginCode with Host %s (Origin %s): %d %s; want 421 HOST_NOT_ALLOWED and no code", host, origin, status, body)
		}
		if status, body := hostRequest(t, p.url, http.MethodGet, "/query", host, origin, "", true); status != http.StatusMisdirectedRequest {
			t.Errorf("WebSocket handshake with Host %s: %d %s; want 421", host, status, body)
		}
		if status, _ := hostRequest(t, p.url, http.MethodGet, "/", host, "", "", false); status != http.StatusMisdirectedRequest {
			t.Errorf("playground with Host %s: %d; want 421", host, status)
		}
		for _, probe := range []string{"/livez", "/readyz", "/healthz"} {
			if status, body := hostRequest(t, p.url, http.MethodGet, probe, host, "", "", false); status != http.StatusOK {
				t.Errorf("%s with Host %s: %d %s; want 200 (orchestrators call probes by IP)", probe, host, status, body)
			}
		}
	}
	// The same-origin page of an allowed name still opens its WebSocket.
	if status, body := hostRequest(t, p.url, http.MethodGet, "/query", "localhost:"+port, "http://localhost:"+port, "", true); status != http.StatusSwitchingProtocols {
		t.Errorf("WebSocket handshake from http://localhost:%s: %d %s; want 101", port, status, body)
	}
}

// In production SURGE_ALLOWED_HOSTS lists the names the server answers for; unset, any Host
// is answered (the documented default: the bearer token, which no rebinding page holds, is
// the credential).
func TestAllowedHostsInProduction(t *testing.T) {
	e := startWith(t, map[string]string{"SURGE_ALLOWED_HOSTS": "api.example.test,*.edge.example.test"})
	for host, want := range map[string]int{
		"api.example.test":           http.StatusOK,
		"API.example.test:8443":      http.StatusOK,
		"eu.edge.example.test":       http.StatusOK,
		"edge.example.test":          http.StatusMisdirectedRequest,
		"api.example.test.evil.test": http.StatusMisdirectedRequest,
		hostOf(t, e.url):             http.StatusMisdirectedRequest,
	} {
		if status, body := hostRequest(t, e.url, http.MethodPost, "/query", host, "", `{"query":"{ __typename }"}`, false); status != want {
			t.Errorf("Host %s: %d %s; want %d", host, status, body, want)
		}
	}
	if status, _ := hostRequest(t, e.url, http.MethodGet, "/readyz", "10.0.0.7:8080", "", "", false); status != http.StatusOK {
		t.Errorf("/readyz by IP: %d, want 200", status)
	}
	open := start(t)
	if status, body := hostRequest(t, open.url, http.MethodPost, "/query", "anything.example.test", "", `{"query":"{ __typename }"}`, false); status != http.StatusOK {
		t.Errorf("production without SURGE_ALLOWED_HOSTS, Host anything.example.test: %d %s; want 200", status, body)
	}
}

// The endpoint's own origin includes its scheme: a plain-HTTP server's is http://host, and
// https://host is another origin (refused at the WebSocket handshake unless allowed); behind
// a trusted proxy that says the client came over TLS (X-Forwarded-Proto: https) it is the
// other way round, so a page on the http origin of an https site's name is a cross-origin
// caller.
func TestSameOriginIncludesTheScheme(t *testing.T) {
	e := start(t)
	host := hostOf(t, e.url)
	for origin, want := range map[string]int{
		"http://" + host:  http.StatusSwitchingProtocols,
		"https://" + host: http.StatusForbidden,
		"ws://" + host:    http.StatusForbidden,
	} {
		if status, body := hostRequest(t, e.url, http.MethodGet, "/query", host, origin, "", true); status != want {
			t.Errorf("plain server, WebSocket from %s: %d %s; want %d", origin, status, body, want)
		}
	}

	proxied := startWith(t, map[string]string{"SURGE_TRUSTED_PROXY_HEADER": "X-Forwarded-For"})
	host = hostOf(t, proxied.url)
	for origin, want := range map[string]int{
		"https://" + host: http.StatusSwitchingProtocols,
		"http://" + host:  http.StatusForbidden,
	} {
		req, _ := http.NewRequest(http.MethodGet, proxied.url+"/query", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("X-Forwarded-Proto", "https")
		req.Header.Set("X-Forwarded-For", "203.0.113.9")
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "websocket")
		req.Header.Set("Sec-WebSocket-Version", "13")
		req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		req.Header.Set("Sec-WebSocket-Protocol", "graphql-transport-ws")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("behind a TLS proxy, WebSocket from %s: %d; want %d", origin, resp.StatusCode, want)
		}
	}
}

// hostOf is the host:port of a URL.
func hostOf(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}
