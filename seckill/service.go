package seckill

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/ent"
	"github.com/surgekit/surge/ent/seckillorder"
	"github.com/surgekit/surge/idgen"
	"github.com/surgekit/surge/lock"
	"github.com/surgekit/surge/redisctx"
)

// Strategy selects how a grab is decided.
type Strategy string

const (
	// StrategyLua admits in Redis (one script) and persists asynchronously. The default.
	StrategyLua Strategy = "lua"
	// StrategySync decides in one database transaction under a per-user lock.
	StrategySync Strategy = "sync"
)

// Options configures a Service. Zero values take the defaults noted. Each part of the
// service reads its own group of fields (admissionOptions, consumerOptions).
type Options struct {
	Strategy Strategy // StrategyLua
	// Namespace starts every Redis key of the service, so deployments can share a Redis: sale
	// keys <ns>:<Prefix>:{<voucherId>}:…, locks <ns>:lock:{<Prefix>:<voucherId>}, order ids
	// <ns>:id:order:<yyyymmdd>. No braces or spaces, no colon at either end. ("": the keys
	// start with Prefix, "lock:" and "id:")
	Namespace string
	// Prefix names the sale keys and locks (within Namespace). ("seckill")
	Prefix string
	// Dialect is the database's ent dialect: "mysql" or "sqlite3". ("mysql")
	Dialect string
	// Clock gives the time grabs are judged at (the sale window). (time.Now)
	Clock  func() time.Time
	Logger *slog.Logger
	// Registerer receives the surge_seckill_* metrics (the order streams' backlog read from
	// Redis at each scrape) and surge_lock_lost_total. (none)
	Registerer prometheus.Registerer

	// Admission (admission.go).

	RateLimit RateLimit
	// Pipelines is how many batches of admission calls may be in flight at once: concurrent
	// grabs are sent together, one script call per voucher and one round trip per batch.
	// < 0 sends each grab on its own. (2)
	Pipelines int
	// ReplicaAcks, when positive, answers a grab with an order (admitted, or already
	// purchased) only once at least this many replicas of the Redis master that ran it hold
	// it (WAIT, one per pipeline of grabs and master; see replicaack.go): a failover to one
	// of them cannot lose an order told. A grab not acknowledged within ReplicaAckTimeout is
	// answered ErrReplicationTimeout; its admission stands, and a retry names the order once
	// the replicas have it. StrategyLua only. (0: off)
	ReplicaAcks int
	// ReplicaAckTimeout bounds the wait for ReplicaAcks (a grab's deadline bounds it further).
	// At most half the Redis client's ReadTimeout: go-redis reads a pipeline's replies within
	// ReadTimeout, and sends the whole pipeline again when the read times out. (500 ms)
	ReplicaAckTimeout time.Duration

	// Order consumer (consumer.go; StrategyLua).

	// StreamClient serves the consumer's reads (each reader holds at most two connections at
	// once: a read and the prefetch of the next batch); a separate pool keeps them from
	// starving grabs. Size it 2×Readers and a few. (the main client)
	StreamClient redis.UniversalClient
	Group        string // consumer group name ("orders")
	Consumer     string // this process's consumer name (host-pid-random)
	BatchSize    int    // entries per read and per transaction (DefaultBatchSize)
	// Readers is how many vouchers the consumer of a process persists at once, whatever the
	// number of live vouchers: each voucher with new entries waits its turn in a fair queue.
	// (16)
	Readers int
	// SweepRate bounds the commands per second the consumer spends looking for work that
	// nothing signalled (orders whose announcement by another process was lost, entries of
	// dead consumers): it goes round the live vouchers every max(1 s, live/SweepRate). (40)
	SweepRate int
	// Block is no longer used: reads do not block (the readers are woken by grabs, the
	// announcements of other processes and the sweep). Kept so that old configurations compile.
	Block time.Duration
	// ClaimIdle is how long an entry stays pending with a consumer before another one takes
	// it over (the consumer is presumed dead). (30 s)
	ClaimIdle time.Duration
	// MaxDeliveries is how many deliveries an entry gets before it is dead-lettered. (5)
	MaxDeliveries int64
	// DeadLetterMaxLen caps each voucher's dead-letter stream (approximately). (100 000) The stream
	// expires with the sale's other keys, a week after its end; each order in it is a FAILED row.
	DeadLetterMaxLen int64
	// Linger keeps a voucher live this long after its sale ended (its stream swept, for orders
	// admitted at the last moment by another process); then, once its stream is empty, its
	// keys expire within two minutes (see docs/seckill.md, "What a finished sale leaves"). (1 min)
	Linger time.Duration

	// EpochStore keeps the order id counter's fences in the database (idgen.WithEpochStore,
	// e.g. idgen.NewSQLEpochs on the same database), so that no order id is issued twice
	// whatever Redis loses, and so that Order can tell an id issued before a loss. Without it,
	// a loss in the same second as the counter's last fence reissues ids (re-homing keeps
	// every order, under a fresh id behind an alias). Every process of a deployment must use
	// it, or none. (none)
	EpochStore idgen.EpochStore
}

