package server

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strconv"
	"sync/atomic"
)

// headerRequestID carries a request's id in and out.
const headerRequestID = "X-Request-Id"

// maxRequestIDLen bounds a client's request id: it goes into every log line of the request.
const maxRequestIDLen = 128

// requestID is the client's X-Request-Id when it is usable (1–128 characters of letters,
// digits and -_.:/+=@, nothing that could break a log line), else a new one.
func (o *observer) requestID(r *http.Request) string {
	if id := r.Header.Get(headerRequestID); usableRequestID(id) {
		return id
	}
	return o.nextID()
}

func usableRequestID(id string) bool {
	if id == "" || len(id) > maxRequestIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-' || c == '_' || c == '.' || c == ':' || c == '/' || c == '+' || c == '=' || c == '@':
		default:
			return false
		}
	}
	return true
}

// newRequestIDs returns a generator of ids unique across processes: a random prefix drawn at
// start, then a counter (cheaper per request than drawing random bytes each time).
func newRequestIDs() func() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	prefix := hex.EncodeToString(b[:]) + "-"
	var n atomic.Uint64
	return func() string { return prefix + strconv.FormatUint(n.Add(1), 36) }
}
