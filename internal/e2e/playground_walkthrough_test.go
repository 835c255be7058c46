package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/surgekit/surge/internal/browsertest"
)

// walkthroughTabs are the playground's tabs on a first visit: the demo data, then the
// README's walkthrough (issue 35, item 7).
var walkthroughTabs = []string{"DemoData", "SendLoginCode", "Login", "Grab", "MyOrders", "OrderStatus", "VoucherStock"}

// demoVoucher is the seeded SECKILL voucher (stock 100).
const demoVoucher = "17179869186"

// runTab selects a tab, optionally rewrites its query (edit), runs it and returns the
// response pane's JSON.
func runTab(t *testing.T, page *browsertest.Page, title string, edit func(string) string) map[string]any {
	t.Helper()
	if err := page.SelectTab(title); err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		q, err := page.Query()
		if err != nil {
			t.Fatal(err)
		}
		if err := page.SetQuery(edit(q)); err != nil {
			t.Fatal(err)
		}
	}
	if err := page.Execute(); err != nil {
		t.Fatal(err)
	}
	text, err := page.WaitDone()
	if err != nil {
		t.Fatal(err)
	}
	var res map[string]any
	if err := json.Unmarshal([]byte(text), &res); err != nil || res["errors"] != nil {
		t.Fatalf("tab %s: the response pane shows %s (%v)", title, text, err)
	}
	return res
}

// The playground of `go run ./cmd/surge`, in headless Chromium at 1 400 × 900 as a newcomer
// opens it: its first tab is a query of the demo data, and running it shows the shop types,
// the shops and the seckill voucher with its stock; the README's walkthrough is the next
// tabs, and run one after the other (the only edit: the code into the login) they log in,
// grab the voucher and show the order. No line of any tab runs past the editor's edge. A
// ?query= link opens on its operation, the walkthrough after it.
func TestPlaygroundWalkthroughInChromium(t *testing.T) {
	if _, err := browsertest.Chromium(); err != nil {
		if testing.Short() && errors.Is(err, browsertest.ErrNoChromium) {
			t.Skipf("-short and %v", err)
		}
		t.Fatalf("%v (or run go test -short to skip this test)", err)
	}
	p := startSurge(t, nil) // the embedded default: dev mode, demo data
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	page, err := browsertest.OpenPlayground(ctx, p.url+"/", nil, browsertest.WindowSize(1400, 900))
	if page != nil {
		defer page.Close()
	}
	if err != nil {
		t.Fatal(err)
	}

	tabs, active, err := page.Tabs()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(tabs, walkthroughTabs) || active != "DemoData" {
		t.Fatalf("tabs %q, active %q; want %q, DemoData first", tabs, active, walkthroughTabs)
	}
	if q, err := page.Query(); err != nil || !strings.Contains(q, "query DemoData {") || !strings.Contains(q, "vouchers {") {
		t.Fatalf("the first screen's query: %q (%v)", q, err)
	}
	for _, title := range walkthroughTabs {
		if err := page.SelectTab(title); err != nil {
			t.Fatal(err)
		}
		lines, excess, err := page.QueryOverflow()
		if err != nil {
			t.Fatal(err)
		}
		if len(lines) > 0 || excess > 0 {
			t.Errorf("tab %s at 1 400 px: %d lines run past the editor's edge (content %.0f px wider than the editor): %q", title, len(lines), excess, lines)
		}
	}

	demo := runTab(t, page, "DemoData", nil)
	var seckill map[string]any
	for _, v := range list(demo, "data", "onSale", "edges", 0, "node", "vouchers") {
		if str(v, "kind") == "SECKILL" {
			seckill, _ = v.(map[string]any)
		}
	}
	if len(list(demo, "data", "shopTypes")) != 10 || len(list(demo, "data", "shops", "edges")) != 5 ||
		seckill == nil || seckill["id"] != demoVoucher || seckill["stock"] != 100.0 {
		t.Fatalf("the demo data query shows %v", demo)
	}

	code := str(runTab(t, page, "SendLoginCode", nil), "data", "sendLoginCode", "devCode")
	if !regexp.MustCompile(`^\d{6}$`).MatchString(code) {
		t.Fatalf("SendLoginCode: devCode %q", code)
	}
	login := runTab(t, page, "Login", func(q string) string { return strings.Replace(q, `"<code>"`, `"`+code+`"`, 1) })
	if str(login, "data", "login", "user", "role") != "ADMIN" {
		t.Fatalf("Login: %v", login)
	}
	// No Authorization header is set: the page sends the login's token.
	order := str(runTab(t, page, "Grab", nil), "data", "seckillVoucher", "orderId")
	if order == "" {
		t.Fatal("Grab answered no order")
	}
	mine := runTab(t, page, "MyOrders", nil)
	if str(mine, "data", "myOrders", "edges", 0, "node", "id") != order {
		t.Fatalf("MyOrders: %v, want order %s", mine, order)
	}

	// A link from the README: its operation first, the walkthrough after it.
	link := `{ voucher(id: "` + demoVoucher + `") { stock } }`
	linked, err := browsertest.OpenPlayground(ctx, p.url+"/", url.Values{"query": {link}}, browsertest.WindowSize(1400, 900))
	if linked != nil {
		defer linked.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	tabs, active, err = linked.Tabs()
	if err != nil || len(tabs) != len(walkthroughTabs)+1 || !slices.Equal(tabs[1:], walkthroughTabs) || active != tabs[0] {
		t.Fatalf("the linked page's tabs: %q, active %q (%v)", tabs, active, err)
	}
	if err := linked.Execute(); err != nil {
		t.Fatal(err)
	}
	if text, err := linked.WaitDone(); err != nil || !strings.Contains(text, `"stock": 99`) {
		t.Fatalf("the linked query: %s (%v), want the stock after one grab, 99", text, err)
	}
}
