package cache_test

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/surgekit/surge/cache"
)

// shopV2 is shop after a schema change: ID became a string.
type shopV2 struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// A deploy changes V: values written by the old code no longer decode. They are misses
// (dropped, reloaded, counted), not errors served until their TTL.
func TestUndecodableValueIsAMiss(t *testing.T) { onBoth(t, testUndecodableValueIsAMiss) }

func testUndecodableValueIsAMiss(t *testing.T) {
	ctx := context.Background()
	name := uniqueName("schema")
	old := newCache[shop](t, cache.Options{Name: name})
	m := cache.NewMetrics(nil)
	c := newCache[shopV2](t, cache.Options{Name: name, Metrics: m})
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		if err := old.Set(ctx, id, shop{ID: 1, Name: "old " + id}); err != nil {
			t.Fatal(err)
		}
	}
	load := func(_ context.Context, id string) (shopV2, error) { return shopV2{ID: id, Name: "new " + id}, nil }
	if v, err := c.GetOrLoad(ctx, "a", load); err != nil || v.Name != "new a" {
		t.Fatalf("GetOrLoad of an old-schema value: %+v %v, want the reloaded value", v, err)
	}
	if v, err := c.Get(ctx, "a"); err != nil || v.Name != "new a" {
		t.Fatalf("after the reload the cache holds %+v %v", v, err)
	}
	if _, err := c.Get(ctx, "b"); !errors.Is(err, cache.ErrMiss) {
		t.Fatalf("Get of an old-schema value: %v, want ErrMiss", err)
	}
	if _, err := old.Get(ctx, "b"); !errors.Is(err, cache.ErrMiss) {
		t.Fatalf("the old-schema value was not dropped: %v", err)
	}
	many, err := c.LoadMany(ctx, []string{"c", "d"}, func(_ context.Context, ids []string) (map[string]shopV2, error) {
		out := map[string]shopV2{}
		for _, id := range ids {
			out[id], _ = load(ctx, id)
		}
		return out, nil
	})
	if err != nil || many["c"].Name != "new c" || many["d"].Name != "new d" {
		t.Fatalf("LoadMany of old-schema values: %+v %v", many, err)
	}
	if got, err := c.GetMany(ctx, []string{"e"}); err != nil || len(got) != 0 {
		t.Fatalf("GetMany of an old-schema value: %+v %v, want a miss", got, err)
	}
	if n := testutil.ToFloat64(m.DecodeErrors.WithLabelValues(name)); n != 5 {
		t.Fatalf("decode errors = %v, want 5 (a, b, c, d, e)", n)
	}
}

// Options.Version: a change that still decodes (a renamed field reads as its zero value) is
// made a miss by bumping the version.
func TestVersionMismatchIsAMiss(t *testing.T) { onBoth(t, testVersionMismatchIsAMiss) }

func testVersionMismatchIsAMiss(t *testing.T) {
	ctx := context.Background()
	name := uniqueName("version")
	v1 := newCache[shop](t, cache.Options{Name: name, Version: 1})
	v2 := newCache[shop](t, cache.Options{Name: name, Version: 2})
	if err := v1.Set(ctx, "k", shop{ID: 1, Name: "v1"}); err != nil {
		t.Fatal(err)
	}
	if v, err := v1.Get(ctx, "k"); err != nil || v.Name != "v1" {
		t.Fatalf("same version: %+v %v", v, err)
	}
	v, err := v2.GetOrLoad(ctx, "k", func(context.Context, string) (shop, error) { return shop{ID: 1, Name: "v2"}, nil })
	if err != nil || v.Name != "v2" {
		t.Fatalf("other version: %+v %v, want the reloaded value", v, err)
	}
}