// DefaultReaders is Options.Readers's default.
const DefaultReaders = defaultReaders

// DefaultPrefix names the sale keys and locks when Options.Prefix is empty.
const DefaultPrefix = "seckill"

// DefaultBatchSize is Options.BatchSize's default: a read of 1 000 new entries costs Redis about
// 0.8 ms (0.43 ms for 500), and one transaction per 1 000 rows drained 6-9 % faster than per 500
// (bench drain -orders 200000, three interleaved pairs: 1.06-1.09x raw 500-row INSERTs against
// 0.98-0.99x). While its process admits orders a reader reads fewer (surgeBatchSize).
const DefaultBatchSize = 1000

// The defaults of Options.
const (
	defaultPrefix           = DefaultPrefix
	defaultDialect          = "mysql"
	defaultPipelines        = 2
	defaultGroup            = "orders"
	defaultReaders          = 16
	defaultSweepRate        = 40
	defaultClaimIdle        = 30 * time.Second
	defaultMaxDeliveries    = 5
	defaultDeadLetterMaxLen = 100_000
	defaultLinger           = time.Minute
)

func (o *Options) setDefaults() {
	o.Strategy = orDefault(o.Strategy, StrategyLua)
	o.Prefix = orDefault(o.Prefix, defaultPrefix)
	o.Dialect = orDefault(o.Dialect, defaultDialect)
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Pipelines == 0 {
		o.Pipelines = defaultPipelines
	}
	if o.ReplicaAckTimeout == 0 {
		o.ReplicaAckTimeout = defaultReplicaAckTimeout
	}
	o.Group = orDefault(o.Group, defaultGroup)
	if o.Consumer == "" {
		host, _ := os.Hostname()
		o.Consumer = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), rand.Text()[:6])
	}
	o.BatchSize = positive(o.BatchSize, DefaultBatchSize)
	o.Readers = positive(o.Readers, defaultReaders)
	o.SweepRate = positive(o.SweepRate, defaultSweepRate)
	o.ClaimIdle = positive(o.ClaimIdle, defaultClaimIdle)
	o.MaxDeliveries = positive(o.MaxDeliveries, defaultMaxDeliveries)
	o.DeadLetterMaxLen = positive(o.DeadLetterMaxLen, defaultDeadLetterMaxLen)
	o.Linger = positive(o.Linger, defaultLinger)
}

// orDefault is v, or def if v is empty.
func orDefault[T ~string](v, def T) T {
	if v == "" {
		return def
	}
	return v
}

