// Package app wires configuration, storage, Redis and the HTTP surface into a runnable server.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/cache"
	"github.com/surgekit/surge/redisfailover"

	gql "github.com/surgekit/surge/graph"
	"github.com/surgekit/surge/internal/auth"
	"github.com/surgekit/surge/internal/autopipe"
	"github.com/surgekit/surge/internal/catalog"
	"github.com/surgekit/surge/internal/live"
	"github.com/surgekit/surge/internal/playground"
	"github.com/surgekit/surge/internal/server"
	"github.com/surgekit/surge/internal/store"
	"github.com/surgekit/surge/internal/telemetry"
	"github.com/surgekit/surge/seckill"
)

// App is a wired server: its dependencies and its root HTTP handler.
type App struct {
	Config  Config
	DB      *store.DB
	Redis   redis.UniversalClient
	Auth    *auth.Service
	Catalog *catalog.Service
	Seckill *seckill.Service
	Live    *live.Hub // subscriptions' pollers
	Handler http.Handler
	// AdminHandler serves /metrics and the playground on Config.AdminAddr; nil without one
	// (Handler serves them then).
	AdminHandler http.Handler
	Log          *slog.Logger
	Seeded       bool
	// Deployment is the deployment's identity, kept in its database (store.DB.DeploymentID):
	// sessions and login codes of another deployment are refused.
	Deployment string

	namespace     *namespaceGuard    // nil for Connect's tools
	stopConsumer  func()             // stops the order consumer at once (idempotent); nil without one
	tracing       *telemetry.Tracing // nil: tracing off
	streams       redis.UniversalClient
	redisAddrs    []string
	embeddedRedis bool // the embedded default's in-process Redis
	closers       []func() error
	once          sync.Once
}

// Options lets callers (tests, tools) replace parts of the wiring.
type Options struct {
	Logger     *slog.Logger
	CodeSender auth.CodeSender
}

// New builds the App: opens Redis (embedded or real) and the database (SQLite or MySQL),
// migrates, seeds when configured, and assembles the handler.
func New(ctx context.Context, cfg Config, opts Options) (_ *App, err error) {
	a, err := open(ctx, cfg, opts, true)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			a.Close()
		}
	}()
	for _, w := range cfg.Warnings {
		a.Log.Warn(w)
	}
	if cfg.Seed {
		if a.Seeded, err = store.SeedDemo(ctx, a.DB.Ent, time.Now()); err != nil {
			return nil, fmt.Errorf("seeding demo data: %w", err)
		}
	}
	if a.Deployment, err = a.DB.DeploymentID(ctx); err != nil {
		return nil, err
	}
	if err := a.claimNamespace(ctx); err != nil {
		return nil, err
	}
	registry := prometheus.NewRegistry()
	sender := opts.CodeSender
	if sender == nil {
		sender = codeSender(cfg.LoginCodeSender, cfg.Dev(), a.Log)
	}
	sessions := autopipe.New(a.Redis, 2, 256)
	a.closers = append(a.closers, func() error { sessions.Close(); return nil })
	a.Auth = auth.New(a.Redis, a.DB.Ent, auth.Options{Pipe: sessions, AdminPhones: cfg.AdminPhones, DevMode: cfg.Dev(), Sender: sender,
		SendsPerClient: cfg.LoginSendRateIP, SendsGlobal: cfg.LoginSendRateGlobal, SendsNew: cfg.LoginSendRateNew,
		SessionCache: offIfZero(cfg.SessionCache), SlideEvery: offIfZero(cfg.SessionSlide), SessionMaxAge: cfg.SessionMaxAge,
		Namespace: cfg.Namespace, Deployment: a.Deployment, Logger: a.Log, Registerer: registry})
	// Sessions take their role from SURGE_ADMIN_PHONES on every request; the users table (what
	// me.role reads) follows it here, so an admin removed from the list is one nowhere.
	if n, err := a.Auth.SyncRoles(ctx); err != nil {
		return nil, err
	} else if n > 0 {
		a.Log.Info("user roles updated to SURGE_ADMIN_PHONES", "users", n)
	}
	a.Catalog, err = catalog.New(ctx, a.DB.Ent, a.Redis, catalog.CacheOptions{
		Namespace: cfg.Namespace, Metrics: cache.NewMetrics(registry), Logger: a.Log,
	})
	if err != nil {
		return nil, err
	}
	a.closers = append(a.closers, func() error { a.Catalog.Close(); return nil })
	if err := a.startSeckill(ctx, registry); err != nil {
		return nil, err
	}
	throttle := cfg.StockThrottle
	if throttle == 0 {
		throttle = -1 // live.Options: negative is "no throttling", zero the default
	}
	a.Live = live.New(a.Seckill, a.DB.Ent, live.Options{
		StockThrottle: throttle, Logger: a.Log, Registerer: registry, OnError: gql.SubscriptionFailed,
	})
	a.closers = append(a.closers, func() error { a.Live.Close(); return nil })
	a.guardNamespace(registry)
	a.registerPoolStats(registry)
	persisted, err := a.persistedQueries(registry)
	if err != nil {
		return nil, err
	}
	res := &gql.Resolver{DB: a.DB.Ent, Auth: a.Auth, Catalog: a.Catalog, Seckill: a.Seckill, Live: a.Live, Log: a.Log}
	handlers := server.Build(res, server.Options{
		Introspection:          cfg.Introspection,
		Suggestions:            cfg.Dev(),
		MaxComplexity:          cfg.MaxComplexity,
		MaxDepth:               cfg.MaxDepth,
		Limits:                 server.DocumentLimits{MaxTokens: cfg.MaxTokens, MaxNesting: cfg.MaxNesting, MaxFields: cfg.MaxFields},
		RequestTimeout:         cfg.RequestTimeout,
		DBBudget:               cfg.DBBudget,
		TrustedProxyHeader:     cfg.TrustedProxyHeader,
		WebsocketSubscriptions: cfg.WSMaxSubscriptions,
		WebsocketConnections:   cfg.WSMaxConnectionsPerIP,
		CORS:                   cfg.CORS(),
		AllowedHosts:           cfg.AllowedHosts,
		Persisted:              persisted,
		MaxBatch:               cfg.BatchMax,
		Playground:             playground.Handler("/query"),
		Logger:                 a.Log,
		Registry:               registry,
		Health: map[string]func(context.Context) error{
			"redis":     func(ctx context.Context) error { return a.Redis.Ping(ctx).Err() },
			"database":  (&databaseReady{db: a.DB, want: a.Deployment, every: readyEvery}).check,
			"namespace": func(context.Context) error { return a.NamespaceErr() },
		},
		Halted:        func() bool { return a.NamespaceErr() != nil },
		Observability: server.Observability{AccessLog: cfg.AccessLog, Tracer: a.tracerProvider(), AdminSeparate: cfg.AdminAddr != ""},
	})
	a.Handler, a.AdminHandler = handlers.Public, handlers.Admin
	return a, nil
}

