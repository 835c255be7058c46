package seckill_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/ent/seckillorder"
	"github.com/surgekit/surge/internal/store"
	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/lua"
	"github.com/surgekit/surge/seckill"
)

// grabReady grabs, waiting out NOT_READY while a rebuild runs.
func grabReady(t *testing.T, s *seckill.Service, user, v int) (seckill.Admission, error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		a, err := s.Grab(context.Background(), user, v)
		if !errors.Is(err, seckill.ErrNotReady) || time.Now().After(deadline) {
			return a, err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// snapshot is a voucher's raw Redis state, to prove a failed script wrote nothing.
func snapshot(t *testing.T, rdb redis.UniversalClient, k seckill.Keys) string {
	t.Helper()
	ctx := context.Background()
	var b strings.Builder
	for _, key := range []string{k.Meta, k.Stock, k.Buyers, k.Orders} {
		typ := rdb.Type(ctx, key).Val()
		fmt.Fprintf(&b, "%s=%s:", key, typ)
		switch typ {
		case "string":
			b.WriteString(rdb.Get(ctx, key).Val())
		case "hash":
			fmt.Fprint(&b, rdb.HGetAll(ctx, key).Val())
		case "stream":
			fmt.Fprint(&b, rdb.XLen(ctx, key).Val())
		case "list":
			fmt.Fprint(&b, rdb.LRange(ctx, key, 0, -1).Val())
		}
		b.WriteString(";")
	}
	return b.String()
}

// TestScriptAtomicity: a key of the wrong type makes the admission script fail before its
// first write, whichever key it is, so nothing is half-applied.
func TestScriptAtomicity(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		e := newEnv(t, rdb)
		ctx := context.Background()
		users := e.users(2)
		s := e.service(seckill.Options{})
		for _, c := range []struct {
			name   string
			break_ func(k seckill.Keys)
		}{
			{"stream is a string", func(k seckill.Keys) { rdb.Del(ctx, k.Orders); rdb.Set(ctx, k.Orders, "x", 0) }},
			{"stream is a list", func(k seckill.Keys) { rdb.Del(ctx, k.Orders); rdb.RPush(ctx, k.Orders, "x") }},
			{"buyers is a list", func(k seckill.Keys) { rdb.Del(ctx, k.Buyers); rdb.RPush(ctx, k.Buyers, "x") }},
			{"stock is not a number", func(k seckill.Keys) { rdb.Set(ctx, k.Stock, "many", 0) }},
			{"stock is not an integer", func(k seckill.Keys) { rdb.Set(ctx, k.Stock, "4.5", 0) }},
			{"stream is a hash", func(k seckill.Keys) { rdb.Del(ctx, k.Orders); rdb.HSet(ctx, k.Orders, "x", "y") }},
			{"meta is a string", func(k seckill.Keys) { rdb.Del(ctx, k.Meta); rdb.Set(ctx, k.Meta, "x", 0) }},
		} {
			t.Run(c.name, func(t *testing.T) {
				v := e.onSale(s, 5)
				if _, err := s.Grab(ctx, users[0], v); err != nil {
					t.Fatal(err)
				}
				k := seckill.KeysOf(e.prefix, v)
				c.break_(k)
				before := snapshot(t, rdb, k)
				_, err := s.Grab(ctx, users[1], v)
				if err == nil {
					t.Fatal("grab succeeded on a broken voucher")
				}
				if after := snapshot(t, rdb, k); after != before {
					t.Fatalf("failed grab changed Redis:\nbefore %s\nafter  %s", before, after)
				}
			})
		}
	})
}

