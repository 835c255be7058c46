package app

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/testenv"
)

// Taking a namespace over deletes its keys, on every master of a Cluster, and only its keys:
// a namespace may hold glob characters (validNamespace allows * ? [ ]), which must not make
// the deletion reach another namespace's keys.
func TestPurgeNamespaceOnlyItsKeys(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		base := "purge-" + testenv.Phone()
		ns := base + "-*?[a]"
		testenv.CleanupKeys(t, rdb, base+"*")
		a := &App{Config: Config{Namespace: ns}, Redis: rdb}
		var mine []string
		for i := range 50 { // spread over the slots, so over every master
			mine = append(mine, fmt.Sprintf("%s:seckill:{%d}:stock", ns, i))
		}
		others := []string{base + "-x?[a]:cache:shop:{1}", base + "-*?a:login:send:all", base + "-ab:id:order:20261126"}
		for _, k := range append(append(mine, others...), a.bindingKey()) {
			if err := rdb.Set(ctx, k, "1", 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
		n, err := a.purgeNamespace(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n != int64(len(mine)) {
			t.Errorf("deleted %d keys, want the namespace's %d", n, len(mine))
		}
		for _, k := range mine {
			if rdb.Exists(ctx, k).Val() != 0 {
				t.Errorf("%s survived", k)
			}
		}
		for _, k := range append(others, a.bindingKey()) {
			if rdb.Exists(ctx, k).Val() != 1 {
				t.Errorf("%s was deleted: it is not the namespace's, or it is its binding", k)
			}
		}
	})
}
