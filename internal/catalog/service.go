package catalog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/cache"
	"github.com/surgekit/surge/ent"
)

// CacheOptions configures the catalog's caches.
type CacheOptions struct {
	// Namespace starts every key: <ns>:cache:<name>:{<id>} and the shop filter
	// <ns>:bloom:{shop}. ("": cache:<name>:{<id>} and bloom:{cache:shop})
	Namespace     string
	Metrics       *cache.Metrics
	Logger        *slog.Logger
	ShopTTL       time.Duration // shop(id) freshness (30 min)
	ShopTypesTTL  time.Duration // shopTypes logical expiry (10 min)
	ExpectedShops uint          // Bloom filter sizing (1,000,000)
}

// Service reads and writes the catalog through ent, with the hot reads cached in Redis.
type Service struct {
	db        *ent.Client
	shops     *cache.Cache[*ent.Shop]
	shopTypes *cache.Cache[[]*ent.ShopType]
	filter    *cache.RedisFilter
	log       *slog.Logger
	stop      context.CancelFunc
	wg        sync.WaitGroup
}

// New returns a catalog Service whose hot reads go through Redis caches. It builds the shop
// Bloom filter from the database and starts the invalidation drainer; Close stops it.
func New(ctx context.Context, db *ent.Client, rdb redis.UniversalClient, o CacheOptions) (*Service, error) {
	if o.ShopTTL <= 0 {
		o.ShopTTL = 30 * time.Minute
	}
	if o.ShopTypesTTL <= 0 {
		o.ShopTypesTTL = 10 * time.Minute
	}
	if o.ExpectedShops == 0 {
		o.ExpectedShops = 1_000_000
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	s := &Service{db: db, log: o.Logger}
	var err error
	keys := keysIn(o.Namespace)
	if s.filter, err = cache.NewRedisFilter(rdb, keys.filterName, o.ExpectedShops, 0.01, cache.FilterPrefix(keys.filterPrefix)); err != nil {
		return nil, err
	}
	if err := s.rebuildFilter(ctx); err != nil {
		return nil, err
	}
	if s.shops, err = cache.New[*ent.Shop](ctx, rdb, cache.Options{
		Name: "shop", Prefix: keys.cachePrefix, TTL: o.ShopTTL, Filter: s.filter, Metrics: o.Metrics,
	}); err != nil {
		return nil, err
	}
	if s.shopTypes, err = cache.New[[]*ent.ShopType](ctx, rdb, cache.Options{
		Name: "shop-types", Prefix: keys.cachePrefix, Mode: cache.ModeLogical, TTL: o.ShopTypesTTL, Metrics: o.Metrics,
	}); err != nil {
		s.shops.Close()
		return nil, err
	}
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	s.stop = stop
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = s.shops.RunInvalidator(runCtx, cache.InvalidatorOptions{OnError: func(err error) {
			s.log.Warn("shop cache invalidator: intents left for the next pass", "err", err)
		}})
	}()
	return s, nil
}

// catalogKeys place the catalog's caches and shop filter in a namespace.
type catalogKeys struct{ cachePrefix, filterPrefix, filterName string }

// keysIn gives every key a namespace's start; without one the layout stays as it was
// (cache:…, bloom:{cache:shop}).
func keysIn(namespace string) catalogKeys {
	if namespace == "" {
		return catalogKeys{cachePrefix: "cache", filterPrefix: "bloom", filterName: "cache:shop"}
	}
	return catalogKeys{cachePrefix: namespace + ":cache", filterPrefix: namespace + ":bloom", filterName: "shop"}
}

// rebuildFilter loads every shop id into the Bloom filter. Another server rebuilding at the
// same moment is fine: its filter will hold the same ids.
func (s *Service) rebuildFilter(ctx context.Context) error {
	ids, err := s.db.Shop.Query().IDs(ctx)
	if err != nil {
		return fmt.Errorf("catalog: reading shop ids for the Bloom filter: %w", err)
	}
	_, err = s.filter.Rebuild(ctx, func(yield func(string) bool) {
		for _, id := range ids {
			if !yield(strconv.Itoa(id)) {
				return
			}
		}
	})
	if errors.Is(err, cache.ErrRebuildRunning) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("catalog: building the shop Bloom filter: %w", err)
	}
	return nil
}

// Close stops the invalidation drainer and the caches' subscriptions.
func (s *Service) Close() {
	s.stop()
	s.wg.Wait()
	s.shops.Close()
	s.shopTypes.Close()
}