// TestCrashedConsumerIsReclaimed: a consumer reads a batch and dies before acknowledging it;
// another one claims the entries after ClaimIdle and persists them: nothing lost, nothing
// twice. One of the dead consumer's orders had even reached MySQL before it died: its
// redelivery is harmless (the stock is not decremented twice).
func TestCrashedConsumerIsReclaimed(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		e := newEnv(t, rdb)
		ctx := context.Background()
		const stock = 50
		users := e.users(40)
		s := e.service(seckill.Options{})
		v := e.onSale(s, stock)
		for _, u := range users {
			if _, err := s.Grab(ctx, u, v); err != nil {
				t.Fatal(err)
			}
		}
		// The doomed consumer: XREADGROUP takes every entry into its pending list, then it dies
		// ...after committing its first order to MySQL, as the consumer's transaction does.
		k := seckill.KeysOf(e.prefix, v)
		read := e.readAsDoomed(v, len(users))
		e.commitAsConsumer(v, read[:1])

		// A rebuild now must not count that order twice (in MySQL and in the stream).
		if err := s.Rebuild(ctx, v); err != nil {
			t.Fatal(err)
		}
		rescuer := e.service(seckill.Options{ClaimIdle: 300 * time.Millisecond})
		e.consume(rescuer)
		e.drained(v, 20*time.Second)
		st := e.state(v)
		if st.orders != len(users) || st.dupUsers != 0 || st.dbStock != stock-len(users) {
			t.Fatalf("after the rescue: %+v, want %d orders and DB stock %d", st, len(users), stock-len(users))
		}
		if st.redisStock+st.buyers != stock {
			t.Fatalf("Redis stock %d + buyers %d != %d", st.redisStock, st.buyers, stock)
		}
		pending, err := rdb.XPending(ctx, k.Orders, "orders").Result()
		if err != nil || pending.Count != 0 {
			t.Fatalf("still pending: %+v %v", pending, err)
		}
	})
}

// TestPoisonEntryIsDeadLettered: an order the database keeps refusing (here a trigger refuses
// one user's orders) is retried, then after MaxDeliveries moved to the dead-letter stream,
// recorded FAILED and compensated; the other orders are persisted meanwhile, and the user
// can buy again once the cause is gone.
func TestPoisonEntryIsDeadLettered(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		e := newEnv(t, rdb)
		ctx := context.Background()
		const stock = 10
		users := e.users(3)
		poisoned := users[1]
		cure := e.poisonUser("poison", poisoned)
		s := e.service(seckill.Options{ClaimIdle: 200 * time.Millisecond, MaxDeliveries: 3})
		v := e.onSale(s, stock)
		var bad int64
		for _, u := range users {
			a, err := s.Grab(ctx, u, v)
			if err != nil {
				t.Fatal(err)
			}
			if u == poisoned {
				bad = a.OrderID
			}
		}
		e.consume(s)
		e.drained(v, 20*time.Second)

		k := seckill.KeysOf(e.prefix, v)
		dead, err := rdb.XRange(ctx, k.Dead, "-", "+").Result()
		if err != nil || len(dead) != 1 {
			t.Fatalf("dead letters: %v %v", dead, err)
		}
		if dead[0].Values["o"] != fmt.Sprint(bad) || !strings.Contains(dead[0].Values["reason"].(string), "poisoned order") {
			t.Fatalf("dead letter %v, want order %d with the database's reason", dead[0].Values, bad)
		}
		// Dead letters grow with failed orders: they expire with the sale's other keys (the
		// FAILED rows stay in the database).
		if ttl, want := rdb.PTTL(ctx, k.Dead).Val(), rdb.PTTL(ctx, k.Meta).Val(); ttl <= 0 || (ttl-want).Abs() > time.Minute {
			t.Errorf("dead-letter stream TTL %v, want the sale's (%v)", ttl, want)
		}
		o, err := s.Order(ctx, poisoned, bad)
		if err != nil || o == nil || o.Status != seckillorder.StatusFAILED {
			t.Fatalf("poisoned order: %+v %v, want FAILED", o, err)
		}
		st := e.state(v)
		if st.orders != 2 || st.failed != 1 || st.dbStock != stock-2 || st.redisStock != stock-2 || st.buyers != 2 {
			t.Fatalf("after compensation: %+v", st)
		}
		// The cause goes away; the user buys again and this time it sticks.
		cure()
		a, err := s.Grab(ctx, poisoned, v)
		if err != nil {
			t.Fatalf("grab after compensation: %v", err)
		}
		e.drained(v, 20*time.Second)
		if o, err := s.Order(ctx, poisoned, a.OrderID); err != nil || o == nil || o.Status != seckillorder.StatusCREATED {
			t.Fatalf("second order: %+v %v", o, err)
		}
		st = e.state(v)
		if st.orders != 3 || st.dbStock+st.orders != stock || st.redisStock+st.buyers != stock {
			t.Fatalf("final: %+v", st)
		}
	})
}

