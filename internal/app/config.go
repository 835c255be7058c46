package app

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/surgekit/surge/internal/auth"
	"github.com/surgekit/surge/internal/commalist"
	"github.com/surgekit/surge/internal/server"
	"github.com/surgekit/surge/internal/store"
	"github.com/surgekit/surge/seckill"
)

// Config is the server configuration. Every field has an environment variable and a flag of
// the same meaning; flags win over the environment.
type Config struct {
	// Addr is SURGE_ADDR, -addr: the listen address. Dev mode, which hands out login codes,
	// listens on loopback only ("127.0.0.1:8080"); production on every interface (":8080").
	Addr          string
	DataDir       string   // SURGE_DATA_DIR, -data-dir ("./data"): SQLite file in embedded mode
	RedisAddrs    []string // SURGE_REDIS_ADDRS, -redis-addrs: one → single node, several → Cluster; empty → embedded
	RedisPassword string   // SURGE_REDIS_PASSWORD, -redis-password
	// RedisSentinels is SURGE_REDIS_SENTINELS, -redis-sentinels: the Sentinels (host:port,
	// comma-separated) that watch RedisMaster (SURGE_REDIS_MASTER, -redis-master, the master's
	// name in Sentinel), instead of RedisAddrs: the server follows the master Sentinel names.
	// RedisSentinelPassword is SURGE_REDIS_SENTINEL_PASSWORD, -redis-sentinel-password, the
	// Sentinels' own (RedisPassword is the data nodes').
	RedisSentinels        []string
	RedisMaster           string
	RedisSentinelPassword string
	MySQLDSN              string // SURGE_MYSQL_DSN, -mysql-dsn: empty → SQLite in DataDir
	// MySQLMaxConns is SURGE_MYSQL_MAX_CONNS, -mysql-max-conns (store.DefaultMaxConns, 32):
	// the most connections this server opens to MySQL. Servers × this must stay below the
	// database's max_connections (151 by default), with room for tools.
	MySQLMaxConns int
	// RedisPoolSize is SURGE_REDIS_POOL_SIZE, -redis-pool-size (0: go-redis's default, 10 per
	// CPU): connections of the main Redis client.
	RedisPoolSize int
	// GCMinHeapMB is SURGE_GC_MIN_HEAP_MB, -gc-min-heap-mb (128; 0: off): the heap, in MiB, that
	// the garbage collector lets grow before it collects, at least (internal/gctune). Go's
	// default collects at twice the live heap: a few MiB for this server, so several times a
	// second under load. Under load the live heap is tens of MiB (a thousand keep-alive
	// connections hold about 15 MiB of buffers), which at 64 left GOGC at 100 and the collector
	// at a sixth of the CPU of a grab at 5 000/s; 128 takes that to a sixteenth. Ignored when
	// GOGC is set, which then decides alone.
	GCMinHeapMB   int
	Mode          string   // SURGE_MODE, -mode: "dev" or "production" (dev when embedded, else production)
	AdminPhones   []string // SURGE_ADMIN_PHONES, -admin-phones (dev default: 13800000000)
	Seed          bool     // SURGE_SEED, -seed: seed demo data into an empty database (default: dev mode)
	Introspection bool     // SURGE_INTROSPECTION, -introspection (default: dev mode)
	MaxComplexity int      // SURGE_MAX_COMPLEXITY, -max-complexity (3000)
	MaxDepth      int      // SURGE_MAX_DEPTH, -max-depth (10)
	// MaxTokens, MaxNesting and MaxFields bound a document before it is parsed and validated:
	// SURGE_MAX_TOKENS, -max-tokens (2000 lexical tokens; also the JSON values of variables),
	// SURGE_MAX_NESTING, -max-nesting (32 levels of braces, brackets and parentheses; also of
	// variables), SURGE_MAX_FIELDS, -max-fields (500 field selections, fragments counted where
	// spread).
	MaxTokens, MaxNesting, MaxFields int
	// RequestTimeout is SURGE_REQUEST_TIMEOUT, -request-timeout (5s): the deadline of each
	// request, and of each query or mutation over a WebSocket; its work is cancelled then.
	RequestTimeout time.Duration
	// DBBudget is SURGE_DB_BUDGET, -db-budget (80ms; 0: off): the database time the
	// statements of one request's queries may take together, for callers other than admins;
	// the database stops them there (QUERY_TOO_EXPENSIVE). Admins' reads, mutations and
	// subscriptions have the request's deadline alone.
	DBBudget time.Duration
	// ReadTimeout is SURGE_READ_TIMEOUT, -read-timeout (10s): how long a client may take to
	// send one request, headers and body (the headers alone get half of it).
	ReadTimeout time.Duration
	// SessionCache is SURGE_SESSION_CACHE, -session-cache (1s; 0: off): how long a server
	// answers a token from memory after reading its session from Redis, so the bound within
	// which a logout through another server is honoured here.
	SessionCache time.Duration
	// SessionSlide is SURGE_SESSION_SLIDE, -session-slide (1m; 0: every request): how often,
	// at most, a server slides a session's 30-minute idle TTL while the session is in use.
	SessionSlide time.Duration
	// SessionMaxAge is SURGE_SESSION_MAX_AGE, -session-max-age (24h): how long after its login
	// a session ends, however busy.
	SessionMaxAge time.Duration
	// TrustedProxyHeader is SURGE_TRUSTED_PROXY_HEADER, -trusted-proxy-header (none): the
	// header whose last address is the client's, behind a reverse proxy (X-Forwarded-For,
	// X-Real-IP); without it the peer's address counts.
	TrustedProxyHeader string
	// LoginSendRateIP, LoginSendRateGlobal and LoginSendRateNew are SURGE_LOGIN_SEND_RATE_IP,
	// -login-send-rate-ip, SURGE_LOGIN_SEND_RATE_GLOBAL, -login-send-rate-global and
	// SURGE_LOGIN_SEND_RATE_NEW, -login-send-rate-new: login code sends per client address,
	// server-wide to phones of existing users, and server-wide to phones of no user yet,
	// "N/window" (e.g. 20/1h) or "off". Production defaults: 20/1h, 1000/1m and 200/1m; dev
	// mode: off (codes are returned, nothing is delivered).
	LoginSendRateIP, LoginSendRateGlobal, LoginSendRateNew auth.Rate
	// LoginCodeSender is SURGE_LOGIN_CODE_SENDER, -login-code-sender: how login codes reach
	// their phones: "none" (the default: nowhere), "log" or "webhook:<url>" (codesender.go).
	LoginCodeSender CodeSenderSetting
	// WSMaxSubscriptions is SURGE_WS_MAX_SUBSCRIPTIONS, -ws-max-subscriptions (10): the
	// subscriptions one WebSocket connection may run at once. WSMaxConnectionsPerIP is
	// SURGE_WS_MAX_CONNECTIONS_PER_IP, -ws-max-connections-per-ip (50): the WebSocket
	// connections one client address may hold open.
	WSMaxSubscriptions, WSMaxConnectionsPerIP int
	// Namespace is SURGE_NAMESPACE, -namespace ("surge"): the start of every Redis key and
	// channel the deployment writes (<ns>:login:…, <ns>:cache:…, <ns>:bloom:…, <ns>:seckill:…,
	// <ns>:lock:…, <ns>:id:…), so that deployments can share one Redis. Every server of one
	// deployment uses the same; no braces or spaces, no colon at either end.
	Namespace string
	// TakeOverNamespace is SURGE_TAKE_OVER_NAMESPACE, -take-over-namespace: the id of the
	// deployment (database) the namespace is bound to, when this server is to take the
	// namespace over from it for good (its keys are deleted). Without it, a server whose
	// database is not the namespace's refuses to start.
	TakeOverNamespace string
	// NamespaceCheckInterval is SURGE_NAMESPACE_CHECK_INTERVAL, -namespace-check-interval
	// (5s): how often a running server checks that its namespace is still bound to its
	// database, binding it again after Redis lost it, and stopping once another deployment
	// holds it.
	NamespaceCheckInterval time.Duration
	// Warnings are configuration problems that do not stop the server (deprecated variables,
	// a dev server listening beyond loopback); the server logs them at start.
	Warnings []string
	// CORSOrigins is SURGE_CORS_ORIGINS, -cors-origins: the browser origins, besides the
	// server's own, that may call the API and open its WebSocket ("https://app.example.com",
	// globs such as "https://*.example.com", or "*"). Dev default: http://localhost:* and
	// http://127.0.0.1:* (a local front-end dev server); production: none.
	CORSOrigins []string
	// CORSCredentials is SURGE_CORS_CREDENTIALS, -cors-credentials (false): allow requests
	// made with credentials (cookies); not with "*". CORSMaxAge is SURGE_CORS_MAX_AGE,
	// -cors-max-age (10m): how long browsers cache a preflight.
	CORSCredentials bool
	CORSMaxAge      time.Duration
	// AllowedHosts is SURGE_ALLOWED_HOSTS, -allowed-hosts: the host names the server answers
	// for (the Host header, any port; globs such as "*.example.com", or "*" for any); other
	// requests get 421 HOST_NOT_ALLOWED, so that a page whose DNS name an attacker points at
	// the server (DNS rebinding) is not served as if it were the server's own. Dev default:
	// localhost, 127.0.0.1, [::1]; production: none set, any host.
	AllowedHosts []string
	// APQ is SURGE_APQ, -apq (true): accept Apollo's automatic persisted queries, stored in
	// -apq-ttl, 24h), documents of at most APQMaxBytes (SURGE_APQ_MAX_BYTES, -apq-max-bytes,
	// 32768) only.
	APQ         bool
	APQTTL      time.Duration
	APQMaxBytes int
	// APQRateIP and APQRateGlobal are SURGE_APQ_RATE_IP, -apq-rate-ip (100/10m) and
	// SURGE_APQ_RATE_GLOBAL, -apq-rate-global (2000/10m): documents stored per client address
	// and server-wide, "N/window" or "off". A registration over either runs but is not stored.
	APQRateIP, APQRateGlobal auth.Rate
	// TrustedDocuments is SURGE_TRUSTED_DOCUMENTS, -trusted-documents: a manifest of the
	// clients' persisted documents (GraphQL Codegen's client preset, Relay, or Apollo's
	// format); when set, only its operations run and APQ is off.
	TrustedDocuments string
	// BatchMax is SURGE_BATCH_MAX, -batch-max (0): the most operations one batched request
	// (a JSON array, as Apollo's BatchHttpLink sends) may hold; 0 refuses batches.
	BatchMax int
	// SeckillStrategy is SURGE_SECKILL_STRATEGY, -seckill-strategy: "lua" (Redis admission,
	// asynchronous orders; default) or "sync" (one database transaction per grab).
	SeckillStrategy string
	// SeckillRate is SURGE_SECKILL_RATE, -seckill-rate: grabs per second per user per server
	// (5, burst 2x); a negative value disables the limit.
	SeckillRate float64
	// SeckillConsumer is SURGE_SECKILL_CONSUMER, -seckill-consumer: run the order stream
	// consumer in this process (true).
	SeckillConsumer bool
	// SeckillClaimIdle is SURGE_SECKILL_CLAIM_IDLE, -seckill-claim-idle (30s): how long an
	// admitted order stays pending with a consumer before another consumer takes it over (the
	// first is presumed dead). Shorter recovers faster from a crashed consumer; it should stay
	// well above the time one batch takes to commit.
	SeckillClaimIdle time.Duration
	// SeckillReaders is SURGE_SECKILL_READERS, -seckill-readers (16): how many vouchers the
	// order consumer of this server persists at once, whatever the number of live vouchers.
	// Its Redis pool holds 2× this and 2 connections.
	SeckillReaders int
	// SeckillReplicaAcks is SURGE_SECKILL_REPLICA_ACKS, -seckill-replica-acks (0: off): a grab
	// is answered with an order only once this many replicas of the Redis master that ran it
	// hold it (WAIT), so that a failover to one of them loses no order told; a grab they do not
	// acknowledge within SeckillReplicaAckTimeout (SURGE_SECKILL_REPLICA_ACK_TIMEOUT,
	// -seckill-replica-ack-timeout, 500ms; at most half the Redis client's 1 s read timeout) is
	// answered UNAVAILABLE (retry). Needs a real Redis with replicas and the lua strategy.
	SeckillReplicaAcks       int
	SeckillReplicaAckTimeout time.Duration
	// StockThrottle is SURGE_STOCK_THROTTLE, -stock-throttle (200ms): the least time between
	// two voucherStock subscription messages of one voucher (after the current value a new
	// subscriber gets at once); 0 sends every change.
	StockThrottle time.Duration
	ShutdownGrace time.Duration
	Observability
}

