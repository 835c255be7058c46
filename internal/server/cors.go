package server

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// CodeOriginNotAllowed is the code of a CORS preflight or a WebSocket handshake from a browser
// origin that is not allowed (HTTP 403).
const CodeOriginNotAllowed = "ORIGIN_NOT_ALLOWED"

func init() { errcode.RegisterErrorType(CodeOriginNotAllowed, errcode.KindProtocol) }

// CORS says which browser origins, besides the endpoint's own, may call the GraphQL endpoint
// (fetch with Authorization, preflighted) and open its WebSocket.
type CORS struct {
	// Origins lists the allowed origins: "https://app.example.com" (scheme, host, port as the
	// browser sends them), glob patterns of path.Match ("https://*.example.com",
	// "http://localhost:*"), or "*" for any origin (not with Credentials).
	Origins []string
	// Credentials sends Access-Control-Allow-Credentials, for pages that fetch with
	// credentials: "include" (cookies, HTTP auth). The bearer token needs none.
	Credentials bool
	// MaxAge is how long a browser may cache a preflight's answer (10 min; Chromium caps it at
	// 2 h).
	MaxAge time.Duration
}

const defaultPreflightMaxAge = 10 * time.Minute

// ErrWildcardWithCredentials refuses a configuration a browser would refuse anyway: "*"
// cannot answer a request made with credentials.
var ErrWildcardWithCredentials = errors.New(`cors: the origin "*" cannot be allowed with credentials: list the origins`)

// Validate checks every origin: "*", or scheme://host[:port] with no path, where the host may
// hold glob characters. With Credentials, a glob must end in a literal domain of two labels or
// more ("https://*.example.com"): "https://*" or "https://*.com" would echo any site's origin
// with credentials, which is "*" with credentials that browsers cannot refuse.
func (c CORS) Validate() error {
	for _, o := range c.Origins {
		if o == "*" {
			if c.Credentials {
				return ErrWildcardWithCredentials
			}
			continue
		}
		if _, err := path.Match(o, ""); err != nil {
			return fmt.Errorf("cors: origin %q: %w", o, err)
		}
		u, err := url.Parse(strings.ReplaceAll(o, "*", "0")) // a wildcard stands for any label or port
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			u.Path != "" || u.RawQuery != "" || u.User != nil || u.Fragment != "" {
			return fmt.Errorf(`cors: origin %q: want "*" or scheme://host[:port], e.g. https://app.example.com`, o)
		}
		if c.Credentials && !namesOneSite(o) {
			return fmt.Errorf(`cors: origin %q cannot be allowed with credentials: its host matches any site; end it in a literal domain of two labels or more (e.g. https://*.example.com)`, o)
		}
	}
	return nil
}

