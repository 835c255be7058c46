package server

import (
	"fmt"
	"net"
	"net/http"
	"path"
	"slices"
	"strings"

	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// CodeHostNotAllowed is the code of a request whose Host header names no host the server
// answers for (HTTP 421).
const CodeHostNotAllowed = "HOST_NOT_ALLOWED"

func init() { errcode.RegisterErrorType(CodeHostNotAllowed, errcode.KindProtocol) }

// DevHosts are the loopback names a dev server answers for, on any port.
var DevHosts = []string{"localhost", "127.0.0.1", "[::1]"}

// ValidateHosts checks an allowlist of host names: "api.example.com", an IP address ("[::1]"
// or "::1" for IPv6), a glob of path.Match ("*.example.com"), or "*" for any host. Ports are
// not part of an entry: a name is allowed on every port.
func ValidateHosts(hosts []string) error {
	for _, h := range hosts {
		name := unbracket(h)
		if h == "" || strings.ContainsAny(h, "/@ ") || (strings.Contains(name, ":") && net.ParseIP(name) == nil) {
			return fmt.Errorf(`allowed host %q: want a host name without scheme or port ("api.example.com", "*.example.com", "127.0.0.1", "[::1]") or "*"`, h)
		}
		if _, err := path.Match(name, ""); err != nil {
			return fmt.Errorf("allowed host %q: %w", h, err)
		}
	}
	return nil
}

// withAllowedHosts answers 421 HOST_NOT_ALLOWED to a request whose Host header names none of
// hosts (any port). A page whose DNS name an attacker points at a server's address (DNS
// rebinding) is same-origin with that server in the browser's eyes, so the Host header is
// what tells such a request from one for the server's own name: a dev server on a laptop,
// which hands out its admin's login code, must not answer a page on the internet. Nil hosts
// (or "*") allow any Host.
func withAllowedHosts(next http.Handler, hosts []string) http.Handler {
	if len(hosts) == 0 || slices.Contains(hosts, "*") {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.Host
		if h, _, err := net.SplitHostPort(r.Host); err == nil {
			name = h
		}
		if !hostAllowed(hosts, name) {
			refuseHost(w, r.Host)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// hostAllowed reports whether name (a Host header without its port) matches an entry of
// hosts, case-insensitively.
func hostAllowed(hosts []string, name string) bool {
	name = strings.ToLower(unbracket(name))
	for _, h := range hosts {
		h = strings.ToLower(unbracket(h))
		if ok, _ := path.Match(h, name); ok && name != "" {
			return true
		}
	}
	return false
}

// refuseHost answers 421 HOST_NOT_ALLOWED, as GraphQL JSON like every refusal of the server.
func refuseHost(w http.ResponseWriter, host string) {
	err := gqlerror.Errorf("this server does not answer for the host %q: ask its operators to allow it (SURGE_ALLOWED_HOSTS)", truncate(host, maxOriginInMessage))
	errcode.Set(err, CodeHostNotAllowed)
	writeResponse(w, mediaJSON, http.StatusMisdirectedRequest, struct {
		Errors gqlerror.List `json:"errors"`
	}{gqlerror.List{err}})
}

// unbracket drops the brackets around an IPv6 address ("[::1]"), as net.SplitHostPort does.
func unbracket(host string) string {
	if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		return host[1 : len(host)-1]
	}
	return host
}