// persistedQueries loads the trusted documents, or sets up the APQ store in Redis.
func (a *App) persistedQueries(registry prometheus.Registerer) (server.PersistedQueries, error) {
	cfg := a.Config
	if cfg.TrustedDocuments != "" {
		docs, err := server.LoadTrustedDocuments(cfg.TrustedDocuments)
		if err != nil {
			return server.PersistedQueries{}, err
		}
		a.Log.Info("trusted documents: only these operations run", "documents", docs.Len(), "manifest", cfg.TrustedDocuments)
		return server.PersistedQueries{Trusted: docs}, nil
	}
	if !cfg.APQ {
		return server.PersistedQueries{}, nil
	}
	return server.PersistedQueries{APQ: server.NewAPQStore(a.Redis, server.APQOptions{
		Prefix: cfg.Namespace, TTL: cfg.APQTTL, MaxBytes: cfg.APQMaxBytes,
		PerClient: cfg.APQRateIP, Global: cfg.APQRateGlobal, Registerer: registry,
	})}, nil
}

// Connect opens only what command-line tools need: Redis and the database of cfg, which must
// both be real services (the embedded default keeps nothing a tool could inspect). It neither
// migrates nor seeds, warms no voucher, starts no consumer and builds no handler; App.Redis
// and App.DB are set. Close releases them. A namespace bound to another deployment's database
// is refused (NamespaceTakenError), as New refuses it.
func Connect(ctx context.Context, cfg Config, opts Options) (*App, error) {
	if !cfg.RealRedis() || cfg.MySQLDSN == "" {
		return nil, errors.New("needs real services: set SURGE_REDIS_ADDRS (or SURGE_REDIS_SENTINELS and SURGE_REDIS_MASTER) and SURGE_MYSQL_DSN, or their flags; the embedded default starts empty every time")
	}
	a, err := open(ctx, cfg, opts, false)
	if err != nil {
		return nil, err
	}
	if err := a.checkNamespace(ctx); err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

// open connects Redis and the database (migrating them when asked); on an error it closes
// what it opened.
func open(ctx context.Context, cfg Config, opts Options, migrate bool) (_ *App, err error) {
	a := &App{Config: cfg, Log: opts.Logger}
	if a.Log == nil {
		a.Log = slog.Default()
	}
	defer func() {
		if err != nil {
			a.Close()
		}
	}()
	if err := a.startTracing(ctx); err != nil {
		return nil, err
	}
	if err := a.openRedis(ctx); err != nil {
		return nil, err
	}
	if err := a.openDB(ctx, migrate); err != nil {
		return nil, err
	}
	return a, nil
}

// SeckillOptions are the seckill.Options of cfg (strategy, namespace, rate limit, claim idle,
// dialect), for a seckill.Service on a's database and Redis.
func (a *App) SeckillOptions() seckill.Options {
	return seckill.Options{
		Strategy:  seckill.Strategy(a.Config.SeckillStrategy),
		Namespace: a.Config.Namespace,
		Dialect:   a.DB.Dialect,
		RateLimit: seckill.RateLimit{PerSecond: a.Config.SeckillRate, Burst: int(2 * a.Config.SeckillRate)},
		ClaimIdle: a.Config.SeckillClaimIdle,
		Readers:   a.Config.SeckillReaders,
		// Each order told is on this many replicas first (0: off).
		ReplicaAcks:       a.Config.SeckillReplicaAcks,
		ReplicaAckTimeout: a.Config.SeckillReplicaAckTimeout,
		Logger:            a.Log,
		// The order id counter's fences, in the deployment's database (store.Migrate creates
		// the table): no order id told twice whatever Redis loses.
		EpochStore: a.DB.Epochs(),
	}
}

// startSeckill creates the seckill service, warms the vouchers on sale and starts the order
// stream consumer, whose reads get a connection pool of their own: each reader holds at most
// two connections at once (a read and a prefetch), so the pool is bounded by the readers, not
// by the number of live vouchers.
func (a *App) startSeckill(ctx context.Context, registry prometheus.Registerer) error {
	opts := a.redisOptions(StreamPoolSize(a.Config.SeckillReaders))
	// A gang read is a pipeline, which go-redis would serve from a second pool of its own (10
	// connections, 128 KiB buffers each): it shares the readers' bounded pool instead.
	opts.PipelinePoolSize = -1
	streams := redisfailover.NewClient(opts)
	a.streams = streams
	o := a.SeckillOptions()
	o.Registerer = registry
	o.StreamClient = streams
	var err error
	a.Seckill, err = seckill.New(a.DB.Ent, a.Redis, o)
	if err != nil {
		_ = streams.Close()
		return err
	}
	a.closers = append(a.closers, a.Seckill.Close)
	if err := a.Seckill.WarmAll(ctx); err != nil {
		return err
	}
	if a.Config.SeckillConsumer {
		runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
		done := make(chan struct{})
		go func() {
			defer close(done)
			// It returns when the app stops it; anything else means orders stop reaching
			// the database, which must not pass unnoticed.
			if err := a.Seckill.RunConsumer(runCtx); runCtx.Err() == nil {
				a.Log.Error("the seckill order consumer stopped: admitted orders are not persisted by this process", "err", err)
			}
		}()
		// Closing the stream client ends the readers' reads at once.
		a.stopConsumer = sync.OnceFunc(func() { stop(); _ = streams.Close(); <-done })
		a.closers = append(a.closers, func() error { a.stopConsumer(); return nil })
	} else {
		a.closers = append(a.closers, streams.Close)
	}
	return nil
}

// StreamPoolSize is the size of the order consumer's Redis pool for its readers (per node on a
// Cluster): two connections per reader and two for the waits on Redis (0 readers: the default).
func StreamPoolSize(readers int) int {
	if readers <= 0 {
		readers = seckill.DefaultReaders
	}
	return 2*readers + 2
}

// Timeouts of the server's Redis clients. With ContextTimeoutEnabled a call also ends at its
// context's deadline; without one, a Redis that hangs holds a call for redisReadTimeout per try
// (go-redis's default, 3 s, is long for a request). Blocking reads add their BLOCK time.
const (
	redisDialTimeout = 2 * time.Second
	redisReadTimeout = time.Second
	redisPoolTimeout = 2 * time.Second // waiting for a free connection
	// The embedded default's Redis (miniredis) runs in this process and runs Lua in Go: on a
	// starved machine a script (the Bloom filter's rebuild at start) can take longer than a
	// second, and it cannot hang the way a remote server can. Its calls get longer bounds.
	embeddedRedisTimeout = 10 * time.Second
)

// redisOptions are the options of every Redis client of the server (each built by
// redisfailover.NewClient, which follows a failover on any topology): one address is a single
// node, several a Cluster, Sentinels a master they watch.
func (a *App) redisOptions(poolSize int) *redis.UniversalOptions {
	timeout := redisReadTimeout
	if a.embeddedRedis {
		timeout = embeddedRedisTimeout
	}
	o := &redis.UniversalOptions{
		Addrs:    a.redisAddrs,
		Password: a.Config.RedisPassword,
		// One address is a single node even if it is a Cluster seed; say two for Cluster.
		IsClusterMode: len(a.redisAddrs) > 1,
		PoolSize:      poolSize,
		// Calls end at their context's deadline (a request's), not after ReadTimeout and
		// retries, when Redis hangs.
		ContextTimeoutEnabled: true,
		DialTimeout:           redisDialTimeout,
		ReadTimeout:           timeout,
		WriteTimeout:          timeout,
		PoolTimeout:           redisPoolTimeout,
	}
	if len(a.Config.RedisSentinels) > 0 {
		o.Addrs, o.IsClusterMode = a.Config.RedisSentinels, false
		o.MasterName, o.SentinelPassword = a.Config.RedisMaster, a.Config.RedisSentinelPassword
	}
	return o
}

func (a *App) openRedis(ctx context.Context) error {
	addrs := a.Config.RedisAddrs
	if !a.Config.RealRedis() {
		m := miniredis.NewMiniRedis()
		if err := m.StartAddr("127.0.0.1:0"); err != nil {
			return fmt.Errorf("starting embedded Redis: %w", err)
		}
		stop := driveExpiry(m, 100*time.Millisecond)
		a.closers = append(a.closers, func() error { stop(); m.Close(); return nil })
		addrs = []string{m.Addr()}
		a.embeddedRedis = true
	}
	a.redisAddrs = addrs
	a.Redis = redisfailover.NewClient(a.redisOptions(a.Config.RedisPoolSize))
	a.closers = append(a.closers, a.Redis.Close)
	if a.tracing != nil {
		telemetry.TraceRedis(a.Redis, a.tracing.Provider())
	}
	if err := a.Redis.Ping(ctx).Err(); err != nil {
		target := a.Config.RedisTarget()
		if a.embeddedRedis {
			target = "embedded " + addrs[0]
		}
		return fmt.Errorf("connecting to Redis (%s): %w", target, err)
	}
	return nil
}

// driveExpiry advances miniredis's clock with the wall clock: miniredis never expires keys by
// itself, so without this codes and sessions would live forever in the embedded default.
func driveExpiry(m *miniredis.Miniredis, every time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		last := time.Now()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				m.SetTime(now)
				m.FastForward(now.Sub(last))
				last = now
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

func (a *App) openDB(ctx context.Context, migrate bool) error {
	var err error
	if a.Config.MySQLDSN != "" {
		if a.DB, err = store.OpenMySQL(a.Config.MySQLDSN, a.sqlOpener("mysql")); err == nil {
			a.DB.SetMaxConns(a.Config.MySQLMaxConns)
		}
	} else {
		if err := os.MkdirAll(a.Config.DataDir, 0o755); err != nil {
			return fmt.Errorf("creating data dir: %w", err)
		}
		a.DB, err = store.OpenSQLite(filepath.Join(a.Config.DataDir, "surge.db"), a.sqlOpener("sqlite"))
	}
	if err != nil {
		return err
	}
	a.closers = append(a.closers, a.DB.Close)
	if err := a.DB.Ping(ctx); err != nil {
		return fmt.Errorf("connecting to the database: %w", err)
	}
	if !migrate {
		return nil
	}
	return a.DB.Migrate(ctx)
}

// Close releases everything New opened, in reverse order.
func (a *App) Close() error {
	var errs []error
	a.once.Do(func() {
		for i := len(a.closers) - 1; i >= 0; i-- {
			errs = append(errs, a.closers[i]())
		}
	})
	return errors.Join(errs...)
}

// offIfZero maps a setting's 0 ("off") to the negative that auth.Options reads as off.
func offIfZero(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// StreamClient is the order consumer's Redis client (its own pool), nil before the seckill
// service starts: for tools that measure it (surge bench sales).
func (a *App) StreamClient() redis.UniversalClient { return a.streams }
