package seckill_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/lua"
	"github.com/surgekit/surge/seckill"
)

// TestAckRemovesOnlySettledEntries: the acknowledgement script cuts the stream's settled prefix
// in one trim but never an entry still pending with another consumer or never delivered:
// consumer B settles its batch while A's older batch is pending, then A settles, then an entry
// nobody read yet is settled (as a rebuild does for an order found in the database).
func TestAckRemovesOnlySettledEntries(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		keys := seckill.KeysOf("seckill-test"+testenv.Phone(), 1)
		k := keys.Orders
		t.Cleanup(func() { rdb.Del(ctx, k) })
		for i := 1; i <= 10; i++ {
			rdb.XAdd(ctx, &redis.XAddArgs{Stream: k, ID: fmt.Sprintf("1-%d", i), Values: []any{"o", i}})
		}
		if err := rdb.XGroupCreate(ctx, k, "orders", "0").Err(); err != nil {
			t.Fatal(err)
		}
		read := func(consumer string) {
			if err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "orders", Consumer: consumer, Streams: []string{k, ">"}, Count: 3, Block: -1}).Err(); err != nil {
				t.Fatal(err)
			}
		}
		ack := func(ids ...string) {
			if _, err := lua.Ack(ctx, rdb, lua.SeckillKeys(keys), "orders", ids); err != nil {
				t.Fatal(err)
			}
		}
		left := func(want string) {
			t.Helper()
			msgs, err := rdb.XRange(ctx, k, "-", "+").Result()
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, m := range msgs {
				ids = append(ids, strings.TrimPrefix(m.ID, "1-"))
			}
			if got := strings.Join(ids, " "); got != want {
				t.Fatalf("stream holds %q, want %q", got, want)
			}
		}
		read("A") // 1-3
		read("B") // 4-6
		ack("1-4", "1-5", "1-6")
		left("1 2 3 7 8 9 10")
		ack("1-1", "1-2", "1-3")
		left("7 8 9 10")
		ack("1-9") // never delivered: deleted alone, 7 and 8 stay
		left("7 8 10")
		if n := rdb.XPending(ctx, k, "orders").Val().Count; n != 0 {
			t.Fatalf("%d entries still pending", n)
		}
	})
}