// namesOneSite reports whether a valid origin pattern keeps its host within one domain: a
// literal host, or glob characters followed by a dot and at least two literal labels
// (".example.com"). "*" in path.Match crosses dots, so "https://*example.com" would also
// match "https://evilexample.com", and "https://*.com" any .com site.
func namesOneSite(pattern string) bool {
	_, host, _ := strings.Cut(pattern, "://")
	if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.HasSuffix(host, "]") {
		host = host[:i] // the port, literal or a glob
	}
	i := strings.LastIndexAny(host, `*?[]\`)
	if i < 0 {
		return true
	}
	domain := host[i+1:]
	labels := strings.Split(strings.TrimPrefix(domain, "."), ".")
	return strings.HasPrefix(domain, ".") && len(labels) >= 2 && !slices.Contains(labels, "")
}

// allows reports whether a cross-origin request from origin may be answered.
func (c CORS) allows(origin string) bool {
	origin = strings.ToLower(origin)
	for _, o := range c.Origins {
		if ok, _ := path.Match(strings.ToLower(o), origin); ok || o == "*" {
			return true
		}
	}
	return false
}

// wildcard reports whether every origin is allowed with "Access-Control-Allow-Origin: *".
func (c CORS) wildcard() bool {
	for _, o := range c.Origins {
		if o == "*" {
			return true
		}
	}
	return false
}

// websocketPatterns are Origins as github.com/coder/websocket's OriginPatterns: a pattern
// with "://" is matched against the origin's scheme://host, "*" against any host.
func (c CORS) websocketPatterns() []string { return c.Origins }

// sameOrigin reports whether origin is the endpoint's own: the scheme it is served under
// (https over TLS, see servedOverTLS; else http) and the host and port of the Host header,
// which the Host allowlist vouches for (withAllowedHosts). A page on the plain http origin of
// an https server's name, which a network attacker can write, is therefore a cross-origin
// caller.
func sameOrigin(r *http.Request, origin string, proxied bool) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host) {
		return false
	}
	own := "http"
	if servedOverTLS(r, proxied) {
		own = "https"
	}
	return strings.EqualFold(u.Scheme, own)
}

// servedOverTLS reports whether the client reached the server over TLS: the connection's own,
// or, behind a trusted proxy (Options.TrustedProxyHeader set), the last value of the
// X-Forwarded-Proto header the proxy sets. Behind a TLS-terminating proxy that sends no
// X-Forwarded-Proto, the https origin of the server's own name counts as another origin:
// list it in CORS.Origins.
func servedOverTLS(r *http.Request, proxied bool) bool {
	if r.TLS != nil {
		return true
	}
	if !proxied {
		return false
	}
	values := r.Header.Values("X-Forwarded-Proto")
	if len(values) == 0 {
		return false
	}
	protos := strings.Split(values[len(values)-1], ",")
	return strings.EqualFold(strings.TrimSpace(protos[len(protos)-1]), "https")
}

// Answers of CORS preflights: the methods and request headers of GraphQL over HTTP, and the
// response headers a script may read besides the safelisted ones.
const (
	allowedMethods = "GET, POST"
	allowedHeaders = "Authorization, Content-Type"
	exposedHeaders = "Retry-After"
)

// withCORS answers CORS preflights and marks the answers of cross-origin requests for
// browsers. CSRF protection stays where it was: a body that a form or a plain fetch can send
// without a preflight (form, multipart, text/plain) is refused by the transport (415), and
// mutations never run over GET (405), so a page on an origin that is not allowed can make
// the server run nothing but a query whose answer its browser withholds. A WebSocket
// handshake from an origin that is not allowed is refused (403).
// proxied says that requests come through a trusted proxy (see servedOverTLS).
func withCORS(next http.Handler, c CORS, proxied bool) http.Handler {
	if c.MaxAge <= 0 {
		c.MaxAge = defaultPreflightMaxAge
	}
	maxAge := strconv.Itoa(int(c.MaxAge.Seconds()))
	wildcard := c.wildcard() && !c.Credentials
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		if !wildcard {
			h.Add("Vary", "Origin")
		}
		origin := r.Header.Get("Origin")
		if origin == "" || sameOrigin(r, origin, proxied) {
			next.ServeHTTP(w, r)
			return
		}
		allowed := c.allows(origin)
		preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
		if (preflight || isUpgrade(r)) && !allowed {
			refuseOrigin(w, origin)
			return
		}
		if allowed {
			allowOrigin(h, origin, wildcard, c.Credentials)
		}
		if !preflight {
			h.Set("Access-Control-Expose-Headers", exposedHeaders)
			next.ServeHTTP(w, r)
			return
		}
		h.Add("Vary", "Access-Control-Request-Method")
		h.Add("Vary", "Access-Control-Request-Headers")
		h.Set("Access-Control-Allow-Methods", allowedMethods)
		h.Set("Access-Control-Allow-Headers", allowedHeaders)
		h.Set("Access-Control-Max-Age", maxAge)
		w.WriteHeader(http.StatusNoContent)
	})
}

func allowOrigin(h http.Header, origin string, wildcard, credentials bool) {
	if wildcard {
		h.Set("Access-Control-Allow-Origin", "*")
		return
	}
	h.Set("Access-Control-Allow-Origin", origin)
	if credentials {
		h.Set("Access-Control-Allow-Credentials", "true")
	}
}

// refuseOrigin answers 403 ORIGIN_NOT_ALLOWED, without any Access-Control-* header.
func refuseOrigin(w http.ResponseWriter, origin string) {
	err := gqlerror.Errorf("the origin %s may not call this API: ask its operators to allow it (SURGE_CORS_ORIGINS)", truncate(origin, maxOriginInMessage))
	errcode.Set(err, CodeOriginNotAllowed)
	writeResponse(w, mediaJSON, http.StatusForbidden, struct {
		Errors gqlerror.List `json:"errors"`
	}{gqlerror.List{err}})
}

// maxOriginInMessage bounds the origin quoted in a refusal: the header is the client's.
const maxOriginInMessage = 100
