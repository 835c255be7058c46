package seckill_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/ent/seckillorder"
	"github.com/surgekit/surge/internal/testenv"
	"github.com/surgekit/surge/seckill"
)

// rounds is how many times each invariant test repeats its sale (SECKILL_ROUNDS, default 2).
func rounds() int {
	if n, err := strconv.Atoi(os.Getenv("SECKILL_ROUNDS")); err == nil && n > 0 {
		return n
	}
	return 2
}

// tally counts a sale's outcomes.
type tally struct {
	admitted, sold, already, other atomic.Int64
	mu                             sync.Mutex
	orders                         map[int64]int // order id -> user
}

// storm fires every user once, plus a repeat attempt by every fifth user, from 64 goroutines
// spread over the services, in random order.
func storm(t *testing.T, services []*seckill.Service, users []int, v int) *tally {
	t.Helper()
	attempts := append([]int(nil), users...)
	for i := 0; i < len(users); i += 5 {
		attempts = append(attempts, users[i])
	}
	rand.Shuffle(len(attempts), func(i, j int) { attempts[i], attempts[j] = attempts[j], attempts[i] })
	tl := &tally{orders: map[int64]int{}}
	work := make(chan int)
	var wg sync.WaitGroup
	for g := 0; g < 64; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := services[g%len(services)]
			for u := range work {
				for {
					a, err := s.Grab(context.Background(), u, v)
					switch {
					case errors.Is(err, seckill.ErrNotReady):
						time.Sleep(5 * time.Millisecond)
						continue
					case err == nil:
						tl.admitted.Add(1)
						tl.mu.Lock()
						if prev, ok := tl.orders[a.OrderID]; ok {
							t.Errorf("order id %d handed out twice (users %d and %d)", a.OrderID, prev, u)
						}
						tl.orders[a.OrderID] = u
						tl.mu.Unlock()
					case errors.Is(err, seckill.ErrSoldOut):
						tl.sold.Add(1)
					case errors.Is(err, seckill.ErrAlreadyPurchased):
						tl.already.Add(1)
					default:
						tl.other.Add(1)
						t.Errorf("grab by user %d: %v", u, err)
					}
					break
				}
			}
		}()
	}
	for _, u := range attempts {
		work <- u
	}
	close(work)
	wg.Wait()
	return tl
}

// checkSale asserts the invariants after a sale of stock units to the users has settled.
func checkSale(t *testing.T, e *env, v, stock int, users []int, tl *tally, redisSide bool) {
	t.Helper()
	want := min(stock, len(users))
	st := e.state(v)
	if int(tl.admitted.Load()) != want {
		t.Errorf("admitted %d, want min(stock, users) = %d", tl.admitted.Load(), want)
	}
	if st.orders != want {
		t.Errorf("orders in MySQL %d, want %d", st.orders, want)
	}
	if st.dupUsers != 0 {
		t.Errorf("%d users hold more than one order", st.dupUsers)
	}
	if st.dbStock+st.orders != stock {
		t.Errorf("DB stock %d + orders %d != initial %d", st.dbStock, st.orders, stock)
	}
	if redisSide && st.redisStock+st.buyers != stock {
		t.Errorf("Redis stock %d + buyers %d != initial %d", st.redisStock, st.buyers, stock)
	}
	// Every order handed to a user is in MySQL, for that user.
	ctx := context.Background()
	rows := e.db.Ent.SeckillOrder.Query().Where(seckillorder.VoucherID(v), seckillorder.StatusEQ(seckillorder.StatusCREATED)).AllX(ctx)
	inDB := map[int64]int{}
	for _, o := range rows {
		inDB[int64(o.ID)] = o.UserID
	}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	for id, u := range tl.orders {
		if inDB[id] != u {
			t.Errorf("admitted order %d of user %d: in MySQL for user %d", id, u, inDB[id])
		}
	}
	if len(inDB) != len(tl.orders) {
		t.Errorf("MySQL holds %d orders, %d were admitted", len(inDB), len(tl.orders))
	}
}

// TestInvariantsLua: 10k distinct users (and repeat attempts) against stock 1k, through two
// services on separate Redis clients, each running a consumer: exactly 1k orders, no
// duplicates, stock and orders add up on both sides.
func TestInvariantsLua(t *testing.T) { testInvariants(t, seckill.StrategyLua) }

// TestInvariantsSync: the same sale through the synchronous strategy.
func TestInvariantsSync(t *testing.T) { testInvariants(t, seckill.StrategySync) }

func testInvariants(t *testing.T, strategy seckill.Strategy) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		e := newEnv(t, rdb)
		// The synchronous strategy runs a database transaction per attempt, all serialised
		// on the voucher's row lock: 2 500 users (3 000 attempts) for its 1 000 units.
		users := e.users(10_000)
		if strategy == seckill.StrategySync {
			users = users[:2_500]
		}
		services := []*seckill.Service{e.service(seckill.Options{Strategy: strategy}), e.service(seckill.Options{Strategy: strategy})}
		for _, s := range services {
			e.consume(s)
		}
		for r := 0; r < rounds(); r++ {
			const stock = 1000
			v := e.onSale(services[0], stock)
			tl := storm(t, services, users, v)
			lua := strategy == seckill.StrategyLua
			if lua {
				e.drained(v, 60*time.Second)
			}
			checkSale(t, e, v, stock, users, tl, lua)
			t.Logf("round %d: admitted %d, sold out %d, already %d", r, tl.admitted.Load(), tl.sold.Load(), tl.already.Load())
		}
	})
}

// TestMoreStockThanUsers: every user gets exactly one order and the rest stays on sale.
func TestMoreStockThanUsers(t *testing.T) {
	testenv.EachRedis(t, func(t *testing.T, rdb redis.UniversalClient) {
		e := newEnv(t, rdb)
		users := e.users(300)
		services := []*seckill.Service{e.service(seckill.Options{}), e.service(seckill.Options{})}
		e.consume(services[1])
		v := e.voucher(500)
		tl := storm(t, services, users, v)
		e.drained(v, 30*time.Second)
		checkSale(t, e, v, 500, users, tl, true)
	})
}
