package e2e_test

import (
	"time"

	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/surgekit/surge/internal/app"
	"github.com/surgekit/surge/internal/testenv"
)

// behindProxy returns a MySQL DSN for a fresh test database that goes through a proxy the test
// can cut, and that proxy.
func behindProxy(t *testing.T) (string, *testenv.Proxy) {
	t.Helper()
	cfg, err := mysql.ParseDSN(testenv.MySQL(t))
	if err != nil {
		t.Fatal(err)
	}
	p := testenv.NewProxy(t, cfg.Addr)
	cfg.Addr = p.Addr
	return cfg.FormatDSN(), p
}

// TestGrabPayloadNeedsNoSecondRead: a successful grab answers its order (id, status,
// createdAt) from what the grab itself decided. It used to read the order back from the
// database and Redis, so that under load (MariaDB out of connections) an admitted grab came
// back as data.seckillVoucher.orderId plus errors[INTERNAL] at seckillVoucher.order. Here the
// database is unreachable during the grab, which admission does not need.
func TestGrabPayloadNeedsNoSecondRead(t *testing.T) {
	dsn, db := behindProxy(t)
	e := start(t, func(c *app.Config) { c.MySQLDSN = dsn })
	_, shopID := firstTypeAndShop(e)
	admin := e.login(e.admin)
	v := e.onSale(admin, shopID, "Under load", 5)
	u := e.login(testenv.Phone())

	db.Cut()
	r := e.do(u, `mutation($v: ID!) { seckillVoucher(voucherId: $v) { orderId status order { id status createdAt } } }`,
		map[string]any{"v": v})
	db.Restore(t)
	if len(r.Errors) > 0 {
		t.Fatalf("admitted grab with the database unreachable: %s", r.Raw)
	}
	id := str(r.Data, "seckillVoucher", "orderId")
	if id == "" || str(r.Data, "seckillVoucher", "order", "id") != id ||
		str(r.Data, "seckillVoucher", "order", "status") != "QUEUED" || str(r.Data, "seckillVoucher", "order", "createdAt") == "" {
		t.Fatalf("grab payload = %s", r.Raw)
	}
	// The order is the user's, and becomes CREATED once the database is back.
	e.waitOrder(u, id, "CREATED", 10*time.Second)
}
