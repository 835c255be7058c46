package idgen_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/idgen"
	"github.com/surgekit/surge/internal/testenv"
)

// WithNamespace puts the day keys under <ns>:id:…, so two deployments sharing a Redis count
// apart; without it the layout stays id:<prefix>:<yyyymmdd>.
func TestNamespaceKeys(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		p := newPrefix(t, rdb)
		ns := "ns-" + p
		t.Cleanup(func() { deleteKeys(rdb, ns+":*") })
		key, nsKey := dayKey(p, time.Now()), ns+":"+dayKey(p, time.Now())
		plain, err := idgen.New(rdb, p)
		if err != nil {
			t.Fatal(err)
		}
		inNS, err := idgen.New(rdb, p, idgen.WithNamespace(ns))
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range []*idgen.Generator{plain, plain, inNS} {
			if _, err := g.Next(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if n, _ := counter(ctx, rdb, key); n != 2 {
			t.Errorf("default key %s counted %d, want 2", key, n)
		}
		if n, _ := counter(ctx, rdb, nsKey); n != 1 {
			t.Errorf("namespaced key %s counted %d, want 1 (its own sequence)", nsKey, n)
		}
		seg, err := idgen.NewSegment(rdb, p, idgen.WithNamespace(ns))
		if err != nil {
			t.Fatal(err)
		}
		defer seg.Close()
		if _, err := seg.Next(ctx); err != nil {
			t.Fatal(err)
		}
		if n, _ := counter(ctx, rdb, nsKey); n <= 1 {
			t.Errorf("segment mode reserved nothing under %s (%d)", nsKey, n)
		}
	})
}

func TestNamespaceValidated(t *testing.T) {
	rdb := testenv.Redis(t)
	for _, ns := range []string{"a b", "a{b", "b}", ":a", "a:", "x\n"} {
		if _, err := idgen.New(rdb, "order", idgen.WithNamespace(ns)); !errors.Is(err, idgen.ErrInvalidPrefix) {
			t.Errorf("namespace %q: %v, want ErrInvalidPrefix", ns, err)
		}
	}
	if _, err := idgen.New(rdb, "order", idgen.WithNamespace("")); err != nil {
		t.Errorf("empty namespace (none): %v", err)
	}
}
