package seckill

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"

	"github.com/surgekit/surge/ent"
	"github.com/surgekit/surge/ent/voucher"
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

// Options configures a Service. Zero values take the defaults noted.
type Options struct {
	Strategy Strategy // StrategyLua
	// Prefix starts every Redis key and lock name, so deployments can share a Redis.
	// ("seckill")
	Prefix string
	// Dialect is the database's ent dialect: "mysql" or "sqlite3". ("mysql")
	Dialect   string
	RateLimit RateLimit
	// Pipelines is how many batches of admission calls may be in flight at once: concurrent
	// grabs are sent together, one script call per voucher and one round trip per batch.
	// < 0 sends each grab on its own. (2)
	Pipelines int
	// Clock gives the time grabs are judged at (the sale window). (time.Now)
	Clock  func() time.Time
	Logger *slog.Logger
	// Registerer receives the surge_seckill_* metrics (the order streams' backlog read from
	// Redis at each scrape) and surge_lock_lost_total. (none)
	Registerer prometheus.Registerer

	// Consumer settings (StrategyLua).

	// StreamClient serves the consumer's blocking reads, each of which holds a connection for
	// up to Block; a separate pool keeps them from starving grabs. (the main client)
	StreamClient redis.UniversalClient
	Group        string        // consumer group name ("orders")
	Consumer     string        // this process's consumer name (host-pid-random)
	BatchSize    int           // entries per read and per transaction (500)
	Block        time.Duration // XREADGROUP BLOCK (1 s)
	// ClaimIdle is how long an entry stays pending with a consumer before another one takes
	// it over (the consumer is presumed dead). (30 s)
	ClaimIdle time.Duration
	// MaxDeliveries is how many deliveries an entry gets before it is dead-lettered. (5)
	MaxDeliveries int64
	// DeadLetterMaxLen caps each voucher's dead-letter stream (approximately). (100 000)
	DeadLetterMaxLen int64
	// Linger keeps reading a voucher's stream this long after its sale ended. (1 h)
	Linger time.Duration
}

func (o *Options) setDefaults() {
	if o.Strategy == "" {
		o.Strategy = StrategyLua
	}
	if o.Prefix == "" {
		o.Prefix = "seckill"
	}
	if o.Dialect == "" {
		o.Dialect = "mysql"
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Pipelines == 0 {
		o.Pipelines = 2
	}
	if o.Group == "" {
		o.Group = "orders"
	}
	if o.Consumer == "" {
		host, _ := os.Hostname()
		o.Consumer = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), randomHex(3))
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 500
	}
	if o.Block <= 0 {
		o.Block = time.Second
	}
	if o.ClaimIdle <= 0 {
		o.ClaimIdle = 30 * time.Second
	}
	if o.MaxDeliveries <= 0 {
		o.MaxDeliveries = 5
	}
	if o.DeadLetterMaxLen <= 0 {
		o.DeadLetterMaxLen = 100_000
	}
	if o.Linger <= 0 {
		o.Linger = time.Hour
	}
}

// Service runs flash sales. It is safe for concurrent use; Close it when done.
type Service struct {
	db    *ent.Client
	rdb   redis.UniversalClient
	opts  Options
	ids   *idgen.Generator
	locks *lock.Client
	limit *limiter
	log   *slog.Logger
	m     *metrics
	batch *batcher // nil: one call per grab

	warms    singleflight.Group
	infoMu   sync.Mutex
	info     map[int]voucherInfo // recent "is this a seckill voucher" answers
	closedMu sync.RWMutex        // orders closed with the start of background work
	closed   bool
	bg       sync.WaitGroup // background work: Close waits for it
	life     context.Context
	endLife  context.CancelFunc // called by Close: background work and shared warms stop
	lastErr  sync.Map           // entry id -> why its last persist attempt failed
	orphans  sync.Map           // stream -> a read given up on delivered entries here
	dbDown   atomic.Bool        // the last persist found the database unreachable
}

// voucherInfo caches, for a second, whether an id is a seckill voucher: a NOT_READY grab
// must tell "no such voucher" apart without a database read per request.
type voucherInfo struct {
	seckill bool
	at      time.Time
	warmAt  time.Time
}

