package floor

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/auth"
	"github.com/surgekit/surge/lua"
	"github.com/surgekit/surge/seckill"
)

// GrabOptions configure floor2. Zero values take the defaults.
type GrabOptions struct {
	// Namespace starts every key the floor writes ("<ns>:login:token:…", "<ns>:seckill:{1}:…"),
	// as SURGE_NAMESPACE does for a deployment. Required: give each floor its own, so that
	// Close can delete what it wrote and nothing else.
	Namespace string
	Stock     int64         // units on sale (10^12: never sold out)
	Sale      time.Duration // how long the sale stays open (1 h); its keys expire a minute after
}

// Grab is floor2: per request, the session lookup internal/auth makes for a token it has
// not seen (HGETALL of <ns>:login:token:<sha256 of the token>), then one grab by the admission
// script the server runs (lua.Grab: EVALSHA of seckill_grab.lua), one call per request
// where the server batches concurrent grabs of a voucher; answered the way the GraphQL API
// answers seckillVoucher. No order id generator (a counter in memory), no rate limit, no
// consumer writing the orders to a database, no GraphQL.
type Grab struct {
	rdb     redis.UniversalClient
	keys    lua.SeckillKeys
	logins  auth.Keyspace
	ns      string
	order   atomic.Int64 // the last order id handed out
	mu      sync.Mutex
	users   int      // sessions created so far (their user ids are 1..users)
	written []string // session keys, deleted by Close
	warmed  bool     // this Grab warmed the sale: Close deletes it
}

// Voucher is the id of the floor's sale (a fixed one: the namespace is the floor's own).
const Voucher = 1

// sessionTTL bounds a floor's sessions if Close never runs (the server's idle TTL).
const sessionTTL = 30 * time.Minute

// NewGrab warms a sale of its own into Redis (by the same script the server warms with) and
// returns floor2 serving it. Close deletes its keys.
func NewGrab(ctx context.Context, rdb redis.UniversalClient, o GrabOptions) (*Grab, error) {
	if o.Namespace == "" {
		return nil, errors.New("floor: GrabOptions.Namespace is required")
	}
	if o.Stock <= 0 {
		o.Stock = 1_000_000_000_000
	}
	if o.Sale <= 0 {
		o.Sale = time.Hour
	}
	g := Serving(rdb, o.Namespace)
	now := time.Now()
	_, err := lua.WarmCommit(ctx, rdb, g.keys, lua.Sale{Begin: now.Add(-time.Minute), End: now.Add(o.Sale), On: true,
		Stock: o.Stock, Retention: time.Minute}, false, now.Add(time.Minute))
	if err != nil {
		return nil, fmt.Errorf("floor: warming the sale: %w", err)
	}
	g.warmed = true
	return g, nil
}

// Serving returns floor2 answering the sale and sessions that NewGrab and Sessions made under
// namespace, in this process or another: a floor served by its own process, apart from the
// one that set it up and cleans up after it. Its Close deletes only what it wrote itself.
// Serve a sale from one process at a time: each hands out the same order ids.
func Serving(rdb redis.UniversalClient, namespace string) *Grab {
	g := &Grab{rdb: rdb, ns: namespace, logins: auth.KeysIn(namespace),
		keys: lua.SeckillKeys(seckill.KeysOf(seckill.KeyPrefix(namespace, seckill.DefaultPrefix), Voucher))}
	// Order ids above 2^48, where the server's lie (idgen.IsGenerated); unique within the
	// floor's sale, which is all the script needs.
	g.order.Store(1 << 48)
	return g
}

// Sessions creates n sessions the floor accepts, shaped as auth.Login writes them (the same
// key and hash fields, so HGETALL reads what it reads on the server), and returns their
// tokens, each a different user.
func (g *Grab) Sessions(ctx context.Context, n int) ([]string, error) {
	g.mu.Lock()
	first := g.users + 1
	g.users += n
	g.mu.Unlock()
	tokens := make([]string, n)
	keys := make([]string, n)
	for i := range tokens {
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		tokens[i] = base64.RawURLEncoding.EncodeToString(b)
		keys[i] = g.logins.Session(tokens[i])
	}
	g.mu.Lock()
	g.written = append(g.written, keys...)
	g.mu.Unlock()
	const chunk = 1000
	for i := 0; i < n; i += chunk {
		_, err := g.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for j := i; j < min(i+chunk, n); j++ {
				id := first + j
				p.HSet(ctx, keys[j], map[string]any{"id": id, "phone": fmt.Sprintf("19%09d", id), "nickname": "floor",
					"icon": "", "role": "USER", "deployment": g.ns})
				p.PExpire(ctx, keys[j], sessionTTL)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("floor: writing sessions: %w", err)
		}
	}
	return tokens, nil
}

// Close deletes the floor's sale and the sessions it created. It uses a deadline of its own,
// so it also runs after ctx was cancelled.
func (g *Grab) Close(ctx context.Context) error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	g.mu.Lock()
	keys := g.written
	if g.warmed {
		keys = append([]string{g.keys.Meta, g.keys.Stock, g.keys.Buyers, g.keys.Orders, g.keys.Dead}, keys...)
	}
	g.written, g.warmed = nil, false
	g.mu.Unlock()
	const chunk = 1000
	var errs []error
	for i := 0; i < len(keys); i += chunk {
		_, err := g.rdb.Pipelined(dctx, func(p redis.Pipeliner) error {
			for _, k := range keys[i:min(i+chunk, len(keys))] {
				p.Unlink(dctx, k) // one key per command: on a Cluster they lie in different slots
			}
			return nil
		})
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ServeHTTP answers one grab.
func (g *Grab) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	ctx := r.Context()
	w.Header().Set("Content-Type", "application/graphql-response+json")
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	sess, err := g.rdb.HGetAll(ctx, g.logins.Session(token)).Result()
	if err != nil {
		refuse(w, http.StatusInternalServerError, "INTERNAL", "internal error", "")
		return
	}
	user, err := strconv.Atoi(sess["id"])
	if err != nil || sess["deployment"] != g.ns {
		refuse(w, http.StatusOK, "UNAUTHENTICATED", "login required", "")
		return
	}
	order := g.order.Add(1)
	res, err := lua.Grab(ctx, g.rdb, g.keys, time.Now(), []lua.GrabRequest{{User: user, Order: order}})
	if err != nil {
		refuse(w, http.StatusInternalServerError, "INTERNAL", "internal error", "")
		return
	}
	switch res[0].Outcome {
	case lua.GrabAdmitted:
		_, _ = w.Write([]byte(`{"data":{"seckillVoucher":{"orderId":"` + strconv.FormatInt(order, 10) + `","status":"QUEUED"}}}`))
	case lua.GrabAlreadyBuyer:
		held := strconv.FormatInt(res[0].Holder, 10)
		refuse(w, http.StatusOK, "ALREADY_PURCHASED", "you already have an order for this voucher (order "+held+")", held)
	default:
		refuse(w, http.StatusOK, strings.ToUpper(res[0].Outcome.String()), "refused: "+res[0].Outcome.String(), "")
	}
}

// refuse writes a GraphQL error answer shaped as the server's (extensions.code, and the
// order an ALREADY_PURCHASED names).
func refuse(w http.ResponseWriter, status int, code, msg, orderID string) {
	ext := `{"code":"` + code + `"`
	if orderID != "" {
		ext += `,"orderId":"` + orderID + `"`
	}
	w.WriteHeader(status)
	_, _ = w.Write([]byte(`{"errors":[{"message":"` + msg + `","path":["seckillVoucher"],"extensions":` + ext + `}}],"data":null}`))
}
