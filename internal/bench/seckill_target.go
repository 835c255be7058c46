package bench

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/ent"
	"github.com/surgekit/surge/ent/shop"
	"github.com/surgekit/surge/ent/voucher"
	"github.com/surgekit/surge/internal/app"
	"github.com/surgekit/surge/internal/auth"
	"github.com/surgekit/surge/internal/catalog"
	"github.com/surgekit/surge/seckill"
)

// seckillTarget is where the load goes: the service API in-process, or servers over HTTP.
type seckillTarget interface {
	describe() (redis, database string)
	// state gives direct access to Redis and MySQL for verification; nil if there is none.
	state() *stateAccess
	login(ctx context.Context, u *simUser) error
	createVoucher(ctx context.Context, stock int, begin, end time.Time) (int, error)
	// grab makes one grab call from worker w; orderID is set for admitted and already-purchased.
	grab(ctx context.Context, w int, u *simUser, voucherID int) (outcome int, orderID int64, err error)
	// endSale closes the voucher's sale after the run; in-process it also stops the consumer
	// and, unless keep, deletes the voucher's Redis keys.
	endSale(ctx context.Context, voucherID int, keep bool) error
	close()
}

// stateAccess is the Redis and database the verifier reads.
type stateAccess struct {
	rdb       redis.UniversalClient
	db        *sql.DB
	dialect   string
	prefix    string // the sale keys' (seckill.KeysOf)
	logins    auth.Keyspace
	lua       bool
	realRedis bool // a real Redis (redis-benchmark can reach it), not the embedded one
	password  string
}

// dropSale deletes a voucher's sale keys, its lock and fencing counter and its registry entry
// in the deployment of cfg.
func dropSale(ctx context.Context, rdb redis.UniversalClient, cfg app.Config, voucherID int) error {
	pfx := cfg.SeckillKeyPrefix()
	countKey := seckill.BucketCountKey(pfx, voucherID)
	n, _ := rdb.Get(ctx, countKey).Int() // stock buckets; none recorded: 1
	n = max(n, 1)
	keys := append([]string{countKey}, seckill.VoucherLockKeys(cfg.Namespace, seckill.DefaultPrefix, voucherID)...)
	for b := range n {
		k := seckill.BucketKeysOf(pfx, voucherID, b, n)
		keys = append(keys, k.Meta, k.Stock, k.Buyers, k.Orders, k.Dead, k.Borrows, k.Lent)
	}
	members := seckill.RegistryMembers(voucherID, n)
	args := make([]any, len(members))
	for i, m := range members {
		args[i] = m
	}
	return errors.Join(unlink(ctx, rdb, keys...), rdb.ZRem(ctx, seckill.RegistryKey(pfx), args...).Err())
}

func describeConfig(cfg app.Config) (string, string) {
	r, d := "embedded (miniredis)", "embedded (SQLite)"
	if len(cfg.RedisAddrs) > 0 {
		r = strings.Join(cfg.RedisAddrs, ",")
	}
	if cfg.MySQLDSN != "" {
		d = "MySQL"
	}
	return r, d
}

// ensureShop returns a shop to hang vouchers on, creating a shop type and a shop if the
// database has none (a production database that was never seeded).
func ensureShop(ctx context.Context, db *ent.Client, run string) (int, error) {
	id, err := db.Shop.Query().Order(ent.Asc(shop.FieldID)).FirstID(ctx)
	if err == nil {
		return id, nil
	}
	if !ent.IsNotFound(err) {
		return 0, err
	}
	st, err := db.ShopType.Create().SetName("bench").Save(ctx)
	if err != nil {
		return 0, err
	}
	s, err := db.Shop.Create().SetName("bench shop " + run).SetTypeID(st.ID).SetLongitude(120).SetLatitude(30).Save(ctx)
	if err != nil {
		return 0, err
	}
	return s.ID, nil
}

// ---- in-process ----

type inprocess struct {
	a        *app.App
	cfg      app.Config
	tmp      string
	st       *stateAccess
	run      string
	stopCons context.CancelFunc
	consDone chan struct{}
	buckets  int // stock buckets of the vouchers it creates (0: the default)
	stopGC   func()
}