// New returns a Service on the database and Redis. It opens nothing; with StrategyLua,
// RunConsumer must run somewhere (in at least one process) for orders to reach the database.
func New(db *ent.Client, rdb redis.UniversalClient, o Options) (*Service, error) {
	if db == nil || rdb == nil {
		return nil, errors.New("seckill: New needs a database and a Redis client")
	}
	o.setDefaults()
	switch o.Strategy {
	case StrategyLua, StrategySync:
	default:
		return nil, fmt.Errorf("seckill: unknown strategy %q (want %q or %q)", o.Strategy, StrategyLua, StrategySync)
	}
	if strings.ContainsAny(o.Prefix, "{} ") {
		return nil, fmt.Errorf("seckill: invalid prefix %q", o.Prefix)
	}
	switch o.Dialect {
	case "mysql", "sqlite3":
	default:
		return nil, fmt.Errorf("seckill: unsupported dialect %q (want mysql or sqlite3)", o.Dialect)
	}
	if o.StreamClient == nil {
		o.StreamClient = rdb
	}
	ids, err := idgen.NewSegment(rdb, "order", idgen.WithClock(o.Clock))
	if err != nil {
		return nil, err
	}
	s := &Service{
		db:   db,
		rdb:  rdb,
		opts: o,
		ids:  ids,
		// A short lease: a consumer killed while holding a voucher's lock blocks that voucher's
		// other consumers and rebuilds until the lease runs out.
		locks: lock.New(rdb, lock.Options{WatchdogLease: 3 * time.Second, Metrics: lock.NewMetrics(o.Registerer)}),
		limit: newLimiter(o.RateLimit),
		log:   o.Logger.With("component", "seckill"),
		m:     newMetrics(o.Registerer),
		info:  map[int]voucherInfo{},
	}
	s.life, s.endLife = context.WithCancel(context.Background())
	if o.Registerer != nil {
		o.Registerer.MustRegister(backlog{s})
	}
	if o.Pipelines > 0 && o.Strategy == StrategyLua {
		s.batch = newBatcher(s, o.Pipelines)
	}
	return s, nil
}

// Strategy reports the strategy this service runs.
func (s *Service) Strategy() Strategy { return s.opts.Strategy }

// Close stops background work and waits for it. It does not wait for RunConsumer, which stops
// with its context.
func (s *Service) Close() error {
	s.closedMu.Lock()
	s.closed = true
	s.closedMu.Unlock()
	s.endLife()
	s.bg.Wait()
	if s.batch != nil {
		s.batch.close()
	}
	return errors.Join(s.ids.Close(), s.locks.Close())
}

func (s *Service) isClosed() bool {
	s.closedMu.RLock()
	defer s.closedMu.RUnlock()
	return s.closed
}

// goBackground runs work in a goroutine that Close waits for, with a context that Close ends;
// after Close it runs nothing. The closed check and the registration with Close's wait happen
// under one lock, so that Close cannot slip between them and return before the work started.
func (s *Service) goBackground(work func(life context.Context)) {
	s.closedMu.RLock()
	defer s.closedMu.RUnlock()
	if s.closed {
		return
	}
	if testHookBackgroundStart != nil {
		testHookBackgroundStart()
	}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		work(s.life)
	}()
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
	if s.isClosed() {
		return Admission{}, ErrClosed
	}
	if !s.limit.allow(userID, time.Now()) {
		s.m.grab("rate_limited")
		return Admission{}, ErrRateLimited
	}
	grab := s.grabLua
	if s.opts.Strategy == StrategySync {
		grab = s.grabSync
	}
	a, err := redisctx.Do(ctx, s.rdb, func(ctx context.Context) (Admission, error) { return grab(ctx, userID, voucherID) })
	s.m.grab(outcome(err))
	return a, err
}

// outcomes names the refusals in the surge_seckill_grabs_total metric.
var outcomes = []struct {
	err  error
	name string
}{
	{ErrSoldOut, "sold_out"}, {ErrAlreadyPurchased, "already_purchased"}, {ErrNotStarted, "not_started"},
	{ErrEnded, "ended"}, {ErrNotReady, "not_ready"}, {ErrRateLimited, "rate_limited"},
	{ErrNoSuchVoucher, "no_such_voucher"},
}

func outcome(err error) string {
	if err == nil {
		return "admitted"
	}
	for _, o := range outcomes {
		if errors.Is(err, o.err) {
			return o.name
		}
	}
	return "error"
}