// TestPoisonEntryIsDeadLetteredWithTheDefaultClaimIdle: the consumer's own retries of an entry
// that keeps failing here (every ownIdle, 2 s) must not keep it from being dead-lettered when
// ClaimIdle is longer than that, as the default (30 s) is: each retry re-delivers the entry,
// so it is never idle long enough to be claimed.
func TestPoisonEntryIsDeadLetteredWithTheDefaultClaimIdle(t *testing.T) {
	e := newEnv(t, testenv.Redis(t))
	ctx := context.Background()
	users := e.users(2)
	poisoned := users[1]
	e.poisonUser("poison", poisoned)
	s := e.service(seckill.Options{MaxDeliveries: 3}) // ClaimIdle: the default
	v := e.onSale(s, 10)
	var bad int64
	for _, u := range users {
		a, err := s.Grab(ctx, u, v)
		if err != nil {
			t.Fatal(err)
		}
		if u == poisoned {
			bad = a.OrderID
		}
	}
	e.consume(s)
	// Up to MaxDeliveries retries, ownIdle apart, and a sweep's period to notice each.
	e.drained(v, 20*time.Second)
	if o, err := s.Order(ctx, poisoned, bad); err != nil || o == nil || o.Status != seckillorder.StatusFAILED {
		t.Fatalf("poisoned order: %+v %v, want FAILED", o, err)
	}
	if st := e.state(v); st.orders != 1 || st.failed != 1 || st.dbStock != 9 || st.redisStock != 9 || st.buyers != 1 {
		t.Fatalf("after compensation: %+v", st)
	}
}

// TestStockGuardFailsOrdersAtOnce: orders Redis admitted beyond the database's stock (after a
// failover to a replica that lagged re-sold units whose orders were written; here the
// database stock lowered by hand) fail the stock guard. That is final, whatever a retry
// does: they are recorded FAILED at once, with the default options, not left pending for
// ClaimIdle and MaxDeliveries; their units are not put back on sale in Redis.
func TestStockGuardFailsOrdersAtOnce(t *testing.T) {
	e := newEnv(t, testenv.Redis(t))
	ctx := context.Background()
	users := e.users(3)
	s := e.service(seckill.Options{})
	v := e.onSale(s, 10)
	var ids []int64
	for _, u := range users {
		a, err := s.Grab(ctx, u, v)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, a.OrderID)
	}
	if _, err := e.db.SQL.ExecContext(ctx, "UPDATE vouchers SET stock = 1 WHERE id = ?", v); err != nil {
		t.Fatal(err)
	}
	e.consume(s)
	e.drained(v, 3*time.Second)
	statuses := map[seckillorder.Status]int{}
	for i, u := range users {
		o, err := s.Order(ctx, u, ids[i])
		if err != nil || o == nil {
			t.Fatalf("order %d: %+v %v", ids[i], o, err)
		}
		statuses[o.Status]++
	}
	if statuses[seckillorder.StatusCREATED] != 1 || statuses[seckillorder.StatusFAILED] != 2 {
		t.Fatalf("statuses %v, want 1 CREATED and 2 FAILED", statuses)
	}
	dead, err := e.rdb.XLen(ctx, seckill.KeysOf(e.prefix, v).Dead).Result()
	if err != nil || dead != 2 {
		t.Fatalf("dead letters: %d %v, want 2", dead, err)
	}
	if st := e.state(v); st.orders != 1 || st.failed != 2 || st.dbStock != 0 || st.redisStock != 7 {
		t.Fatalf("after the guard: %+v, want 1 order, 2 FAILED, database stock 0, Redis stock 7", st)
	}
}