// DevAdminPhone is the admin phone of the dev default, so the playground can try admin mutations.
const DevAdminPhone = "13800000000"

// Dev reports whether the server runs in dev mode.
func (c Config) Dev() bool { return c.Mode == "dev" }

// Embedded reports whether the server runs on in-process Redis and SQLite.
func (c Config) Embedded() bool { return !c.RealRedis() && c.MySQLDSN == "" }

// RealRedis reports whether the server is given a Redis (addresses or Sentinels) rather than
// the embedded one.
func (c Config) RealRedis() bool { return len(c.RedisAddrs) > 0 || len(c.RedisSentinels) > 0 }

// RedisTarget describes the Redis the server is given, for logs and errors: its addresses, or
// its master's name and Sentinels; "" for the embedded one.
func (c Config) RedisTarget() string {
	if len(c.RedisSentinels) > 0 {
		return "master " + c.RedisMaster + " of Sentinels " + strings.Join(c.RedisSentinels, ",")
	}
	return strings.Join(c.RedisAddrs, ",")
}

// ParseConfig reads the environment, then flags from args (without the subcommand).
func ParseConfig(args []string, getenv func(string) string) (Config, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	build := ConfigFlags(fs, getenv)
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return build()
}

// ConfigFlags defines the configuration flags on fs, their defaults taken from the
// environment (getenv; nil: os.Getenv), for commands that add flags of their own. Once fs
// is parsed, build checks the values and returns the Config.
func ConfigFlags(fs *flag.FlagSet, getenv func(string) string) (build func() (Config, error)) {
	if getenv == nil {
		getenv = os.Getenv
	}
	ev := &envVars{getenv: getenv}
	env := ev.str
	addr := fs.String("addr", env("SURGE_ADDR", ""), "listen address (SURGE_ADDR; default 127.0.0.1:8080 in dev mode, :8080 in production)")
	dataDir := fs.String("data-dir", env("SURGE_DATA_DIR", "./data"), "directory for the embedded SQLite file (SURGE_DATA_DIR)")
	redisAddrs := fs.String("redis-addrs", env("SURGE_REDIS_ADDRS", ""), "comma-separated Redis addresses; several mean Cluster; empty means embedded (SURGE_REDIS_ADDRS)")
	redisPassword := fs.String("redis-password", env("SURGE_REDIS_PASSWORD", ""), "Redis password (SURGE_REDIS_PASSWORD)")
	redisSentinels := fs.String("redis-sentinels", env("SURGE_REDIS_SENTINELS", ""), "comma-separated Sentinel addresses watching -redis-master, instead of -redis-addrs (SURGE_REDIS_SENTINELS)")
	redisMaster := fs.String("redis-master", env("SURGE_REDIS_MASTER", ""), "the master's name in Sentinel, with -redis-sentinels (SURGE_REDIS_MASTER)")
	redisSentinelPassword := fs.String("redis-sentinel-password", env("SURGE_REDIS_SENTINEL_PASSWORD", ""), "the Sentinels' password, if they have one (SURGE_REDIS_SENTINEL_PASSWORD)")
	dsn := fs.String("mysql-dsn", env("SURGE_MYSQL_DSN", ""), "MySQL DSN, e.g. user:pass@tcp(host:3306)/surge; empty means SQLite (SURGE_MYSQL_DSN)")
	mysqlMaxConns := fs.Int("mysql-max-conns", ev.int("SURGE_MYSQL_MAX_CONNS", store.DefaultMaxConns), "most connections this server opens to MySQL; servers × this must stay below max_connections (SURGE_MYSQL_MAX_CONNS)")
	redisPoolSize := fs.Int("redis-pool-size", ev.int("SURGE_REDIS_POOL_SIZE", 0), "connections of the main Redis client; 0 means go-redis's default, 10 per CPU (SURGE_REDIS_POOL_SIZE)")
	gcMinHeap := fs.Int("gc-min-heap-mb", ev.int("SURGE_GC_MIN_HEAP_MB", 128), "the heap in MiB the garbage collector lets grow before it collects, at least; 0: Go's default; ignored when GOGC is set (SURGE_GC_MIN_HEAP_MB)")
	mode := fs.String("mode", env("SURGE_MODE", ""), `"dev" or "production" (SURGE_MODE; default dev when embedded, else production)`)
	admins := fs.String("admin-phones", env("SURGE_ADMIN_PHONES", ""), "comma-separated phones with role ADMIN, read on every request (SURGE_ADMIN_PHONES)")
	seed := fs.String("seed", env("SURGE_SEED", ""), "seed demo data into an empty database: true/false (SURGE_SEED; default: dev mode)")
	intro := fs.String("introspection", env("SURGE_INTROSPECTION", ""), "allow schema introspection: true/false (SURGE_INTROSPECTION; default: dev mode)")
	maxComplexity := fs.Int("max-complexity", ev.int("SURGE_MAX_COMPLEXITY", 3000), "complexity budget per operation (SURGE_MAX_COMPLEXITY)")
	maxDepth := fs.Int("max-depth", ev.int("SURGE_MAX_DEPTH", 10), "maximum query depth (SURGE_MAX_DEPTH)")
	maxTokens := fs.Int("max-tokens", ev.int("SURGE_MAX_TOKENS", 2000), "maximum lexical tokens of a document, and JSON values of its variables (SURGE_MAX_TOKENS)")
	maxNesting := fs.Int("max-nesting", ev.int("SURGE_MAX_NESTING", 32), "maximum nesting of braces, brackets and parentheses in a document, and of its variables (SURGE_MAX_NESTING)")
	maxFields := fs.Int("max-fields", ev.int("SURGE_MAX_FIELDS", 500), "maximum field selections of a document, fragments counted where spread (SURGE_MAX_FIELDS)")
	requestTimeout := fs.Duration("request-timeout", ev.duration("SURGE_REQUEST_TIMEOUT", 5*time.Second), "deadline of each request; its work is cancelled then (SURGE_REQUEST_TIMEOUT)")
	dbBudget := fs.Duration("db-budget", ev.duration("SURGE_DB_BUDGET", 80*time.Millisecond), "database time the statements of one request's queries may take together, admins' excepted; 0: off, the request deadline alone (SURGE_DB_BUDGET)")
	sessionCache := fs.Duration("session-cache", ev.duration("SURGE_SESSION_CACHE", time.Second), "how long a session read from Redis is answered from memory; a logout through another server is honoured within it; 0: off (SURGE_SESSION_CACHE)")
	sessionSlide := fs.Duration("session-slide", ev.duration("SURGE_SESSION_SLIDE", time.Minute), "how often, at most, a server slides a session's idle TTL while it is in use; 0: on every request (SURGE_SESSION_SLIDE)")
	sessionMaxAge := fs.Duration("session-max-age", ev.duration("SURGE_SESSION_MAX_AGE", 24*time.Hour), "how long after its login a session ends, however busy (SURGE_SESSION_MAX_AGE)")
	proxyHeader := fs.String("trusted-proxy-header", env("SURGE_TRUSTED_PROXY_HEADER", ""), "header whose last address is the client's, behind a reverse proxy, e.g. X-Forwarded-For (SURGE_TRUSTED_PROXY_HEADER)")
	sendRateIP := fs.String("login-send-rate-ip", env("SURGE_LOGIN_SEND_RATE_IP", ""), `login code sends per client address, "N/window" or "off" (SURGE_LOGIN_SEND_RATE_IP; default 20/1h, dev mode off)`)
	sendRateGlobal := fs.String("login-send-rate-global", env("SURGE_LOGIN_SEND_RATE_GLOBAL", ""), `login code sends server-wide to phones of existing users, "N/window" or "off" (SURGE_LOGIN_SEND_RATE_GLOBAL; default 1000/1m, dev mode off)`)
	sendRateNew := fs.String("login-send-rate-new", env("SURGE_LOGIN_SEND_RATE_NEW", ""), `login code sends server-wide to phones of no user yet, "N/window" or "off" (SURGE_LOGIN_SEND_RATE_NEW; default 200/1m, dev mode off)`)
	codeSender := fs.String("login-code-sender", env("SURGE_LOGIN_CODE_SENDER", ""), `how login codes reach their phones: "none" (nowhere; dev mode logs them and sendLoginCode returns them), "log" (written to this server's log at WARN) or "webhook:<url>" (POSTed as JSON) (SURGE_LOGIN_CODE_SENDER; default none)`)
	wsSubs := fs.Int("ws-max-subscriptions", ev.int("SURGE_WS_MAX_SUBSCRIPTIONS", 10), "subscriptions one WebSocket connection may run at once (SURGE_WS_MAX_SUBSCRIPTIONS)")
	wsConns := fs.Int("ws-max-connections-per-ip", ev.int("SURGE_WS_MAX_CONNECTIONS_PER_IP", 50), "WebSocket connections one client address may hold open (SURGE_WS_MAX_CONNECTIONS_PER_IP)")
	readTimeout := fs.Duration("read-timeout", ev.duration("SURGE_READ_TIMEOUT", 10*time.Second), "how long a client may take to send one request (SURGE_READ_TIMEOUT)")
	namespace := fs.String("namespace", env("SURGE_NAMESPACE", ""), `start of every Redis key, so deployments can share one Redis (SURGE_NAMESPACE; default "surge")`)
	takeOver := fs.String("take-over-namespace", env("SURGE_TAKE_OVER_NAMESPACE", ""), "the deployment id the namespace is bound to, to take the namespace over from it for good, deleting its keys (SURGE_TAKE_OVER_NAMESPACE)")
	namespaceCheck := fs.Duration("namespace-check-interval", ev.duration("SURGE_NAMESPACE_CHECK_INTERVAL", 5*time.Second), "how often a running server checks that its namespace is still bound to its database (SURGE_NAMESPACE_CHECK_INTERVAL)")
	corsOrigins := fs.String("cors-origins", env("SURGE_CORS_ORIGINS", ""), `browser origins that may call the API besides its own, comma-separated: "https://app.example.com", "https://*.example.com" or "*" (SURGE_CORS_ORIGINS; dev default http://localhost:*,http://127.0.0.1:*)`)
	corsCredentials := fs.String("cors-credentials", env("SURGE_CORS_CREDENTIALS", ""), "allow cross-origin requests with credentials (cookies): true/false; not with the origin * (SURGE_CORS_CREDENTIALS; default false)")
	allowedHosts := fs.String("allowed-hosts", env("SURGE_ALLOWED_HOSTS", ""), `host names the server answers for (Host header, any port), comma-separated: "api.example.com", "*.example.com" or "*" (SURGE_ALLOWED_HOSTS; dev default localhost,127.0.0.1,[::1]; production: any)`)
	corsMaxAge := fs.Duration("cors-max-age", ev.duration("SURGE_CORS_MAX_AGE", 10*time.Minute), "how long browsers may cache a CORS preflight (SURGE_CORS_MAX_AGE)")
	apq := fs.String("apq", env("SURGE_APQ", ""), "accept automatic persisted queries (Apollo), stored in Redis: true/false (SURGE_APQ; default true)")
	apqTTL := fs.Duration("apq-ttl", ev.duration("SURGE_APQ_TTL", 24*time.Hour), "how long a persisted query stays in Redis after its last use (SURGE_APQ_TTL)")
	apqRateIP := fs.String("apq-rate-ip", env("SURGE_APQ_RATE_IP", ""), `persisted queries stored per client address, "N/window" or "off"; one over it runs, not stored (SURGE_APQ_RATE_IP; default 100/10m)`)
	apqRateGlobal := fs.String("apq-rate-global", env("SURGE_APQ_RATE_GLOBAL", ""), `persisted queries stored server-wide, "N/window" or "off" (SURGE_APQ_RATE_GLOBAL; default 2000/10m)`)
	apqMaxBytes := fs.Int("apq-max-bytes", ev.int("SURGE_APQ_MAX_BYTES", 32<<10), "largest document stored as a persisted query; larger ones run but are not stored (SURGE_APQ_MAX_BYTES)")
	trusted := fs.String("trusted-documents", env("SURGE_TRUSTED_DOCUMENTS", ""), "manifest of trusted documents (JSON: id → document, or Apollo's persisted query manifest); when set, only these operations run (SURGE_TRUSTED_DOCUMENTS)")
	batchMax := fs.Int("batch-max", ev.int("SURGE_BATCH_MAX", 0), "most operations in one batched request (a JSON array); 0 refuses batches (SURGE_BATCH_MAX)")
	strategy := fs.String("seckill-strategy", env("SURGE_SECKILL_STRATEGY", "lua"), `seckill strategy: "lua" or "sync" (SURGE_SECKILL_STRATEGY)`)
	rate := fs.Float64("seckill-rate", ev.float("SURGE_SECKILL_RATE", 5), "grabs per second per user per server, burst twice that; negative disables (SURGE_SECKILL_RATE)")
	consumer := fs.String("seckill-consumer", env("SURGE_SECKILL_CONSUMER", ""), "run the order stream consumer in this process: true/false (SURGE_SECKILL_CONSUMER; default true)")
	readers := fs.Int("seckill-readers", ev.int("SURGE_SECKILL_READERS", seckill.DefaultReaders), "how many vouchers the order consumer of this server persists at once, whatever the number of live vouchers; its Redis pool holds 2x this + 2 connections (SURGE_SECKILL_READERS)")
	replicaAcks := fs.Int("seckill-replica-acks", ev.int("SURGE_SECKILL_REPLICA_ACKS", 0), "answer a grab with an order only once this many Redis replicas hold it (WAIT); 0: off (SURGE_SECKILL_REPLICA_ACKS)")
	replicaAckTimeout := fs.Duration("seckill-replica-ack-timeout", ev.duration("SURGE_SECKILL_REPLICA_ACK_TIMEOUT", 500*time.Millisecond), "how long a grab waits for -seckill-replica-acks replicas before it is answered UNAVAILABLE (retry); at most 500ms (SURGE_SECKILL_REPLICA_ACK_TIMEOUT)")
	claimIdle := fs.Duration("seckill-claim-idle", ev.duration("SURGE_SECKILL_CLAIM_IDLE", 30*time.Second), "how long an admitted order stays pending with a consumer before another one takes it over (SURGE_SECKILL_CLAIM_IDLE)")
	observability := observabilityFlags(fs, ev)
	stockThrottle := fs.Duration("stock-throttle", ev.duration("SURGE_STOCK_THROTTLE", 200*time.Millisecond), "least time between two voucherStock subscription messages of one voucher; 0 sends every change (SURGE_STOCK_THROTTLE)")
	return func() (Config, error) {
		// A variable that does not parse is fatal: falling back to the default would run the
		// server with a setting nobody chose (SURGE_SECKILL_CLAIM_IDLE=30 meant 30 s).
		if err := ev.err(); err != nil {
			return Config{}, err
		}
		redisAddrs, err := splitAddrs("redis-addrs", *redisAddrs)
		if err != nil {
			return Config{}, err
		}
		sentinels, err := splitAddrs("redis-sentinels", *redisSentinels)
		if err != nil {
			return Config{}, err
		}
		if err := checkSentinel(redisAddrs, sentinels, strings.TrimSpace(*redisMaster)); err != nil {
			return Config{}, err
		}
		c := Config{
			Addr: *addr, DataDir: *dataDir, RedisAddrs: redisAddrs, RedisPassword: *redisPassword,
			RedisSentinels: sentinels, RedisMaster: strings.TrimSpace(*redisMaster), RedisSentinelPassword: *redisSentinelPassword,
			MySQLDSN: *dsn, MySQLMaxConns: *mysqlMaxConns, RedisPoolSize: *redisPoolSize, GCMinHeapMB: *gcMinHeap, Mode: *mode, AdminPhones: commalist.Split(*admins),
			MaxComplexity: *maxComplexity, MaxDepth: *maxDepth, ShutdownGrace: 15 * time.Second,
			SeckillStrategy: *strategy, SeckillRate: *rate, StockThrottle: *stockThrottle,
			SeckillClaimIdle: *claimIdle, SeckillReaders: *readers,
			SeckillReplicaAcks: *replicaAcks, SeckillReplicaAckTimeout: *replicaAckTimeout,
			MaxTokens: *maxTokens, MaxNesting: *maxNesting, MaxFields: *maxFields,
			RequestTimeout: *requestTimeout, ReadTimeout: *readTimeout, DBBudget: *dbBudget,
			SessionCache: *sessionCache, SessionSlide: *sessionSlide, SessionMaxAge: *sessionMaxAge,
			TrustedProxyHeader: strings.TrimSpace(*proxyHeader),
			WSMaxSubscriptions: *wsSubs, WSMaxConnectionsPerIP: *wsConns,
			CORSOrigins: commalist.Split(*corsOrigins), CORSMaxAge: *corsMaxAge, AllowedHosts: commalist.Split(*allowedHosts),
			APQTTL: *apqTTL, APQMaxBytes: *apqMaxBytes, TrustedDocuments: strings.TrimSpace(*trusted),
			BatchMax:          *batchMax,
			TakeOverNamespace: strings.TrimSpace(*takeOver), NamespaceCheckInterval: *namespaceCheck,
		}
		if err := observability(&c); err != nil {
			return Config{}, err
		}
		if c.SeckillReaders <= 0 {
			return Config{}, fmt.Errorf("%s: %v must be positive", setting("seckill-readers"), c.SeckillReaders)
		}
		if c.SeckillClaimIdle <= 0 {
			return Config{}, fmt.Errorf("%s: %v must be positive", setting("seckill-claim-idle"), c.SeckillClaimIdle)
		}
		if c.MySQLMaxConns <= 0 {
			return Config{}, fmt.Errorf("mysql-max-conns must be positive")
		}
		if c.RedisPoolSize < 0 {
			return Config{}, fmt.Errorf("redis-pool-size must not be negative")
		}
		if c.GCMinHeapMB < 0 {
			return Config{}, fmt.Errorf("gc-min-heap-mb must not be negative (0 leaves the collector at Go's default)")
		}
		if c.StockThrottle < 0 {
			return Config{}, fmt.Errorf("stock-throttle must not be negative")
		}
		if c.SeckillStrategy != "lua" && c.SeckillStrategy != "sync" {
			return Config{}, fmt.Errorf("invalid seckill strategy %q: want lua or sync", c.SeckillStrategy)
		}
		if err := c.checkReplicaAcks(); err != nil {
			return Config{}, err
		}
		if c.Mode == "" {
			c.Mode = "production"
			if c.Embedded() {
				c.Mode = "dev"
			}
		}
		if c.Mode != "dev" && c.Mode != "production" {
			return Config{}, fmt.Errorf("invalid mode %q: want dev or production", c.Mode)
		}
		if err := c.parseListen(); err != nil {
			return Config{}, err
		}
		if c.Seed, err = parseBool("seed", *seed, c.Dev()); err != nil {
			return Config{}, err
		}
		if c.SeckillConsumer, err = parseBool("seckill-consumer", *consumer, true); err != nil {
			return Config{}, err
		}
		if c.Introspection, err = parseBool("introspection", *intro, c.Dev()); err != nil {
			return Config{}, err
		}
		if c.LoginSendRateIP, err = parseRate("login-send-rate-ip", *sendRateIP, productionOnly(c, defaultSendRateIP)); err != nil {
			return Config{}, err
		}
		if c.LoginSendRateGlobal, err = parseRate("login-send-rate-global", *sendRateGlobal, productionOnly(c, defaultSendRateGlobal)); err != nil {
			return Config{}, err
		}
		if c.LoginSendRateNew, err = parseRate("login-send-rate-new", *sendRateNew, productionOnly(c, defaultSendRateNew)); err != nil {
			return Config{}, err
		}
		if c.LoginCodeSender, err = parseCodeSender(*codeSender); err != nil {
			return Config{}, err
		}
		if c.LoginCodeSender.Kind == SenderLog && !c.Dev() {
			c.Warnings = append(c.Warnings, "SURGE_LOGIN_CODE_SENDER=log: login codes are written to this server's log, so whoever reads it can log in as any phone, admins included; deliver them by webhook or an SMS gateway for real users")
		}
		if c.APQ, err = parseBool("apq", *apq, true); err != nil {
			return Config{}, err
		}
		if c.APQRateIP, err = parseRate("apq-rate-ip", *apqRateIP, defaultAPQRateIP); err != nil {
			return Config{}, err
		}
		if c.APQRateGlobal, err = parseRate("apq-rate-global", *apqRateGlobal, defaultAPQRateGlobal); err != nil {
			return Config{}, err
		}
		if c.APQTTL <= 0 || c.APQMaxBytes <= 0 {
			return Config{}, fmt.Errorf("apq-ttl and apq-max-bytes must be positive")
		}
		if c.BatchMax < 0 {
			return Config{}, fmt.Errorf("batch-max must not be negative")
		}
		if err := c.parseCORS(*corsCredentials); err != nil {
			return Config{}, err
		}
		for _, p := range c.AdminPhones { // a typo would leave the intended admin without the role
			if auth.ValidatePhone(p) != nil {
				return Config{}, fmt.Errorf("%s: %q is not a phone number (11 digits like 13812345678)", setting("admin-phones"), p)
			}
		}
		if len(c.AdminPhones) == 0 && c.Dev() {
			c.AdminPhones = []string{DevAdminPhone}
		}
		var warnings []string
		c.Namespace, warnings = namespaceOf(*namespace, getenv)
		c.Warnings = append(c.Warnings, warnings...)
		if err := validNamespace(c.Namespace); err != nil {
			return Config{}, err
		}
		if c.NamespaceCheckInterval <= 0 {
			return Config{}, fmt.Errorf("%s: %v must be positive", setting("namespace-check-interval"), c.NamespaceCheckInterval)
		}
		if c.MaxComplexity <= 0 || c.MaxDepth <= 0 || c.MaxTokens <= 0 || c.MaxNesting <= 0 || c.MaxFields <= 0 {
			return Config{}, fmt.Errorf("max-complexity, max-depth, max-tokens, max-nesting and max-fields must be positive")
		}
		if c.WSMaxSubscriptions <= 0 || c.WSMaxConnectionsPerIP <= 0 {
			return Config{}, fmt.Errorf("ws-max-subscriptions and ws-max-connections-per-ip must be positive")
		}
		if c.RequestTimeout <= 0 || c.ReadTimeout <= 0 {
			return Config{}, fmt.Errorf("request-timeout and read-timeout must be positive")
		}
		if c.DBBudget < 0 {
			return Config{}, fmt.Errorf("%s: %v must be 0 (off) or positive", setting("db-budget"), c.DBBudget)
		}
		if c.SessionCache < 0 || c.SessionSlide < 0 {
			return Config{}, fmt.Errorf("session-cache and session-slide must be 0 (off) or positive")
		}
		if c.SessionMaxAge <= 0 {
			return Config{}, fmt.Errorf("%s: %v must be positive", setting("session-max-age"), c.SessionMaxAge)
		}
		return c, nil
	}
}

