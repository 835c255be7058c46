package graph

import (
	"context"
	"testing"
	"time"

	"github.com/surgekit/surge/ent"
	"github.com/surgekit/surge/ent/seckillorder"
	"github.com/surgekit/surge/ent/shop"
	"github.com/surgekit/surge/ent/shoptype"
	"github.com/surgekit/surge/ent/user"
	"github.com/surgekit/surge/ent/voucher"
	"github.com/surgekit/surge/idgen"
	"github.com/surgekit/surge/internal/store"
	"github.com/surgekit/surge/internal/testenv"
)

// tableRanges copies ent's GlobalID ranges, which ent keeps out of reach: ent's own Noder must
// resolve a row of every table to the table nodeTable names.
func TestNodeTablesMatchEnt(t *testing.T) {
	ctx := context.Background()
	db, err := store.OpenMySQL(testenv.MySQL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := store.SeedDemo(ctx, db.Ent, time.Now()); err != nil {
		t.Fatal(err)
	}
	u := db.Ent.User.Create().SetPhone(testenv.Phone()).SetNickname("n").SaveX(ctx)
	ids := []int{db.Ent.Shop.Query().FirstIDX(ctx), db.Ent.ShopType.Query().FirstIDX(ctx), db.Ent.Voucher.Query().FirstIDX(ctx), u.ID}
	if len(ids) != len(tableRanges) {
		t.Fatalf("tableRanges has %d tables, the test covers %d", len(tableRanges), len(ids))
	}
	for _, id := range ids {
		n, err := db.Ent.Noder(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := nodeTable(id), tableOf(n); got != want {
			t.Errorf("id %d: nodeTable says %q, ent's Noder found a row of %q", id, got, want)
		}
	}
	if nodeTable(int(idgen.MinGenerated)+1) != seckillorder.Table || nodeTable(5<<32+1) != "" || nodeTable(0) != "" {
		t.Fatal("order ids, and ids beyond every range")
	}
}

func tableOf(n ent.Noder) string {
	switch n.(type) {
	case *ent.Shop:
		return shop.Table
	case *ent.ShopType:
		return shoptype.Table
	case *ent.Voucher:
		return voucher.Table
	case *ent.User:
		return user.Table
	}
	return "?"
}
