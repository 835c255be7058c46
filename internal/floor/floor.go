// Package floor holds the HTTP floors that surge's grab path is measured against: handlers
// that do only part of what `surge serve` does for a seckillVoucher grab, so that a benchmark
// or `surge bench http -floors` shows, on the same machine in the same run, what the rest of
// the server costs. The names follow issue 24:
//
//	floor0  Fixed: reads the request and writes a fixed answer; what net/http costs.
//	floor2  Grab: reads the request, looks the session up and runs the admission script for
//	        one grab, each one Redis round trip, unbatched; what a grab's Redis work adds.
//
// Both read the body without parsing it: a floor measures transport and Redis, and the
// GraphQL work (parsing, validation, execution) is exactly what it leaves out.
package floor

import (
	"io"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"
)

// fixedAnswer is what floor0 answers every request: a seckillVoucher answer of the real size.
var fixedAnswer = []byte(`{"data":{"seckillVoucher":{"orderId":"81604378625","status":"QUEUED"}}}`)

// Fixed is floor0: it reads the request and writes a fixed seckillVoucher answer, with no
// GraphQL, Redis or database behind it.
func Fixed() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/graphql-response+json")
		_, _ = w.Write(fixedAnswer)
	})
}

// Client returns a Redis client set up as the server's main client is (internal/app): a
// single node for one address, Cluster for several, calls that end at their context's
// deadline, and the same pool (poolSize 0: go-redis's default, 10 per CPU). floor2 on
// another client shape would measure the client, not the floor.
func Client(addrs []string, password string, poolSize int) redis.UniversalClient {
	return redis.NewUniversalClient(&redis.UniversalOptions{
		Addrs:                 addrs,
		Password:              password,
		IsClusterMode:         len(addrs) > 1,
		PoolSize:              poolSize,
		ContextTimeoutEnabled: true,
		DialTimeout:           2 * time.Second,
		ReadTimeout:           time.Second,
		WriteTimeout:          time.Second,
		PoolTimeout:           2 * time.Second,
	})
}