// checkReplicaAcks refuses replica acknowledgements that could never be given (the embedded
// Redis has no replicas; the sync strategy admits in the database) or that would outlast the
// Redis client's read of their reply (which would then be cut and the pipeline sent again).
func (c Config) checkReplicaAcks() error {
	switch {
	case c.SeckillReplicaAcks < 0:
		return fmt.Errorf("%s: %d must not be negative (0: off)", setting("seckill-replica-acks"), c.SeckillReplicaAcks)
	case c.SeckillReplicaAcks == 0:
		return nil
	case c.SeckillStrategy != "lua":
		return fmt.Errorf("%s needs the lua seckill strategy (sync admits in the database)", setting("seckill-replica-acks"))
	case len(c.RedisAddrs) == 0:
		return fmt.Errorf("%s needs a real Redis with replicas (SURGE_REDIS_ADDRS), not the embedded one", setting("seckill-replica-acks"))
	case c.SeckillReplicaAckTimeout < time.Millisecond || c.SeckillReplicaAckTimeout > redisReadTimeout/2:
		return fmt.Errorf("%s: %v must be within 1ms and %v (half the Redis client's read timeout)", setting("seckill-replica-ack-timeout"), c.SeckillReplicaAckTimeout, redisReadTimeout/2)
	}
	return nil
}