func newInprocess(ctx context.Context, cfg app.Config, o seckillOpts, out *output) (*inprocess, error) {
	t := &inprocess{run: runID()}
	if cfg.Embedded() {
		// Never the ./data of `surge serve`: a directory of this run, removed after.
		dir, err := os.MkdirTemp("", "surge-bench-seckill-")
		if err != nil {
			return nil, err
		}
		t.tmp, cfg.DataDir = dir, dir
	}
	cfg.Mode = "dev" // login codes are returned: the simulated users log in through the real path
	cfg.Seed = false
	cfg.SeckillRate = o.rate
	cfg.SeckillConsumer = false // run below, so it can be stopped before the keys are deleted
	if len(cfg.AdminPhones) == 0 {
		cfg.AdminPhones = []string{app.DevAdminPhone}
	}
	t.cfg = cfg
	log := slog.New(slog.NewTextHandler(out.errw, &slog.HandlerOptions{Level: slog.LevelWarn}))
	t.stopGC = app.TuneGC(cfg, log) // as `surge serve` runs it
	a, err := app.New(ctx, cfg, app.Options{Logger: log, CodeSender: quietSender{}})
	if err != nil {
		t.close()
		return nil, err
	}
	t.a = a
	if !o.consumeAfter {
		t.startConsumer(ctx)
	}
	t.st = &stateAccess{rdb: a.Redis, db: a.DB.SQL, dialect: a.DB.Dialect, prefix: cfg.SeckillKeyPrefix(),
		lua: cfg.SeckillStrategy == "lua", realRedis: len(cfg.RedisAddrs) > 0, logins: auth.KeysIn(cfg.Namespace), password: cfg.RedisPassword}
	return t, nil
}

// quietSender drops login codes: the dev code comes back from SendCode anyway, and logging
// 100 000 of them would drown the output.
type quietSender struct{}

func (quietSender) Send(context.Context, string, string) error { return nil }

func (t *inprocess) describe() (string, string) { return describeConfig(t.cfg) }
func (t *inprocess) state() *stateAccess        { return t.st }

func (t *inprocess) login(ctx context.Context, u *simUser) error {
	sent, err := t.a.Auth.SendCode(ctx, u.phone)
	if err != nil {
		return err
	}
	token, usr, err := t.a.Auth.Login(ctx, u.phone, sent.DevCode)
	if err != nil {
		return err
	}
	u.id, u.token = usr.ID, token
	return nil
}

func (t *inprocess) createVoucher(ctx context.Context, stock int, begin, end time.Time) (int, error) {
	shopID, err := ensureShop(ctx, t.a.DB.Ent, t.run)
	if err != nil {
		return 0, err
	}
	v, err := t.a.Catalog.CreateVoucher(ctx, catalog.VoucherInput{
		ShopID: shopID, Title: "bench seckill " + t.run, PayValue: 100, ActualValue: 1000,
		Kind: voucher.KindSECKILL, Stock: &stock, BeginAt: &begin, EndAt: &end,
	})
	if err == nil && t.buckets > 1 {
		// Created with one bucket and warmed (the catalog); split before any grab.
		err = t.a.Seckill.Guard(ctx, v.ID, func(ctx context.Context) error {
			return t.a.DB.Ent.Voucher.UpdateOneID(v.ID).SetBuckets(t.buckets).Exec(ctx)
		})
	}
	if err != nil {
		return 0, err
	}
	return v.ID, t.a.Seckill.Warm(ctx, v.ID)
}

func (t *inprocess) grab(ctx context.Context, _ int, u *simUser, voucherID int) (int, int64, error) {
	a, err := t.a.Seckill.Grab(ctx, u.id, voucherID)
	switch {
	case err == nil:
		return oAdmitted, a.OrderID, nil
	case errors.Is(err, seckill.ErrSoldOut):
		return oSoldOut, 0, nil
	case errors.Is(err, seckill.ErrAlreadyPurchased):
		return oAlready, a.OrderID, nil
	case errors.Is(err, seckill.ErrRateLimited):
		return oRateLimited, 0, nil
	case errors.Is(err, seckill.ErrNotReady):
		return oNotReady, 0, nil
	}
	return oError, 0, err
}

