package server

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"golang.org/x/net/publicsuffix"
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
// hold glob characters. With Credentials, a glob must end in a literal domain that is not a
// public suffix (golang.org/x/net/publicsuffix: "com", "co.uk", "github.io"…), e.g.
// "https://*.example.com": "https://*", "https://*.com" or "https://*.github.io" would echo
// with credentials the origin of any site registered there, which is "*" with credentials
// that browsers cannot refuse.
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
		if !c.Credentials {
			continue
		}
		domain, ok := globDomain(o)
		if !ok {
			return fmt.Errorf(`cors: origin %q cannot be allowed with credentials: its host matches any site; end it in a literal domain of two labels or more (e.g. https://*.example.com)`, o)
		}
		if _, err := publicsuffix.EffectiveTLDPlusOne(domain); domain != "" && err != nil {
			return fmt.Errorf(`cors: origin %q cannot be allowed with credentials: %q is a public suffix (anyone can register a name under it), so the pattern matches any site there; name a domain of your own (e.g. https://*.example.co.uk)`, o, domain)
		}
	}
	return nil
}

// globDomain returns the literal domain that ends the host of a valid origin pattern with
// glob characters (lowercased, "" for a literal host), and whether the pattern keeps its
// host within it: the glob characters must be followed by a dot and at least two literal
// labels (".example.com"). "*" in path.Match crosses dots, so "https://*example.com" would
// also match "https://evilexample.com", and "https://*.com" any .com site.
func globDomain(pattern string) (string, bool) {
	_, host, _ := strings.Cut(strings.ToLower(pattern), "://")
	if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.HasSuffix(host, "]") {
		host = host[:i] // the port, literal or a glob
	}
	i := strings.LastIndexAny(host, `*?[]\`)
	if i < 0 {
		return "", true
	}
	domain := host[i+1:]
	labels := strings.Split(strings.TrimPrefix(domain, "."), ".")
	return domain[min(1, len(domain)):], strings.HasPrefix(domain, ".") && len(labels) >= 2 && !slices.Contains(labels, "")
}

// allows reports whether a cross-origin request from origin may be answered: "*" allows any,
// the other patterns only an origin that parses strictly (parseOrigin), so that what no
// browser sends ("https://evil.net#.example.com", "https://a..example.com") never matches a
// glob.
func (c CORS) allows(origin string) bool {
	o, valid := parseOrigin(origin)
	for _, p := range c.Origins {
		if p == "*" {
			return true
		}
		if ok, _ := path.Match(strings.ToLower(p), o.String()); valid && ok {
			return true
		}
	}
	return false
}

// origin is a browser origin (RFC 6454) as a browser serialises it: scheme "http" or
// "https", a host (a DNS name of letter-digit-hyphen labels, an IPv4 address, or an IPv6
// address in brackets), and a port unless it is the scheme's default. Lowercase.
type origin struct {
	scheme, host, port string // port "" when none
}

func (o origin) String() string {
	if o.port == "" {
		return o.scheme + "://" + o.host
	}
	return o.scheme + "://" + o.host + ":" + o.port
}

// hostPort is the origin's host and port as a Host header holds them.
func (o origin) hostPort() string {
	if o.port == "" {
		return o.host
	}
	return o.host + ":" + o.port
}

// parseOrigin parses an Origin header strictly: scheme://host[:port] and nothing else (no
// user, path, query, fragment, percent-escape, empty label, trailing dot or glob character).
func parseOrigin(s string) (o origin, ok bool) {
	s = strings.ToLower(s)
	scheme, rest, found := strings.Cut(s, "://")
	if !found || (scheme != "http" && scheme != "https") {
		return o, false
	}
	o.scheme = scheme
	hasPort := false
	if strings.HasPrefix(rest, "[") {
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return o, false
		}
		addr, err := netip.ParseAddr(rest[1:end])
		if err != nil || !addr.Is6() || addr.Zone() != "" {
			return o, false
		}
		o.host, rest = rest[:end+1], rest[end+1:]
		if rest != "" {
			if rest[0] != ':' {
				return o, false
			}
			o.port, hasPort = rest[1:], true
		}
	} else {
		o.host, o.port, hasPort = strings.Cut(rest, ":")
		if !validHostName(o.host) {
			return o, false
		}
	}
	if hasPort && !validPort(o.port) {
		return o, false
	}
	return o, true
}

// validHostName reports whether h is a host name of RFC 1123: at most 253 bytes of labels of
// 1-63 letters, digits and hyphens, neither starting nor ending with a hyphen (IDNs arrive
// as punycode, "xn--…"; an IPv4 address is such a name too).
func validHostName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for label := range strings.SplitSeq(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			if c := label[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
				return false
			}
		}
	}
	return true
}

// validPort reports whether p is a port as a browser writes it: 1-65535, no leading zero.
func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n >= 1 && n <= 65535 && p == strconv.Itoa(n)
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
	o, ok := parseOrigin(origin)
	if !ok || !strings.EqualFold(o.hostPort(), r.Host) {
		return false
	}
	own := "http"
	if servedOverTLS(r, proxied) {
		own = "https"
	}
	return o.scheme == own
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