// DefaultNamespace starts every key of a deployment that sets no SURGE_NAMESPACE.
const DefaultNamespace = "surge"

// maxNamespaceLen keeps keys short: the namespace is repeated in every key.
const maxNamespaceLen = 64

// Variables of the per-part prefixes that SURGE_NAMESPACE replaced. Deployments kept apart by
// them stay apart: the first one set becomes the namespace, with a warning.
var deprecatedPrefixVars = []string{"SURGE_SECKILL_PREFIX", "SURGE_CACHE_PREFIX"}

// namespaceOf is the namespace given (flag or SURGE_NAMESPACE), else the first deprecated
// prefix set, else DefaultNamespace; with a warning for each deprecated variable set.
func namespaceOf(given string, getenv func(string) string) (ns string, warnings []string) {
	ns = strings.TrimSpace(given)
	for _, k := range deprecatedPrefixVars {
		old := strings.TrimSpace(getenv(k))
		if old == "" {
			continue
		}
		if ns == "" {
			ns = old
			warnings = append(warnings, fmt.Sprintf("%s is deprecated: every key now starts with SURGE_NAMESPACE, taken from it (%q); set SURGE_NAMESPACE instead", k, old))
			continue
		}
		warnings = append(warnings, fmt.Sprintf("%s is deprecated and ignored: every key starts with SURGE_NAMESPACE (%q)", k, ns))
	}
	if ns == "" {
		ns = DefaultNamespace
	}
	return ns, warnings
}