// TestRedisStateLostMidSale: the voucher's keys vanish mid-sale (what a restart without
// persistence or a flush does to them): grabs answer NOT_READY, a rebuild from MySQL follows,
// the sale goes on and ends with exactly the stock sold, never more.
func TestRedisStateLostMidSale(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		e := newEnv(t, rdb)
		ctx := context.Background()
		const stock = 300
		users := e.users(1000)
		services := []*seckill.Service{e.service(seckill.Options{}), e.service(seckill.Options{})}
		for _, s := range services {
			e.consume(s)
		}
		v := e.onSale(services[0], stock)
		k := seckill.KeysOf(e.prefix, v)
		var notReady int
		// First half of the users, then the loss, then everyone again (those whose queued
		// orders were lost with the stream may buy again).
		for _, u := range users[:500] {
			if _, err := services[u%2].Grab(ctx, u, v); err != nil && !errors.Is(err, seckill.ErrSoldOut) {
				t.Fatal(err)
			}
		}
		if err := rdb.Del(ctx, k.Meta, k.Stock, k.Buyers, k.Orders).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := services[0].Grab(ctx, users[600], v); !errors.Is(err, seckill.ErrNotReady) {
			t.Fatalf("grab right after the loss: %v, want ErrNotReady", err)
		}
		for _, u := range users {
			for {
				_, err := services[u%2].Grab(ctx, u, v)
				if errors.Is(err, seckill.ErrNotReady) {
					notReady++
					time.Sleep(5 * time.Millisecond)
					continue
				}
				if err != nil && !errors.Is(err, seckill.ErrSoldOut) && !errors.Is(err, seckill.ErrAlreadyPurchased) {
					t.Fatal(err)
				}
				break
			}
		}
		e.drained(v, 30*time.Second)
		st := e.state(v)
		t.Logf("NOT_READY answers while rebuilding: %d; final %+v", notReady+1, st)
		if st.orders != stock || st.dupUsers != 0 || st.dbStock != 0 {
			t.Fatalf("after the loss: %+v, want exactly %d orders and DB stock 0", st, stock)
		}
		if st.redisStock != 0 || st.buyers != stock {
			t.Fatalf("Redis after the sale: stock %d buyers %d, want 0 and %d", st.redisStock, st.buyers, stock)
		}
	})
}