// grabLua runs the admission script.
func (s *Service) grabLua(ctx context.Context, userID, voucherID int) (Admission, error) {
	orderID, err := s.ids.Next(ctx)
	if err != nil {
		return Admission{}, fmt.Errorf("seckill: order id: %w", err)
	}
	res, err := s.admit(ctx, voucherID, userID, orderID)
	if err != nil {
		return Admission{}, fmt.Errorf("seckill: admission script: %w", err)
	}
	if len(res) != 2 {
		return Admission{}, fmt.Errorf("seckill: admission script answered %v", res)
	}
	code, _ := res[0].(int64)
	switch code {
	case 0:
		return Admission{OrderID: orderID, Status: StatusQueued}, nil
	case 1:
		return Admission{}, s.notReady(ctx, voucherID)
	case 2:
		return Admission{}, ErrNotStarted
	case 3:
		return Admission{}, ErrEnded
	case 4:
		return Admission{}, ErrSoldOut
	case 5:
		prev, _ := res[1].(string)
		id, _ := strconv.ParseInt(prev, 10, 64)
		return Admission{OrderID: id, Status: StatusQueued}, ErrAlreadyPurchased
	}
	return Admission{}, fmt.Errorf("seckill: admission script answered code %d", code)
}

// notReady answers a grab on a voucher Redis does not know: ErrNoSuchVoucher if the database
// has no such seckill voucher, else ErrNotReady with a rebuild started in the background.
// Both answers are cached for a second so a flood of grabs costs at most one database read
// and one rebuild per second per process.
func (s *Service) notReady(ctx context.Context, voucherID int) error {
	now := time.Now()
	s.infoMu.Lock()
	info, ok := s.info[voucherID]
	s.infoMu.Unlock()
	if !ok || now.Sub(info.at) > time.Second {
		seckill, err := s.isSeckillVoucher(ctx, voucherID)
		if err != nil {
			return err
		}
		info.seckill, info.at = seckill, now
		s.infoMu.Lock()
		if len(s.info) > 10_000 {
			clear(s.info)
		}
		s.info[voucherID] = info
		s.infoMu.Unlock()
	}
	if !info.seckill {
		return ErrNoSuchVoucher
	}
	s.infoMu.Lock()
	start := now.Sub(s.info[voucherID].warmAt) > time.Second
	if start {
		i := s.info[voucherID]
		i.warmAt = now
		s.info[voucherID] = i
	}
	s.infoMu.Unlock()
	if start {
		s.goBackground(func(life context.Context) { s.rebuildLost(life, voucherID) })
	}
	return ErrNotReady
}

// isSeckillVoucher reads whether the database has a seckill voucher of this id; concurrent
// readers of one id share one read.
func (s *Service) isSeckillVoucher(ctx context.Context, voucherID int) (bool, error) {
	v, err := s.shared(ctx, "info:"+strconv.Itoa(voucherID), infoReadTimeout, func(ctx context.Context) (any, error) {
		return s.db.Voucher.Get(ctx, voucherID)
	})
	if err != nil && !ent.IsNotFound(err) {
		return false, fmt.Errorf("seckill: reading voucher %d: %w", voucherID, err)
	}
	vo, _ := v.(*ent.Voucher)
	return vo != nil && vo.Kind == voucher.KindSECKILL, nil
}

// shared runs work once for all the concurrent callers of key. It runs on a context of its own
// (the service's, bounded by timeout, ended by Close), not on the first caller's, so that one
// caller giving up does not fail the others; each caller waits only until its own ctx ends.
func (s *Service) shared(ctx context.Context, key string, timeout time.Duration, work func(ctx context.Context) (any, error)) (any, error) {
	run := s.warms.DoChan(key, func() (v any, err error) {
		defer func() {
			// DoChan re-panics in a goroutine of its own, where nothing could recover it.
			if p := recover(); p != nil {
				err = fmt.Errorf("seckill: %s: panic: %v", key, p)
			}
		}()
		ctx, cancel := context.WithTimeout(s.life, timeout)
		defer cancel()
		return work(ctx)
	})
	select {
	case r := <-run:
		return r.Val, r.Err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Bounds of the work a grab on a voucher Redis lost starts.
const (
	infoReadTimeout       = 10 * time.Second // "is this a seckill voucher?" (one database read)
	backgroundWarmTimeout = time.Minute      // the rebuild it starts
)

// rebuildLost rebuilds a voucher Redis lost, in the background; a failure is logged (the next
// grab starts another), except while the service closes.
func (s *Service) rebuildLost(life context.Context, voucherID int) {
	ctx, cancel := context.WithTimeout(life, backgroundWarmTimeout)
	defer cancel()
	err := s.Warm(ctx, voucherID)
	if err != nil && !errors.Is(err, ErrNoSuchVoucher) && life.Err() == nil {
		s.log.Error("rebuilding a voucher's sale state", "voucher", voucherID, "err", err)
	}
}

// testHookBackgroundStart, set by tests only, runs between a background warm's closed check and
// its start.
var testHookBackgroundStart func()

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