// validNamespace refuses what would break keys: braces would make a hash tag of part of it,
// spaces and control characters are unreadable in redis-cli, and a colon at either end would
// give keys an empty segment.
func validNamespace(ns string) error {
	bad := strings.ContainsFunc(ns, func(r rune) bool { return r == '{' || r == '}' || unicode.IsSpace(r) || unicode.IsControl(r) })
	if bad || len(ns) > maxNamespaceLen || strings.HasPrefix(ns, ":") || strings.HasSuffix(ns, ":") {
		return fmt.Errorf("invalid namespace %q: at most %d characters, no braces, spaces or control characters, no colon at either end", ns, maxNamespaceLen)
	}
	return nil
}

// SeckillKeyPrefix is the start of a voucher's sale keys in this deployment (seckill.KeysOf's
// prefix): <namespace>:seckill.
func (c Config) SeckillKeyPrefix() string {
	return seckill.KeyPrefix(c.Namespace, seckill.DefaultPrefix)
}

// Default listen addresses: a dev server hands out login codes (the admin's too), so it
// listens on loopback unless told otherwise.
const (
	devAddr        = "127.0.0.1:8080"
	productionAddr = ":8080"
)

// parseListen completes and checks the listen address and the Host allowlist. A dev server
// told to listen beyond loopback keeps the loopback Host allowlist unless SURGE_ALLOWED_HOSTS
// names the hosts it is reached by, and says so in a warning.
func (c *Config) parseListen() error {
	if c.Addr == "" {
		c.Addr = productionAddr
		if c.Dev() {
			c.Addr = devAddr
		}
	}
	if _, err := splitAddrs("addr", c.Addr); err != nil {
		return err
	}
	if len(c.AllowedHosts) == 0 && c.Dev() {
		c.AllowedHosts = slices.Clone(server.DevHosts)
		if !loopbackAddr(c.Addr) {
			c.Warnings = append(c.Warnings, fmt.Sprintf("dev mode hands out login codes and listens on %s, beyond loopback; it answers only for the hosts %s (set SURGE_ALLOWED_HOSTS for the names it is reached by)", c.Addr, strings.Join(c.AllowedHosts, ",")))
		}
	}
	if err := server.ValidateHosts(c.AllowedHosts); err != nil {
		return fmt.Errorf("%s: %w", setting("allowed-hosts"), err)
	}
	return nil
}