func (t *inprocess) endSale(ctx context.Context, voucherID int, keep bool) error {
	t.stopConsumer()
	now := time.Now().UTC()
	_, err := t.a.DB.Ent.Voucher.UpdateOneID(voucherID).SetEndAt(now).Save(ctx)
	if keep || !t.st.realRedis {
		return err
	}
	return errors.Join(err, dropSale(ctx, t.a.Redis, t.cfg, voucherID))
}

// startConsumer runs the app's stream consumer until stopConsumer (once).
func (t *inprocess) startConsumer(ctx context.Context) {
	if t.stopCons != nil {
		return
	}
	cctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	t.stopCons, t.consDone = stop, make(chan struct{})
	go func() { defer close(t.consDone); _ = t.a.Seckill.RunConsumer(cctx) }()
}

func (t *inprocess) stopConsumer() {
	if t.stopCons != nil {
		t.stopCons()
		<-t.consDone
		t.stopCons = nil
	}
}

func (t *inprocess) close() {
	t.stopConsumer()
	if t.a != nil {
		_ = t.a.Close()
	}
	if t.tmp != "" {
		_ = os.RemoveAll(t.tmp)
	}
	if t.stopGC != nil {
		t.stopGC()
	}
}

// ---- HTTP ----

type httpTarget struct {
	urls      []string
	client    *http.Client
	admin     string // admin session token
	conn      *app.App
	cfg       app.Config
	st        *stateAccess
	grabBody  []byte
	rr        atomic.Uint64
	run       string
	adminOnce sync.Once
	adminErr  error
	o         seckillOpts
}

func newHTTPTarget(ctx context.Context, cfg app.Config, o seckillOpts) (*httpTarget, error) {
	t := &httpTarget{cfg: cfg, run: runID(), o: o}
	for _, raw := range o.targets {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("bench seckill: -target %q is not an http(s)://host:port URL", raw)
		}
		if u.Path == "" || u.Path == "/" {
			u.Path = "/query"
		}
		t.urls = append(t.urls, u.String())
	}
	conns := max(o.concurrency, o.loginConc) + 16
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conns * len(t.urls),
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	t.client = &http.Client{Transport: tr, Timeout: 30 * time.Second}
	if !o.noVerify {
		a, err := app.Connect(ctx, cfg, app.Options{})
		if err != nil {
			return nil, fmt.Errorf("bench seckill: HTTP mode verifies in Redis and MySQL, so it needs the servers' configuration (-no-verify skips that): %w", err)
		}
		t.conn = a
		t.st = &stateAccess{rdb: a.Redis, db: a.DB.SQL, dialect: a.DB.Dialect, prefix: cfg.SeckillKeyPrefix(),
			lua: cfg.SeckillStrategy == "lua", realRedis: true, logins: auth.KeysIn(cfg.Namespace), password: cfg.RedisPassword}
	}
	return t, nil
}

func (t *httpTarget) describe() (string, string) {
	if t.conn == nil {
		return "(servers')", "(servers')"
	}
	return describeConfig(t.cfg)
}
func (t *httpTarget) state() *stateAccess { return t.st }

func (t *httpTarget) close() {
	t.client.CloseIdleConnections()
	if t.conn != nil {
		_ = t.conn.Close()
	}
}

type gqlError struct {
	Message    string `json:"message"`
	Extensions struct {
		Code    string `json:"code"`
		OrderID string `json:"orderId"`
	} `json:"extensions"`
}

