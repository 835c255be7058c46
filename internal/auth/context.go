package auth

import (
	"context"
	"net/http"
	"strings"
)

type ctxKey struct{}

type addressKey struct{}

// WithClientAddress returns ctx carrying the client's address, as the HTTP layer resolved it
// (the peer, or a trusted proxy's header); send limits per client count by it.
func WithClientAddress(ctx context.Context, addr string) context.Context {
	return context.WithValue(ctx, addressKey{}, addr)
}

// ClientAddress returns the client's address ("" when unknown: no per-client limit applies).
func ClientAddress(ctx context.Context) string {
	a, _ := ctx.Value(addressKey{}).(string)
	return a
}

type requestAuth struct {
	token   string
	session *Session
}

// FromContext returns the caller's session, or nil for an anonymous request.
func FromContext(ctx context.Context) *Session {
	if a, ok := ctx.Value(ctxKey{}).(*requestAuth); ok {
		return a.session
	}
	return nil
}

// TokenFromContext returns the bearer token the request carried ("" if none).
func TokenFromContext(ctx context.Context) string {
	if a, ok := ctx.Value(ctxKey{}).(*requestAuth); ok {
		return a.token
	}
	return ""
}

// WithSession returns ctx carrying token and its session (used by transports other than HTTP).
func WithSession(ctx context.Context, token string, s *Session) context.Context {
	return context.WithValue(ctx, ctxKey{}, &requestAuth{token: token, session: s})
}

// BearerToken extracts the token from an "Authorization: Bearer <token>" header.
func BearerToken(r *http.Request) string {
	return ParseBearer(r.Header.Get("Authorization"))
}

// ParseBearer extracts the token from an Authorization value "Bearer <token>" ("" if the value
// has another form). WebSocket clients send that value in their connection_init payload.
func ParseBearer(h string) string {
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

// WithToken resolves token (sliding its session) and returns ctx carrying the token and its
// session: the session is nil when the token is unknown or expired, and ctx is returned as is
// when token is "". An error means the session store failed. Every transport authenticates
// through it: the server's HTTP middleware, and the WebSocket transport at connection_init and
// at each operation.
func (s *Service) WithToken(ctx context.Context, token string) (context.Context, error) {
	if token == "" {
		return ctx, nil
	}
	sess, err := s.Authenticate(ctx, token)
	if err != nil {
		return ctx, err
	}
	return WithSession(ctx, token, sess), nil
}