// TestGoneConsumersAreForgotten: consumers of processes long gone (nothing pending, idle for
// 100 x ClaimIdle) leave the group, so restarts do not grow it forever.
func TestGoneConsumersAreForgotten(t *testing.T) {
	rdb := testenv.Redis(t)
	e := newEnv(t, rdb)
	ctx := context.Background()
	s := e.service(seckill.Options{ClaimIdle: 10 * time.Millisecond})
	v := e.onSale(s, 5)
	k := seckill.KeysOf(e.prefix, v)
	if err := rdb.XGroupCreateConsumer(ctx, k.Orders, "orders", "ghost").Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	e.consume(s)
	deadline := time.Now().Add(10 * time.Second)
	for {
		cs, err := rdb.XInfoConsumers(ctx, k.Orders, "orders").Result()
		if err != nil {
			t.Fatal(err)
		}
		ghost := false
		for _, c := range cs {
			ghost = ghost || c.Name == "ghost"
		}
		if !ghost {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ghost consumer still in the group: %+v", cs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestDatabaseOutage: while MySQL is unreachable nothing is lost and nothing is
// dead-lettered, however short ClaimIdle and MaxDeliveries are: the consumer stops reading and
// claiming until the database answers, then the backlog drains.
func TestDatabaseOutage(t *testing.T) {
	rdb := testenv.Redis(t)
	e := newEnv(t, rdb)
	ctx := context.Background()
	// A second database handle on the same (test) database, through a proxy we can cut.
	dsn, err := mysql.ParseDSN(e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewProxy(t, dsn.Addr)
	dsn.Addr = proxy.Addr
	cut, err := store.OpenMySQL(dsn.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cut.Close() })
	s, err := seckill.New(cut.Ent, testenv.Another(t, rdb), e.options(seckill.Options{ClaimIdle: 100 * time.Millisecond, MaxDeliveries: 1}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	const stock = 100
	users := e.users(60)
	v := e.onSale(s, stock)
	e.consume(s)
	proxy.Cut()
	for _, u := range users {
		if _, err := s.Grab(ctx, u, v); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(2 * time.Second) // twenty ClaimIdles, two deliveries past MaxDeliveries
	k := seckill.KeysOf(e.prefix, v)
	if n := rdb.XLen(ctx, k.Orders).Val(); n != int64(len(users)) {
		t.Fatalf("during the outage the stream holds %d orders, want %d", n, len(users))
	}
	if n := rdb.XLen(ctx, k.Dead).Val(); n != 0 {
		t.Fatalf("%d orders dead-lettered during a database outage", n)
	}
	proxy.Restore(t)
	e.drained(v, 20*time.Second)
	st := e.state(v)
	if st.orders != len(users) || st.failed != 0 || st.dbStock != stock-len(users) || st.redisStock+st.buyers != stock {
		t.Fatalf("after the outage: %+v", st)
	}
}

// TestRetriedGrabIsIdempotent: a client that lost the reply and resends the very same call
// (same order id) is told it was admitted, and nothing is applied twice.
func TestRetriedGrabIsIdempotent(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		e := newEnv(t, rdb)
		ctx := context.Background()
		s := e.service(seckill.Options{})
		v := e.onSale(s, 5)
		k := seckill.KeysOf(e.prefix, v)
		now := time.Now()
		grab := func(order int64) (lua.GrabReply, error) {
			res, err := lua.Grab(ctx, rdb, lua.SeckillKeys(k), now, []lua.GrabRequest{{User: 42, Order: order}})
			if err != nil {
				return lua.GrabReply{}, err
			}
			return res[0], nil
		}
		for i := 0; i < 2; i++ {
			r, err := grab(777)
			if err != nil || r != (lua.GrabReply{Outcome: lua.GrabAdmitted, StockLeft: 4}) {
				t.Fatalf("call %d: %+v %v, want admitted with 4 left", i, r, err)
			}
		}
		if n := rdb.XLen(ctx, k.Orders).Val(); n != 1 {
			t.Fatalf("%d stream entries, want 1", n)
		}
		r, err := grab(778)
		if err != nil || r != (lua.GrabReply{Outcome: lua.GrabAlreadyBuyer, Holder: 777}) {
			t.Fatalf("a new grab by the same user: %+v %v, want already purchased (777)", r, err)
		}
	})
}

// TestCrashLoopDoesNotDeadLetter: entries re-claimed many times by consumers that kept dying
// (delivery count far over MaxDeliveries) are persisted by a healthy consumer, not given up on:
// only entries that failed to persist in the claiming process are dead-lettered.
func TestCrashLoopDoesNotDeadLetter(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		e := newEnv(t, rdb)
		ctx := context.Background()
		users := e.users(5)
		s := e.service(seckill.Options{ClaimIdle: 100 * time.Millisecond, MaxDeliveries: 1})
		v := e.onSale(s, 10)
		for _, u := range users {
			if _, err := s.Grab(ctx, u, v); err != nil {
				t.Fatal(err)
			}
		}
		k := seckill.KeysOf(e.prefix, v)
		read, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "orders", Consumer: "dead-0", Streams: []string{k.Orders, ">"}}).Result()
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, m := range read[0].Messages {
			ids = append(ids, m.ID)
		}
		for i := 1; i <= 4; i++ { // four more crashed consumers claimed them in turn
			if err := rdb.XClaim(ctx, &redis.XClaimArgs{Stream: k.Orders, Group: "orders", Consumer: fmt.Sprint("dead-", i), Messages: ids}).Err(); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(150 * time.Millisecond)
		e.consume(s)
		e.drained(v, 10*time.Second)
		st := e.state(v)
		if st.orders != len(users) || st.failed != 0 || rdb.XLen(ctx, k.Dead).Val() != 0 {
			t.Fatalf("after the crash loop: %+v, dead letters %d", st, rdb.XLen(ctx, k.Dead).Val())
		}
	})
}
