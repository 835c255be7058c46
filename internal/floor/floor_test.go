package floor_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/surgekit/surge/internal/floor"
	"github.com/surgekit/surge/internal/testenv"
)

func post(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"query":"mutation { seckillVoucher(voucherId: \"1\") { orderId } }"}`))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// floor2 on real Redis: a session's first grab is admitted, its second names that order
// (ALREADY_PURCHASED), a token without a session is refused, a sale of stock 1 sells out, and
// Close leaves no key of the floor behind.
func TestGrab(t *testing.T) {
	ctx := context.Background()
	rdb := floor.Client([]string{testenv.RedisAddr()}, "", 0)
	t.Cleanup(func() { _ = rdb.Close() })
	ns := "floortest" + testenv.Phone()
	testenv.CleanupKeys(t, rdb, ns+":*") // runs before rdb.Close
	g, err := floor.NewGrab(ctx, rdb, floor.GrabOptions{Namespace: ns, Stock: 1})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g)
	defer srv.Close()
	tokens, err := g.Sessions(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	code, first := post(t, srv.URL, tokens[0])
	if code != 200 || !strings.Contains(first, `"orderId":"`) || strings.Contains(first, "errors") {
		t.Fatalf("first grab: %d %s", code, first)
	}
	order := strings.Split(strings.SplitAfter(first, `"orderId":"`)[1], `"`)[0]
	if _, again := post(t, srv.URL, tokens[0]); !strings.Contains(again, `"code":"ALREADY_PURCHASED","orderId":"`+order+`"`) {
		t.Errorf("second grab of the same user: %s, want ALREADY_PURCHASED naming %s", again, order)
	}
	if _, other := post(t, srv.URL, tokens[1]); !strings.Contains(other, `"code":"SOLD_OUT"`) {
		t.Errorf("another user after the only unit went: %s, want SOLD_OUT", other)
	}
	if _, none := post(t, srv.URL, "no-such-token"); !strings.Contains(none, `"code":"UNAUTHENTICATED"`) {
		t.Errorf("unknown token: %s, want UNAUTHENTICATED", none)
	}
	if err := g.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// SCAN, not KEYS: the Redis is shared with other tests.
	for it := rdb.Scan(ctx, 0, ns+":*", 1000).Iterator(); it.Next(ctx); {
		t.Errorf("Close left %s", it.Val())
	}
}
