package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/surgekit/surge/internal/browsertest"
)

// TestPlaygroundSubscriptionInChromium runs subscriptions through the embedded playground in
// headless Chromium: GraphiQL's fetcher with the bundled graphql-ws client, over a real
// WebSocket, shows each event in the result pane. The headers editor's Authorization reaches
// the server in connection_init.
func TestPlaygroundSubscriptionInChromium(t *testing.T) {
	if _, err := browsertest.Chromium(); err != nil {
		if testing.Short() && errors.Is(err, browsertest.ErrNoChromium) {
			t.Skipf("-short and %v", err)
		}
		t.Fatalf("%v (or run go test -short to skip this test)", err)
	}
	e := start(t, func(c *appConfig) { c.SeckillConsumer = false })
	v := e.warmVoucher(3)
	token, user := e.user()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	stock := fmt.Sprintf(`subscription { voucherStock(voucherId: "%d") }`, v)
	page, err := browsertest.OpenPlayground(ctx, e.url+"/", url.Values{
		"query":   {stock},
		"headers": {`{"Authorization": "Bearer ` + token + `"}`},
	})
	if page != nil {
		defer page.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	shows := func(s string) func(string) bool {
		return func(r string) bool { return strings.Contains(r, s) }
	}
	if err := page.Execute(); err != nil {
		t.Fatal(err)
	}
	if _, err := page.WaitResult(shows(`"voucherStock": 3`)); err != nil {
		t.Fatal(err)
	}
	// The next event replaces the first in the pane, while the subscription goes on.
	order := e.grab(user, v)
	if _, err := page.WaitResult(shows(`"voucherStock": 2`)); err != nil {
		t.Fatal(err)
	}
	if running, err := page.Running(); err != nil || !running {
		t.Fatalf("the subscription is not running any more (%v)", err)
	}
	if err := page.Stop(); err != nil {
		t.Fatal(err)
	}

	// orderStatus needs the login that the headers editor carries into connection_init.
	if err := page.SetQuery(`subscription { orderStatus(orderId: "` + strconv.FormatInt(order, 10) + `") }`); err != nil {
		t.Fatal(err)
	}
	if err := page.Execute(); err != nil {
		t.Fatal(err)
	}
	if _, err := page.WaitResult(shows(`"orderStatus": "QUEUED"`)); err != nil {
		t.Fatal(err)
	}
	// A server with the order consumer persists the order: CREATED, and the stream completes.
	start(t, func(c *appConfig) { *c = e.app.Config; c.SeckillConsumer = true })
	result, err := page.WaitDone()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(result, `"orderStatus": "CREATED"`) {
		t.Fatalf("after the consumer ran, the pane shows:\n%s", result)
	}

	wsURL := "ws" + strings.TrimPrefix(e.url, "http") + "/query"
	sockets := page.WebSockets()
	if len(sockets) != 2 || sockets[0] != wsURL || sockets[1] != wsURL {
		t.Errorf("WebSockets opened: %q, want two to %s", sockets, wsURL)
	}
	for _, u := range page.Requested() {
		if !strings.HasPrefix(u, e.url+"/") && !strings.HasPrefix(u, "data:") &&
			!strings.HasPrefix(u, "blob:") && !strings.HasPrefix(u, "about:") {
			t.Errorf("the page requested %s, outside %s", u, e.url)
		}
	}
}
