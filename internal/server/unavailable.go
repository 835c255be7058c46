package server

import (
	"context"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/surgekit/surge/internal/apperr"
	"github.com/surgekit/surge/internal/auth"
	"github.com/surgekit/surge/redisctx"
)

// MySQL errors that mean "no connection for you right now".
const (
	erConCount     = 1040 // ER_CON_COUNT_ERROR: Too many connections
	erUserConCount = 1203 // ER_TOO_MANY_USER_CONNECTIONS
)

// Messages of UNAVAILABLE errors; they say what the client should do.
const (
	unavailableMessage  = "a data store is unavailable: retry in a moment"
	haltedMessage       = "this server has stopped serving: retry in a moment"
	sessionStoreMessage = "the session store is unavailable: retry in a moment"
)

// retryAfterSeconds is the Retry-After of a 503: Redis restarts and failovers take seconds.
const retryAfterSeconds = "1"

// unavailable reports whether err means that a data store could not serve the request right
// now (down, restarting or loading, failing over, too slow, out of connections), so that the
// same request may succeed when retried: UNAVAILABLE rather than INTERNAL.
func unavailable(err error) bool {
	var my *mysql.MySQLError
	var netErr net.Error
	switch {
	case errors.As(err, &my):
		return my.Number == erConCount || my.Number == erUserConCount
	case errors.As(err, &netErr): // refused, reset, timed out
		return true
	}
	return errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, redisctx.ErrUnresponsive) ||
		errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrPoolExhausted) ||
		redis.IsLoadingError(err) || redis.IsClusterDownError(err) || redis.IsTryAgainError(err) ||
		redis.IsMasterDownError(err) || redis.IsMaxClientsError(err) || redis.IsReadOnlyError(err)
}

// withRequestContext prepares each request's context in one step (one copy of the request
// rather than one per layer):
//   - a halted server (Options.Halted) answers 503 UNAVAILABLE to everything;
//   - the client's address (clientAddress), for the limits per client;
//   - a WebSocket upgrade from an address that holds opts.WebsocketConnections connections
//     already is refused (429); the slot is given back when the connection ends, after this
//     handler has returned (requestLife);
//   - any other request gets its deadline (opts.RequestTimeout), which cancels its work
//     (session lookup, resolvers, Redis and database calls); a WebSocket's operations get
//     theirs from operationDeadline;
//   - the bearer token is resolved (sliding its session). An unknown token makes the request
//     anonymous (fields that need a user answer UNAUTHENTICATED). When the session store
//     fails, the request is not run as anonymous (that would log users out silently): it is
//     answered 503 with a GraphQL error UNAVAILABLE and Retry-After.
func withRequestContext(next http.Handler, a *auth.Service, log *slog.Logger, opts *Options) http.Handler {
	conns := &clientConnections{open: map[string]int{}, max: opts.WebsocketConnections}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if opts.Halted != nil && opts.Halted() {
			writeUnavailable(w, r, haltedMessage)
			return
		}
		addr := clientAddress(r, opts.TrustedProxyHeader)
		ctx := auth.WithClientAddress(r.Context(), addr)
		if isUpgrade(r) {
			if !conns.take(addr) {
				refuseConnection(w, conns.max)
				return
			}
			// The slot is the connection's, which outlives this handler (requestLife).
			life, own := lifeOf(ctx)
			if own {
				ctx = withLife(ctx, life)
				defer life.handlerDone()
			}
			life.onEnd(func() { conns.give(addr) })
		} else {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, opts.RequestTimeout)
			defer cancel()
			ctx = withRequestBudget(ctx, opts.DBBudget)
		}
		ctx, err := a.WithToken(ctx, auth.BearerToken(r))
		if err != nil {
			log.WarnContext(ctx, "session store failed", "err", err)
			writeUnavailable(w, r, sessionStoreMessage)
			return
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// unavailableError is the GraphQL error of a request refused because a store is unavailable.
func unavailableError(msg string) *gqlerror.Error {
	return &gqlerror.Error{Message: msg, Extensions: map[string]any{"code": string(apperr.Unavailable)}}
}

// writeUnavailable answers a request the server cannot run now: 503, Retry-After, and a
// GraphQL response holding one UNAVAILABLE error, in the media type gqlgen would have used.
func writeUnavailable(w http.ResponseWriter, r *http.Request, msg string) {
	w.Header().Set("Content-Type", responseType(r))
	w.Header().Set("Retry-After", retryAfterSeconds)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusServiceUnavailable)
	_ = json.NewEncoder(w).Encode(map[string]any{"errors": gqlerror.List{unavailableError(msg)}})
}

// Response media types of GraphQL over HTTP.
const (
	graphqlResponseJSON = "application/graphql-response+json"
	plainJSON           = "application/json"
)

// responseType picks the response media type as the GET and POST transports do
// (UseGrapQLResponseJsonByDefault): application/json only when the client asks for it first.
func responseType(r *http.Request) string {
	for part := range strings.SplitSeq(r.Header.Get("Accept"), ",") {
		mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		switch mt {
		case plainJSON:
			return plainJSON
		case graphqlResponseJSON, "*/*", "application/*":
			return graphqlResponseJSON
		}
	}
	return graphqlResponseJSON
}