// loopbackAddr reports whether a listen address (host:port) stays on this machine.
func loopbackAddr(addr string) bool {
	host, _, _ := net.SplitHostPort(addr)
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// devCORSOrigins let a front-end dev server on the developer's machine call a dev server.
var devCORSOrigins = []string{"http://localhost:*", "http://127.0.0.1:*"}

// parseCORS completes and checks the CORS settings.
func (c *Config) parseCORS(credentials string) error {
	var err error
	if c.CORSCredentials, err = parseBool("cors-credentials", credentials, false); err != nil {
		return err
	}
	if len(c.CORSOrigins) == 0 && c.Dev() {
		c.CORSOrigins = devCORSOrigins
	}
	if c.CORSMaxAge <= 0 {
		return fmt.Errorf("cors-max-age must be positive")
	}
	return c.CORS().Validate()
}

// CORS is the server's CORS configuration.
func (c Config) CORS() server.CORS {
	return server.CORS{Origins: c.CORSOrigins, Credentials: c.CORSCredentials, MaxAge: c.CORSMaxAge}
}

// Default login code send rates of a production server: a client may log in a few phones an
// hour; server-wide, SMS spend stays bounded under any spread of addresses, and sends to new
// phones (any number will do to fill a window) have a window apart from returning users'.
var (
	defaultSendRateIP     = auth.Rate{Count: 20, Window: time.Hour}
	defaultSendRateGlobal = auth.Rate{Count: 1000, Window: time.Minute}
	defaultSendRateNew    = auth.Rate{Count: 200, Window: time.Minute}
)

// Default persisted-query registration rates: an application's documents are registered once,
// by its first client; a client making up documents cannot fill Redis at its request rate.
var (
	defaultAPQRateIP     = auth.Rate{Count: 100, Window: 10 * time.Minute}
	defaultAPQRateGlobal = auth.Rate{Count: 2000, Window: 10 * time.Minute}
)

// productionOnly is r in production mode and no limit in dev mode, where codes are returned
// to the client and nothing is delivered.
func productionOnly(c Config, r auth.Rate) auth.Rate {
	if c.Dev() {
		return auth.Rate{}
	}
	return r
}

// parseRate reads "N/window" (20/1h, 5/30s) or "off"; empty gives def.
func parseRate(name, v string, def auth.Rate) (auth.Rate, error) {
	switch v = strings.TrimSpace(v); v {
	case "":
		return def, nil
	case "off":
		return auth.Rate{}, nil
	}
	n, w, ok := strings.Cut(v, "/")
	count, err := strconv.Atoi(n)
	window, werr := time.ParseDuration(w)
	if !ok || err != nil || werr != nil || count <= 0 || window <= 0 {
		return auth.Rate{}, fmt.Errorf(`%s: %q is not "N/window" (e.g. 20/1h) or "off"`, setting(name), v)
	}
	return auth.Rate{Count: count, Window: window}, nil
}

// envVars reads the SURGE_* variables that give the flags their defaults. A value that does
// not parse is recorded as an error naming the variable and the value: unset gives the
// default, a typo never does.
type envVars struct {
	getenv func(string) string
	errs   []error
}

// str is variable k, def when unset or blank.
func (e *envVars) str(k, def string) string {
	if v := strings.TrimSpace(e.getenv(k)); v != "" {
		return v
	}
	return def
}

// parsed reads variable k with parse; unset gives def, a value parse refuses an error.
func parsed[T any](e *envVars, k string, def T, parse func(string) (T, error), want string) T {
	v := strings.TrimSpace(e.getenv(k))
	if v == "" {
		return def
	}
	x, err := parse(v)
	if err != nil {
		e.errs = append(e.errs, fmt.Errorf("%s: %q is not %s", k, v, want))
		return def
	}
	return x
}

func (e *envVars) int(k string, def int) int {
	return parsed(e, k, def, strconv.Atoi, "an integer")
}

func (e *envVars) duration(k string, def time.Duration) time.Duration {
	return parsed(e, k, def, time.ParseDuration, "a duration (e.g. 30s)")
}

func (e *envVars) float(k string, def float64) float64 {
	return parsed(e, k, def, func(v string) (float64, error) { return strconv.ParseFloat(v, 64) }, "a number")
}

func (e *envVars) err() error { return errors.Join(e.errs...) }

// setting names a flag and its variable in errors: "-seed (SURGE_SEED)".
func setting(flag string) string {
	return "-" + flag + " (SURGE_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_")) + ")"
}

