package store_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/surgekit/surge/internal/store"
	"github.com/surgekit/surge/internal/testenv"
)

// Every server of a deployment (one database) gets the same id, also when they migrate at
// the same moment; another database gets another; a restart keeps it.
func TestDeploymentID(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.MySQL(t)
	// The schema first, then servers racing to create the id.
	setup := mustOpen(t)(store.OpenMySQL(dsn))
	migratedID(t, setup)
	if _, err := setup.SQL.ExecContext(ctx, "DROP TABLE surge_settings"); err != nil {
		t.Fatal(err)
	}
	const servers = 4
	ids := make([]string, servers)
	var wg sync.WaitGroup
	for i := range servers {
		wg.Go(func() {
			db, err := store.OpenMySQL(dsn)
			if err != nil {
				t.Error(err)
				return
			}
			defer db.Close()
			if err := db.Migrate(ctx); err != nil {
				t.Error(err)
				return
			}
			if ids[i], err = db.DeploymentID(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for _, id := range ids {
		if id == "" || id != ids[0] {
			t.Fatalf("servers of one database got ids %v", ids)
		}
	}
	if again := migratedID(t, mustOpen(t)(store.OpenMySQL(dsn))); again != ids[0] {
		t.Fatalf("a restart changed the id: %s, was %s", again, ids[0])
	}
	if other := migratedID(t, mustOpen(t)(store.OpenMySQL(testenv.MySQL(t)))); other == ids[0] {
		t.Fatal("two databases share a deployment id")
	}
	sqlite := filepath.Join(t.TempDir(), "surge.db")
	first := migratedID(t, mustOpen(t)(store.OpenSQLite(sqlite)))
	if second := migratedID(t, mustOpen(t)(store.OpenSQLite(sqlite))); second != first || len(first) != 32 {
		t.Fatalf("SQLite ids %q then %q", first, second)
	}
}

func TestDeploymentIDNeedsMigrate(t *testing.T) {
	db := mustOpen(t)(store.OpenMySQL(testenv.MySQL(t)))
	if _, err := db.DeploymentID(context.Background()); err == nil {
		t.Fatal("an unmigrated database answered a deployment id")
	}
}

// mustOpen takes an Open's results: the database, closed at cleanup, or the test fails.
func mustOpen(t *testing.T) func(*store.DB, error) *store.DB {
	return func(db *store.DB, err error) *store.DB {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		return db
	}
}

func migratedID(t *testing.T, db *store.DB) string {
	t.Helper()
	ctx := context.Background()
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	id, err := db.DeploymentID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// Servers of a new deployment started together (a rollout of several replicas on a fresh
// database) all migrate it: ent's migration alone is not safe to run concurrently (each
// creates the same tables, the losers fail with "table already exists").
func TestConcurrentMigrateOnEmptyDatabase(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.MySQL(t)
	const servers = 4
	errs := make([]error, servers)
	var wg sync.WaitGroup
	for i := range servers {
		wg.Go(func() {
			db, err := store.OpenMySQL(dsn)
			if err != nil {
				errs[i] = err
				return
			}
			defer db.Close()
			errs[i] = db.Migrate(ctx)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("server %d: %v", i, err)
		}
	}
}