// post sends one GraphQL request to the next target and decodes data into into.
func (t *httpTarget) post(ctx context.Context, body []byte, token string, into any) (*gqlError, error) {
	u := t.urls[int(t.rr.Add(1)-1)%len(t.urls)]
	req, err := graphqlRequest(ctx, u, body, token)
	if err != nil {
		return nil, err
	}
	resp, err := t.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	var r struct {
		Data   json.RawMessage `json:"data"`
		Errors []gqlError      `json:"errors"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s answered %s: %.200s", u, resp.Status, b)
	}
	if len(r.Errors) > 0 {
		return &r.Errors[0], nil
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered %s", u, resp.Status)
	}
	if into != nil {
		return nil, json.Unmarshal(r.Data, into)
	}
	return nil, nil
}

// graphqlRequest is one GraphQL POST as the load tools send it, with token's session if any.
func graphqlRequest(ctx context.Context, url string, body []byte, token string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return req, nil
}

func gqlBody(query string, vars map[string]any) []byte {
	b, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	return b
}

func (e *gqlError) Error() string { return e.Extensions.Code + ": " + e.Message }

// loginAs logs a phone in through sendLoginCode (dev code) and login.
func (t *httpTarget) loginAs(ctx context.Context, phone string) (token string, id int, role string, err error) {
	var sent struct {
		S struct {
			DevCode *string `json:"devCode"`
		} `json:"sendLoginCode"`
	}
	ge, err := t.post(ctx, gqlBody(`mutation($p: String!) { sendLoginCode(phone: $p) { devCode } }`, map[string]any{"p": phone}), "", &sent)
	if err == nil && ge != nil {
		err = ge
	}
	if err != nil {
		return "", 0, "", err
	}
	if sent.S.DevCode == nil {
		return "", 0, "", errors.New("sendLoginCode returned no devCode: the servers must run in dev mode (SURGE_MODE=dev)")
	}
	var in struct {
		L struct {
			Token string `json:"token"`
			User  struct {
				ID   string `json:"id"`
				Role string `json:"role"`
			} `json:"user"`
		} `json:"login"`
	}
	ge, err = t.post(ctx, gqlBody(`mutation($p: String!, $c: String!) { login(phone: $p, code: $c) { token user { id role } } }`,
		map[string]any{"p": phone, "c": *sent.S.DevCode}), "", &in)
	if err == nil && ge != nil {
		err = ge
	}
	if err != nil {
		return "", 0, "", err
	}
	id, err = strconv.Atoi(in.L.User.ID)
	if err != nil {
		return "", 0, "", fmt.Errorf("login answered user id %q", in.L.User.ID)
	}
	return in.L.Token, id, in.L.User.Role, nil
}

func (t *httpTarget) login(ctx context.Context, u *simUser) (err error) {
	u.token, u.id, _, err = t.loginAs(ctx, u.phone)
	return err
}

func (t *httpTarget) adminToken(ctx context.Context) (string, error) {
	t.adminOnce.Do(func() {
		if t.o.adminToken != "" {
			t.admin = t.o.adminToken
			return
		}
		token, _, role, err := t.loginAs(ctx, t.o.adminPhone)
		var ge *gqlError
		switch {
		case errors.As(err, &ge) && ge.Extensions.Code == "RATE_LIMITED":
			t.adminErr = fmt.Errorf("admin login as %s: %w (pass -admin-token, or another -admin-phone listed in the servers' SURGE_ADMIN_PHONES)", t.o.adminPhone, err)
		case err != nil:
			t.adminErr = fmt.Errorf("admin login as %s: %w", t.o.adminPhone, err)
		case role != "ADMIN":
			t.adminErr = fmt.Errorf("%s is not an admin of the servers (SURGE_ADMIN_PHONES); use -admin-phone or -admin-token", t.o.adminPhone)
		default:
			t.admin = token
		}
	})
	return t.admin, t.adminErr
}

func (t *httpTarget) createVoucher(ctx context.Context, stock int, begin, end time.Time) (int, error) {
	admin, err := t.adminToken(ctx)
	if err != nil {
		return 0, err
	}
	var shops struct {
		Shops struct {
			Edges []struct {
				Node struct {
					ID string `json:"id"`
				} `json:"node"`
			} `json:"edges"`
		} `json:"shops"`
	}
	ge, err := t.post(ctx, gqlBody(`{ shops(first: 1) { edges { node { id } } } }`, nil), admin, &shops)
	if err == nil && ge != nil {
		err = ge
	}
	if err != nil {
		return 0, err
	}
	if len(shops.Shops.Edges) == 0 {
		return 0, errors.New("the servers' database has no shop to hang a voucher on (a dev-mode server seeds one into an empty database)")
	}
	var created struct {
		V struct {
			ID string `json:"id"`
		} `json:"createVoucher"`
	}
	ge, err = t.post(ctx, gqlBody(`mutation($in: CreateVoucherInput!) { createVoucher(input: $in) { id } }`, map[string]any{"in": map[string]any{
		"shopID": shops.Shops.Edges[0].Node.ID, "title": "bench seckill " + t.run, "payValue": 100, "actualValue": 1000,
		"kind": "SECKILL", "stock": stock, "beginAt": begin.UTC().Format(time.RFC3339Nano), "endAt": end.UTC().Format(time.RFC3339Nano),
	}}), admin, &created)
	if err == nil && ge != nil {
		err = ge
	}
	if err != nil {
		return 0, err
	}
	id, err := strconv.Atoi(created.V.ID)
	if err != nil {
		return 0, fmt.Errorf("createVoucher answered id %q", created.V.ID)
	}
	t.useVoucher(id)
	return id, nil
}

// useVoucher makes the grabs go to voucherID.
func (t *httpTarget) useVoucher(voucherID int) {
	t.grabBody = gqlBody(`mutation($v: ID!) { seckillVoucher(voucherId: $v) { orderId } }`, map[string]any{"v": strconv.Itoa(voucherID)})
}

// refusalOutcomes are the API codes of the grab refusals the load tools count as outcomes
// (answers, not errors).
var refusalOutcomes = map[string]int{"SOLD_OUT": oSoldOut, "ALREADY_PURCHASED": oAlready, "RATE_LIMITED": oRateLimited, "NOT_READY": oNotReady}

func (t *httpTarget) grab(ctx context.Context, _ int, u *simUser, _ int) (int, int64, error) {
	var r struct {
		S struct {
			OrderID string `json:"orderId"`
		} `json:"seckillVoucher"`
	}
	ge, err := t.post(ctx, t.grabBody, u.token, &r)
	if err != nil {
		return oError, 0, err
	}
	if ge != nil {
		oc, ok := refusalOutcomes[ge.Extensions.Code]
		switch {
		case !ok:
			return oError, 0, ge
		case oc == oAlready:
			id, _ := strconv.ParseInt(ge.Extensions.OrderID, 10, 64)
			return oAlready, id, nil
		}
		return oc, 0, nil
	}
	id, err := strconv.ParseInt(r.S.OrderID, 10, 64)
	if err != nil {
		return oError, 0, fmt.Errorf("seckillVoucher answered orderId %q", r.S.OrderID)
	}
	return oAdmitted, id, nil
}

// endSale closes the sale through updateVoucher; the servers' consumers retire the voucher
// after their linger (Redis keys are theirs to manage, never deleted under them).
func (t *httpTarget) endSale(ctx context.Context, voucherID int, _ bool) error {
	admin, err := t.adminToken(ctx)
	if err != nil {
		return err
	}
	ge, err := t.post(ctx, gqlBody(`mutation($id: ID!, $in: UpdateVoucherInput!) { updateVoucher(id: $id, input: $in) { id } }`,
		map[string]any{"id": strconv.Itoa(voucherID), "in": map[string]any{"endAt": time.Now().UTC().Format(time.RFC3339Nano)}}), admin, nil)
	if err == nil && ge != nil {
		err = ge
	}
	return err
}

// cleanupUsers deletes the simulated users' login keys and sessions (they would otherwise
// expire by themselves: sessions in 30 min, send counters in 24 h). Their database rows stay.
func cleanupUsers(ctx context.Context, st *stateAccess, users []*simUser) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	for i := 0; i < len(users); i += 1000 {
		_, _ = st.rdb.Pipelined(dctx, func(p redis.Pipeliner) error {
			for _, u := range users[i:min(i+1000, len(users))] {
				if u == nil {
					continue
				}
				for _, k := range st.logins.Phone(u.phone) {
					p.Unlink(dctx, k)
				}
				if u.token != "" {
					p.Unlink(dctx, st.logins.Session(u.token))
				}
			}
			return nil
		})
	}
}