// positive is v, or def if v is not positive.
func positive[T int | int64 | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

func (o *Options) validate() error {
	switch o.Strategy {
	case StrategyLua, StrategySync:
	default:
		return fmt.Errorf("seckill: unknown strategy %q (want %q or %q)", o.Strategy, StrategyLua, StrategySync)
	}
	if strings.ContainsAny(o.Prefix, "{} ") {
		return fmt.Errorf("seckill: invalid prefix %q", o.Prefix)
	}
	if strings.ContainsAny(o.Namespace, "{} ") || strings.HasPrefix(o.Namespace, ":") || strings.HasSuffix(o.Namespace, ":") {
		return fmt.Errorf("seckill: invalid namespace %q", o.Namespace)
	}
	return nil
}

func (o *Options) admission() admissionOptions {
	return admissionOptions{strategy: o.Strategy, rateLimit: o.RateLimit, pipelines: o.Pipelines, clock: o.Clock}
}

func (o *Options) consumer() consumerOptions {
	return consumerOptions{
		streams: o.StreamClient, group: o.Group, name: o.Consumer, batchSize: o.BatchSize,
		readers: o.Readers, sweepRate: o.SweepRate,
		claimIdle: o.ClaimIdle, maxDeliveries: o.MaxDeliveries, linger: o.Linger, clock: o.Clock,
	}
}

// Service runs flash sales. It is the front of three parts, each in its own files: admission
// (admission.go, batch.go, ratelimit.go, sync.go), the order consumer (consumer.go,
// reader.go, persist.go, claim.go, settle.go) and recovery (recovery.go, reconcile*.go), over
// one order store (store*.go, rehome.go) that owns the SQL. It is safe for concurrent use;
// Close it when done.
type Service struct {
	opts      Options
	rdb       redis.UniversalClient
	ids       *idgen.Generator
	locks     *lock.Client
	bg        *background
	m         *metrics
	admission *admission
	consumer  *consumer
	recovery  *recovery
	reconcile *reconciler
	status    *statusReader
	told      *told
	borrower  *borrower
	consuming atomic.Bool // a RunConsumer runs
	db        *ent.Client
	events    *events
	announce  *announcer // tells other processes' consumers about new orders while none runs here
}

// Status is where an order stands.
type Status string

const (
	StatusQueued  Status = "QUEUED"  // admitted in Redis, not yet in the database
	StatusCreated Status = "CREATED" // in the database
	StatusFailed  Status = "FAILED"  // given up on; the admission was compensated
)

// Admission is a successful grab.
type Admission struct {
	OrderID int64
	Status  Status // QUEUED (StrategyLua) or CREATED (StrategySync)

	createdAt time.Time // of a CREATED order: the row's created_at
}

// voucherLockLease is the lease of the per-voucher lock: a consumer killed while holding it
// blocks that voucher's other consumers and rebuilds until the lease runs out.
const voucherLockLease = 3 * time.Second

// New returns a Service on the database and Redis. It opens nothing; with StrategyLua,
// RunConsumer must run somewhere (in at least one process) for orders to reach the database.
func New(db *ent.Client, rdb redis.UniversalClient, o Options) (*Service, error) {
	if db == nil || rdb == nil {
		return nil, errors.New("seckill: New needs a database and a Redis client")
	}
	o.setDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	if o.StreamClient == nil {
		o.StreamClient = rdb
	}
	if err := checkReplicaAcks(&o, rdb); err != nil {
		return nil, err
	}
	s := &Service{opts: o, rdb: rdb, db: db, bg: newBackground(), m: newMetrics(o.Registerer)}
	s.events = newEvents(rdb, KeyPrefix(o.Namespace, o.Prefix)+":events", o.Logger.With("component", "seckill"))
	s.announce = newAnnouncer(rdb, KeyPrefix(o.Namespace, o.Prefix)+":admitted", s.consuming.Load, s.m, o.Logger.With("component", "seckill"))
	var err error
	idOpts := []idgen.Option{idgen.WithClock(o.Clock), idgen.WithNamespace(o.Namespace)}
	if o.EpochStore != nil {
		idOpts = append(idOpts, idgen.WithEpochStore(o.EpochStore))
	}
	if s.ids, err = idgen.NewSegment(rdb, "order", idOpts...); err != nil {
		return nil, err
	}
	s.locks = lock.New(rdb, lock.Options{Prefix: inNamespace(o.Namespace, "lock"), WatchdogLease: voucherLockLease, Metrics: lock.NewMetrics(o.Registerer)})
	store, err := newSQLStore(db, o.Dialect, s.ids, s.voucherLocks(), o.Logger.With("component", "seckill"))
	if err != nil {
		return nil, errors.Join(err, s.ids.Close(), s.locks.Close())
	}
	s.assemble(refStore{store}, newReplicaAcks(&o, rdb, newKeyspace(&o), s.m))
	if o.Strategy == StrategyLua {
		s.bg.goBackground(s.told.run)
		s.bg.goBackground(s.announce.run)
		s.bg.goBackground(func(life context.Context) { s.borrower.run(life, s.admission.counts) })
	}
	if o.Registerer != nil {
		o.Registerer.MustRegister(backlog{s})
	}
	return s, nil
}

func (s *Service) voucherLocks() voucherLocks {
	return voucherLocks{rdb: s.rdb, locks: s.locks, keys: newKeyspace(&s.opts)}
}

// assemble builds the parts on one order store.
func (s *Service) assemble(store orderStore, acks *replicaAcks) {
	o, keys, log := &s.opts, newKeyspace(&s.opts), s.opts.Logger.With("component", "seckill")
	failures := &failures{}
	counts := &bucketCounts{rdb: s.rdb, keys: keys}
	s.borrower = &borrower{rdb: s.rdb, keys: keys, clock: o.Clock}
	settler := &settler{rdb: s.rdb, events: s.events, keys: keys, group: o.Group, deadMax: o.DeadLetterMaxLen, failures: failures, counts: counts, m: s.m, log: log}
	s.recovery = &recovery{
		rdb: s.rdb, keys: keys, store: store, locks: s.voucherLocks(), ids: s.ids, settler: settler,
		borrow: s.borrower, counts: counts, bg: s.bg, group: o.Group, clock: o.Clock, log: log,
	}
	s.told = &told{
		rdb: s.rdb, keys: keys, store: store, m: s.m, log: log,
		emit: func(o order, voucherID int) { s.events.order(o.id, o.user, voucherID, seckillorder.StatusLOST) },
	}
	ready := newReadyQueue(keys)
	ready.close() // until RunConsumer: grabs signal nothing
	s.admission = &admission{
		told: s.told, counts: counts, borrow: s.borrower, acks: acks,
		signal: func(ref int, at time.Time) { ready.admitted(ref, at); s.announce.admitted(ref) },
		opts:   o.admission(), rdb: s.rdb, keys: keys, ids: s.ids, store: store, limit: newLimiter(o.RateLimit),
		bg: s.bg, m: s.m, log: log, warm: func(ctx context.Context, v int) error { return s.Warm(ctx, v) },
		sync: &syncGrabber{locks: s.locks, keys: keys, store: store, clock: o.Clock},
	}
	if o.Pipelines > 0 && o.Strategy == StrategyLua {
		s.admission.batch = newBatcher(s.rdb, keys, o.Clock, o.Pipelines, acks)
	}
	s.consumer = &consumer{
		opts: o.consumer(), rdb: s.rdb, keys: keys, store: store, settler: settler, m: s.m, log: log, ready: ready, announce: s.announce,
		stale: s.recovery.stale, rebuildStale: s.recovery.rebuildStale, failures: failures,
	}
	s.reconcile = &reconciler{
		strategy: o.Strategy, rdb: s.rdb, keys: keys, store: store, locks: s.voucherLocks(), group: o.Group,
		clock: o.Clock, log: log,
		rebuild: func(ctx context.Context, v int) error { return s.recovery.warmLocked(ctx, v, true) },
	}
	s.status = &statusReader{strategy: o.Strategy, rdb: s.rdb, keys: keys, store: store, ids: s.ids, counts: counts}
}

// Strategy reports the strategy this service runs.
func (s *Service) Strategy() Strategy { return s.opts.Strategy }

// Close stops background work and waits for it. It does not wait for RunConsumer, which stops
// with its context.
func (s *Service) Close() error {
	s.bg.close()
	if s.admission.batch != nil {
		s.admission.batch.close()
	}
	s.events.close()
	return errors.Join(s.ids.Close(), s.locks.Close())
}

// Grab tries to buy one unit of a seckill voucher for a user. It returns the order id, or
// ErrSoldOut, ErrAlreadyPurchased (with the existing order's id in the Admission), ErrNotStarted,
// ErrEnded, ErrNotReady, ErrRateLimited or ErrNoSuchVoucher; other errors are failures.
//
// It returns at ctx's deadline whatever the Redis client's settings (package redisctx). A grab
// given up on that way may still be admitted once Redis answers: sent again, it is answered
// ErrAlreadyPurchased naming that order (or admitted, if the first never reached Redis).
func (s *Service) Grab(ctx context.Context, userID, voucherID int) (Admission, error) {
	if userID <= 0 || voucherID <= 0 {
		return Admission{}, fmt.Errorf("%w: invalid ids (user %d, voucher %d)", ErrNoSuchVoucher, userID, voucherID)
	}
	if s.bg.isClosed() {
		return Admission{}, ErrClosed
	}
	if !s.admission.limit.allow(userID, time.Now()) {
		s.m.grab(outcome(ErrRateLimited))
		return Admission{}, ErrRateLimited
	}
	a, err := redisctx.Do(ctx, s.rdb, func(ctx context.Context) (Admission, error) {
		return s.admission.grab(ctx, userID, voucherID)
	})
	s.m.grab(outcome(err))
	if err == nil || errors.Is(err, ErrReplicationTimeout) { // an admission not acknowledged stands
		s.events.stockChanged(voucherID)
	}
	return a, err
}

// Warm brings a voucher's sale state in Redis in line with the database: the window, on/off
// and the stock (database stock minus the orders still queued in the stream). If Redis does
// not hold the voucher (never warmed, or lost), it is rebuilt in full, buyers included, and
// admission answers NOT_READY until that is done. Call it after creating or changing a seckill
// voucher; grabs call it by themselves when Redis has lost a voucher. ErrNoSuchVoucher if the
// voucher is not a seckill voucher. With StrategySync it does nothing.
func (s *Service) Warm(ctx context.Context, voucherID int) error {
	if s.opts.Strategy == StrategySync {
		return nil
	}
	err := s.recovery.warm(ctx, voucherID, false)
	if err == nil {
		s.events.stockChanged(voucherID)
	}
	return err
}

// Rebuild rebuilds a voucher's sale state in Redis from the database and the stream, even if
// Redis holds it: admission pauses (NOT_READY) for the duration. It is what reconcile -fix does.
func (s *Service) Rebuild(ctx context.Context, voucherID int) error {
	if s.opts.Strategy == StrategySync {
		return nil
	}
	err := s.recovery.warm(ctx, voucherID, true)
	if err == nil {
		s.events.stockChanged(voucherID)
	}
	return err
}

// Guard runs a change to a voucher's row (stock, window, status) under the voucher's lock and
// then warms Redis with the result: the Redis stock becomes the new database stock minus the
// orders still queued (read under the row lock, so a batch committed in between is counted
// once). For a voucher that is not a seckill voucher it just runs change. change's ctx ends
// with ctx or when the lock is lost; Guard returns at ctx's deadline whatever the Redis
// client's settings.
func (s *Service) Guard(ctx context.Context, voucherID int, change func(ctx context.Context) error) error {
	var err error
	if s.opts.Strategy == StrategySync {
		err = change(ctx)
	} else {
		err = s.recovery.guard(ctx, voucherID, change)
	}
	if err == nil {
		s.events.stockChanged(voucherID)
	}
	return err
}

// WarmAll warms every active seckill voucher whose sale has not ended: what a server does at
// start, so the first grabs do not meet NOT_READY. Vouchers Redis already holds are only
// brought in line (window, on/off, stock), not rebuilt.
func (s *Service) WarmAll(ctx context.Context) error {
	if s.opts.Strategy == StrategySync {
		return nil
	}
	return s.recovery.warmAll(ctx)
}

// RunConsumer persists admitted orders until ctx ends, with Readers goroutines whatever the
// number of live vouchers: the grabs this process admits wake them (no Redis command), so do
// the announcements of processes that admit orders without a consumer, and a sweep of the
// live vouchers (those whose sale is on or ended less than Linger ago, or whose
// stream still holds orders; listed every second) finds the rest at SweepRate commands per
// second. Run it in every server process: the readers of all processes share each stream's
// consumer group, and each process persists first what it admitted. After Redis restarts or
// fails over it rebuilds the vouchers whose state Redis holds from before; what fails there
// is logged, counted (surge_seckill_background_errors_total) and retried. It returns when
// ctx ends, with ctx's cause, or at once with ErrConsumerRunning.
func (s *Service) RunConsumer(ctx context.Context) error {
	if !s.consuming.CompareAndSwap(false, true) {
		return ErrConsumerRunning
	}
	defer s.consuming.Store(false)
	if s.opts.Strategy == StrategySync {
		<-ctx.Done()
	} else {
		s.consumer.run(ctx)
	}
	return context.Cause(ctx)
}

// ErrConsumerRunning is RunConsumer's answer while another RunConsumer of the same Service
// runs: both would read under one consumer name. Run one per process.
var ErrConsumerRunning = errors.New("seckill: RunConsumer already runs on this Service")

// Order returns one of a user's orders, or (nil, nil) if the user has no such order. An
// order still queued in a stream comes back as an unsaved entity with status QUEUED, its
// voucher and user edges loaded. An order id the user was told that leads to an order under
// another id (re-homed or superseded after Redis lost state) returns that order. It returns at
// ctx's deadline whatever the Redis client's settings.
func (s *Service) Order(ctx context.Context, userID int, orderID int64) (*ent.SeckillOrder, error) {
	return redisctx.Do(ctx, s.rdb, func(ctx context.Context) (*ent.SeckillOrder, error) {
		return s.status.order(ctx, userID, orderID)
	})
}

// QueuedOrders lists a user's orders admitted in Redis and not yet in the database, as
// unsaved entities with status QUEUED, newest first. It reads the buyers of the vouchers
// whose stream is not empty (one pipelined round trip for the lengths, one for the buyers).
// It returns at ctx's deadline whatever the Redis client's settings.
func (s *Service) QueuedOrders(ctx context.Context, userID int) ([]*ent.SeckillOrder, error) {
	return redisctx.Do(ctx, s.rdb, func(ctx context.Context) ([]*ent.SeckillOrder, error) {
		return s.status.queuedOrders(ctx, userID)
	})
}

// Stock returns the units a voucher has left for admission: Redis's count with StrategyLua
// (ErrNotReady if Redis does not hold it), the database's with StrategySync. It returns at
// ctx's deadline whatever the Redis client's settings.
func (s *Service) Stock(ctx context.Context, voucherID int) (int, error) {
	if s.opts.Strategy == StrategySync {
		return s.status.stock(ctx, voucherID)
	}
	return s.admission.stock(ctx, voucherID)
}

// Reconcile compares each voucher's sale state in Redis with the database and reports the
// differences; with o.Fix it repairs what a rebuild can repair. Each voucher is checked under
// its lock, so the stream consumer commits nothing meanwhile and every admitted order is seen
// either in the database or in the stream; grabs go on during the check (a grab admitted while
// the check reads Redis is not held against it).
//
// What it expects, for a voucher whose Redis state is ready:
//   - Redis stock = max(0, database stock - queued orders not yet in the database);
//   - buyers (user -> order) = the live orders of the database, with the users of the stream
//     on top (their order is the queued one);
//   - the meta hash holds the database's window and on/off, and the voucher is registered for
//     the consumer.
//
// A voucher Redis does not hold is a problem if Redis still holds part of its state (the
// registry, stock, buyers or queued orders), or if its sale is on (ACTIVE, not ended) and it
// has orders: Redis lost it. A voucher on sale without orders was merely never warmed, and one
// whose sale is over needs nothing from Redis; a grab would warm either. In the
// database it flags a negative stock, users holding two live orders and rows whose slot
// disagrees with their status. Buyers are read with HSCAN and the stream in pages, so large
// sales do not block Redis; the voucher's lock is held for the whole check (and fix), which
// delays that voucher's order persistence by as long.
//
// With StrategySync there is no Redis state: the reports carry the database figures and
// problems only, and say so in their notes.
//
// Dead-lettering runs outside the voucher's lock: an entry given up on during the check can
// show as a transient difference; check again.
//
// It returns at ctx's deadline whatever the Redis client's settings.
func (s *Service) Reconcile(ctx context.Context, o ReconcileOptions) ([]VoucherReport, error) {
	return redisctx.Do(ctx, s.rdb, func(ctx context.Context) ([]VoucherReport, error) {
		return s.reconcile.reconcile(ctx, o)
	})
}
