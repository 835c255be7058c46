package cache_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/surgekit/surge/cache"
)

// table is a stand-in database table shared by the "processes" of a test.
type table struct {
	mu   sync.Mutex
	rows map[string]string
}

func (tb *table) load(_ context.Context, id string) (string, error) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	v, ok := tb.rows[id]
	if !ok {
		return "", cache.ErrNotFound
	}
	return v, nil
}

func (tb *table) insert(id, v string) func(context.Context) error {
	return func(context.Context) error {
		tb.mu.Lock()
		defer tb.mu.Unlock()
		tb.rows[id] = v
		return nil
	}
}

// A row created through Invalidate(…, Created) is readable at once behind a shared Redis
// filter: the id goes into the filter before the write.
func TestCreatedRowPassesRedisFilter(t *testing.T) { onBoth(t, testCreatedRowPassesRedisFilter) }

func testCreatedRowPassesRedisFilter(t *testing.T) {
	ctx := context.Background()
	rdb := backend(t)
	name := uniqueName("create")
	f, err := cache.NewRedisFilter(rdb, name, 1000, 0.001)
	if err != nil {
		t.Fatal(err)
	}
	cleanupFilter(t, rdb, f.Key())
	db := &table{rows: map[string]string{"1": "one"}}
	if _, err := f.Rebuild(ctx, slices.Values([]string{"1"})); err != nil {
		t.Fatal(err)
	}
	a := newCacheOn[string](t, rdb, cache.Options{Name: name, Filter: f})
	other := backend(t)
	fb, _ := cache.NewRedisFilter(other, name, 1000, 0.001)
	b := newCacheOn[string](t, other, cache.Options{Name: name, Filter: fb})
	if _, err := b.GetOrLoad(ctx, "new", db.load); !errors.Is(err, cache.ErrNotFound) {
		t.Fatalf("before the insert: %v", err)
	}
	if err := a.Invalidate(ctx, "new", db.insert("new", "fresh"), cache.Created); err != nil {
		t.Fatal(err)
	}
	for who, c := range map[string]*cache.Cache[string]{"writer": a, "other process": b} {
		if v, err := c.GetOrLoad(ctx, "new", db.load); err != nil || v != "fresh" {
			t.Fatalf("%s after the create: %q %v", who, v, err)
		}
	}
}

// With a LocalFilter in each process, a row created in one process becomes readable in the
// others: the create event adds the id to every process's own filter.
func TestCreatedRowReachesOtherProcessesLocalFilters(t *testing.T) {
	onBoth(t, testCreatedRowReachesOtherProcessesLocalFilters)
}

func testCreatedRowReachesOtherProcessesLocalFilters(t *testing.T) {
	ctx := context.Background()
	name := uniqueName("createlocal")
	db := &table{rows: map[string]string{"1": "one"}}
	newProcess := func() *cache.Cache[string] {
		f, err := cache.NewLocalFilter(1000, 0.001)
		if err != nil {
			t.Fatal(err)
		}
		rebuild(t, f, []string{"1"})
		return newCache[string](t, cache.Options{Name: name, Filter: f})
	}
	a, b := newProcess(), newProcess()
	if _, err := b.GetOrLoad(ctx, "new", db.load); !errors.Is(err, cache.ErrNotFound) {
		t.Fatalf("before the insert: %v", err)
	}
	if err := a.Invalidate(ctx, "new", db.insert("new", "fresh"), cache.Created); err != nil {
		t.Fatal(err)
	}
	if v, err := a.GetOrLoad(ctx, "new", db.load); err != nil || v != "fresh" {
		t.Fatalf("writer after the create: %q %v", v, err)
	}
	eventually(t, 5*time.Second, "the other process reads the created row", func() bool {
		v, err := b.GetOrLoad(ctx, "new", db.load)
		return err == nil && v == "fresh"
	})
}

// Without a filter, an id read before it existed is cached as absent (in Redis and in L1
// copies); the create clears both everywhere.
func TestCreatedRowClearsAbsenceEverywhere(t *testing.T) {
	onBoth(t, testCreatedRowClearsAbsenceEverywhere)
}

func testCreatedRowClearsAbsenceEverywhere(t *testing.T) {
	ctx := context.Background()
	name := uniqueName("createabsent")
	db := &table{rows: map[string]string{}}
	local := func() *cache.LocalOptions { return &cache.LocalOptions{Size: 10, TTL: time.Minute} }
	a := newCache[string](t, cache.Options{Name: name, AbsentTTL: time.Minute, Local: local()})
	b := newCache[string](t, cache.Options{Name: name, AbsentTTL: time.Minute, Local: local()})
	for _, c := range []*cache.Cache[string]{a, b, b} {
		if _, err := c.GetOrLoad(ctx, "new", db.load); !errors.Is(err, cache.ErrNotFound) {
			t.Fatalf("before the insert: %v", err)
		}
	}
	if err := a.Invalidate(ctx, "new", db.insert("new", "fresh"), cache.Created); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the other process reads the created row", func() bool {
		v, err := b.GetOrLoad(ctx, "new", db.load)
		return err == nil && v == "fresh"
	})
}
