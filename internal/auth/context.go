package auth

import (
	"context"
	"net/http"
	"strings"
)

type ctxKey struct{}

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
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

// Middleware resolves the bearer token (sliding its session) and stores the result in the
// request context. An unknown token makes the request anonymous; resolvers that need a user
// answer UNAUTHENTICATED. A Redis failure answers 503 rather than silently logging users out.
func (s *Service) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token := BearerToken(r)
		if token == "" {
			next.ServeHTTP(w, r)
			return
		}
		sess, err := s.Authenticate(r.Context(), token)
		if err != nil {
			http.Error(w, "session store unavailable", http.StatusServiceUnavailable)
			return
		}
		next.ServeHTTP(w, r.WithContext(WithSession(r.Context(), token, sess)))
	})
}