func parseBool(name, v string, def bool) (bool, error) {
	if v == "" {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s: %q is not true or false", setting(name), v)
	}
	return b, nil
}

// checkSentinel refuses a Sentinel configuration that is half there, or given with addresses:
// the server would otherwise run on something else than what was meant.
func checkSentinel(addrs, sentinels []string, master string) error {
	switch {
	case len(sentinels) > 0 && len(addrs) > 0:
		return fmt.Errorf("%s and %s both set: give the Redis addresses (a node or a Cluster) or the Sentinels that watch the master, not both", setting("redis-addrs"), setting("redis-sentinels"))
	case len(sentinels) > 0 && master == "":
		return fmt.Errorf("%s needs %s: the name the Sentinels know the master by", setting("redis-sentinels"), setting("redis-master"))
	case len(sentinels) == 0 && master != "":
		return fmt.Errorf("%s needs %s: the Sentinels that watch master %q", setting("redis-master"), setting("redis-sentinels"), master)
	}
	return nil
}

// splitAddrs reads a comma-separated list of host:port addresses.
func splitAddrs(name, s string) ([]string, error) {
	addrs := commalist.Split(s)
	for _, a := range addrs {
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			return nil, fmt.Errorf("%s: %q is not a host:port address", setting(name), a)
		}
	}
	return addrs, nil
}
