// Package browsertest drives a headless Chromium for end-to-end tests of the
// GraphiQL playground (package internal/playground).
//
// It needs a Chromium binary; scripts/ensure-chromium.sh installs one from
// Debian's packages (apt-get install chromium).
package browsertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// ErrNoChromium is wrapped by the error of [Chromium] when no browser binary
// is found.
var ErrNoChromium = errors.New("no Chromium binary found")

// chromiumNames are looked up on PATH after /usr/bin/chromium.
var chromiumNames = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// Chromium returns the path of a Chromium (or Chrome) binary: /usr/bin/chromium
// if it exists, else the first of chromium, chromium-browser, google-chrome or
// google-chrome-stable found on PATH.
func Chromium() (string, error) { return findChromium("/usr/bin/chromium") }

func findChromium(debian string) (string, error) {
	if fi, err := os.Stat(debian); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
		return debian, nil
	}
	for _, name := range chromiumNames {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("browsertest: %w (looked for %s and %s on PATH); run scripts/ensure-chromium.sh to install it",
		ErrNoChromium, debian, strings.Join(chromiumNames, ", "))
}

// defaultTimeout bounds RunPlaygroundQuery when ctx has no deadline.
const defaultTimeout = 2 * time.Minute

// networkQuiet is how long the page must have no request in flight before
// the harness considers it settled (GraphiQL fetches the schema on load).
const (
	networkQuiet    = 300 * time.Millisecond
	networkQuietMax = 10 * time.Second
)

// RunPlaygroundQuery starts a headless Chromium with a fresh, temporary
// profile, opens pageURL with the URL parameter query=<query> added, waits for
// GraphiQL to be ready with that query in its editor, clicks the execute
// button and waits for the response pane to show a response. It returns the
// text of the response pane and every URL the page requested (from the
// DevTools network events, in order, including the page itself and any data:
// URLs), so a caller can check that nothing left the test server.
//
// The query should hold a single operation: with several, GraphiQL's execute
// button opens an operation menu instead of running.
//
// Everything is bounded by ctx (by two minutes when ctx has no deadline). The
// browser is closed before RunPlaygroundQuery returns: chromedp creates the
// fresh --user-data-dir under os.TempDir(), and after the browser exits it
// kills any Chromium process still using it and removes it; Chromium's other
// temporary files go to a private TMPDIR that is removed too. The list of
// requested URLs is returned on error too.
func RunPlaygroundQuery(ctx context.Context, pageURL, query string) (result string, requested []string, err error) {
	p, err := OpenPlayground(ctx, pageURL, url.Values{"query": {query}})
	if p == nil {
		return "", nil, err
	}
	defer func() {
		p.Close()
		requested = p.Requested()
	}()
	if err != nil {
		return "", nil, err
	}
	if err := p.Execute(); err != nil {
		return "", nil, err
	}
	result, err = p.WaitDone()
	if err != nil {
		return "", nil, err
	}
	return result, nil, nil
}

// Page is the playground open in a headless Chromium (see [OpenPlayground]).
// Its methods are bounded by the context given to OpenPlayground; Close it.
type Page struct {
	ctx    context.Context // the browser tab
	done   context.Context // OpenPlayground's context, with its default deadline
	close  func()
	netlog *netLog
	closed sync.Once
}

// OpenPlayground starts a headless Chromium with a fresh, temporary profile,
// opens pageURL with params added to its query string (the playground reads
// "query", "variables" and "headers"), and waits for GraphiQL to be ready,
// with params' query (if any) in its editor and the schema fetch settled.
//
// Everything is bounded by ctx (by two minutes when ctx has no deadline).
// Close removes the browser's profile and temporary files (see
// [RunPlaygroundQuery]). On error the returned Page, if not nil, must still be
// closed; its Requested list tells what the page loaded.
func OpenPlayground(ctx context.Context, pageURL string, params url.Values, opts ...Option) (*Page, error) {
	target, err := url.Parse(pageURL)
	if err != nil {
		return nil, fmt.Errorf("browsertest: page URL: %w", err)
	}
	q := target.Query()
	for k, vs := range params {
		q[k] = vs
	}
	target.RawQuery = q.Encode()
	p, err := launch(ctx, opts...)
	if err != nil {
		return p, err
	}
	ctx, browserCtx := p.done, p.ctx
	if err := chromedp.Do(browserCtx, chromedp.Navigate(target.String())); err != nil {
		return p, p.step("open "+target.String(), err)
	}
	if err := p.poll(jsReady); err != nil {
		return p, p.step("wait for GraphiQL", err)
	}

	// The URL parameter must have reached the query editor.
	if want := strings.TrimSpace(params.Get("query")); want != "" {
		waitCtx, cancelWait := context.WithTimeout(browserCtx, 5*time.Second)
		_, err = chromedp.Run(waitCtx, chromedp.Poll[chromedp.Void](
			fmt.Sprintf(`(%s) === %s`, jsQueryText, jsString(want)),
			chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(0)))
		cancelWait()
		if err != nil {
			got, _ := chromedp.Run(browserCtx, chromedp.Evaluate[string](jsQueryText))
			return p, p.step("query editor", fmt.Errorf("shows %q, want %q from the query parameter: %w", got, want, err))
		}
	}

	// Let the schema fetch settle, so that its outcome cannot land in the
	// response pane after the click.
	if err := p.netlog.waitQuiet(ctx, networkQuiet, networkQuietMax); err != nil {
		return p, p.step("wait for the network to settle", err)
	}
	return p, nil
}

// Open starts a headless Chromium with a fresh, temporary profile (see
// [OpenPlayground]) and opens pageURL, waiting for its load event. Evaluate
// script in it with [Page.Eval]. On error the returned Page, if not nil, must
// still be closed.
func Open(ctx context.Context, pageURL string, opts ...Option) (*Page, error) {
	p, err := launch(ctx, opts...)
	if err != nil {
		return p, err
	}
	return p, p.step("open "+pageURL, chromedp.Do(p.ctx, chromedp.Navigate(pageURL)))
}

// Eval evaluates the JavaScript expression js in the page, awaits it if it is
// a promise, and decodes its value (JSON-serialisable) into out (nil: the
// value is dropped). A rejected promise or a thrown exception is an error.
func (p *Page) Eval(js string, out any) error {
	raw, err := chromedp.Run(p.ctx, chromedp.Evaluate[json.RawMessage](js, chromedp.EvalAwaitPromise))
	if err == nil && out != nil {
		err = json.Unmarshal(raw, out)
	}
	return p.step("evaluate "+truncate(js, 60), err)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Option changes how [Open] and [OpenPlayground] start the browser.
type Option func(*launchOptions)

type launchOptions struct{ width, height int }

// WindowSize sets the browser window's size in CSS pixels (default 1280 × 900).
func WindowSize(width, height int) Option {
	return func(o *launchOptions) { o.width, o.height = width, height }
}

// launch starts the browser of a Page: a fresh temporary profile and TMPDIR,
// everything bounded by ctx (two minutes when ctx has no deadline).
func launch(ctx context.Context, options ...Option) (*Page, error) {
	lo := launchOptions{width: 1280, height: 900}
	for _, o := range options {
		o(&lo)
	}
	exe, err := Chromium()
	if err != nil {
		return nil, err
	}
	var cancelTimeout context.CancelFunc = func() {}
	if _, ok := ctx.Deadline(); !ok {
		ctx, cancelTimeout = context.WithTimeout(ctx, defaultTimeout)
	}

	// Chromium's own temporary files (shared memory, since the default
	// options set disable-dev-shm-usage, and org.chromium.Chromium.* dirs,
	// which it leaves behind) go to a private TMPDIR, removed at the end,
	// after the browser and all its children are gone.
	tmp, err := browserTempDir()
	if err != nil {
		cancelTimeout()
		return nil, fmt.Errorf("browsertest: %w", err)
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(lo.width, lo.height),
		chromedp.Env("TMPDIR="+tmp),
		// No user-data-dir option: chromedp then makes a fresh temporary one,
		// passes it as --user-data-dir, and removes it after the browser exits.
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	browserCtx, cancelBrowser := chromedp.NewContext(allocCtx)
	p := &Page{
		ctx:  browserCtx,
		done: ctx,
		close: func() {
			cancelBrowser() // closes the browser gracefully
			cancelAlloc()   // kills Chromium if still running and waits for it
			cancelTimeout()
			os.RemoveAll(tmp)
		},
		netlog: newNetLog(),
	}
	if err := chromedp.Listen(browserCtx, p.netlog.event); err != nil {
		return p, fmt.Errorf("browsertest: start chromium: %w", err)
	}
	return p, nil
}

// Close closes the browser and removes its profile and temporary files.
func (p *Page) Close() { p.closed.Do(p.close) }

// Requested returns every URL the page requested so far, in order (see
// [RunPlaygroundQuery]).
func (p *Page) Requested() []string { return p.netlog.urls() }

// WebSockets returns the URLs of the WebSockets the page opened, in order.
func (p *Page) WebSockets() []string { return p.netlog.websockets() }

// SetQuery replaces the text of the query editor.
func (p *Page) SetQuery(query string) error {
	_, err := chromedp.Run(p.ctx, chromedp.Evaluate[chromedp.Void](
		`document.querySelector('.graphiql-query-editor .CodeMirror').CodeMirror.setValue(`+jsString(query)+`)`))
	return p.step("set the query", err)
}

// Query returns the text of the query editor (trimmed).
func (p *Page) Query() (string, error) {
	text, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](jsQueryText))
	return text, p.step("read the query", err)
}

// Tabs returns the titles of the playground's tabs, in order, and the active one's.
// GraphiQL shows no tab bar for a single tab: then both are empty.
func (p *Page) Tabs() (titles []string, active string, err error) {
	var got struct {
		Titles []string `json:"titles"`
		Active string   `json:"active"`
	}
	err = p.Eval(`({
		titles: [...document.querySelectorAll('.graphiql-tab .graphiql-tab-button')].map((b) => b.textContent.trim()),
		active: document.querySelector('.graphiql-tab-active .graphiql-tab-button')?.textContent.trim() ?? '',
	})`, &got)
	return got.Titles, got.Active, err
}

// SelectTab clicks the tab titled title and waits until it is the active one.
func (p *Page) SelectTab(title string) error {
	click := `(() => {
		const b = [...document.querySelectorAll('.graphiql-tab .graphiql-tab-button')].find((b) => b.textContent.trim() === ` + jsString(title) + `);
		if (!b) throw new Error('no tab titled ' + ` + jsString(title) + `);
		b.click();
	})()`
	if err := p.Eval(click, nil); err != nil {
		return err
	}
	if err := p.poll(`(document.querySelector('.graphiql-tab-active .graphiql-tab-button')?.textContent.trim() ?? '') === ` + jsString(title)); err != nil {
		return p.step("wait for tab "+title, err)
	}
	// GraphiQL reads the operation's name from the editor 100 ms after its text changed (a
	// debounce): run before that, a tab would send the previous tab's operation name.
	return p.step("wait for the operation name of tab "+title, p.poll(jsOperationNameCurrent))
}

// QueryOverflow returns the lines of the query editor that run past its right edge (the
// text cut off unless the reader scrolls sideways), and by how many pixels the editor's
// content is wider than its visible width (0 or less: nothing is cut off).
func (p *Page) QueryOverflow() (lines []string, excess float64, err error) {
	var got struct {
		Lines  []string `json:"lines"`
		Excess float64  `json:"excess"`
	}
	err = p.Eval(`(() => {
		const cm = document.querySelector('.graphiql-query-editor .CodeMirror').CodeMirror;
		cm.refresh();
		const edge = cm.getScrollerElement().getBoundingClientRect().left + cm.getScrollInfo().clientWidth;
		const lines = [];
		for (let i = 0; i < cm.lineCount(); i++) {
			const text = cm.getLine(i);
			if (cm.charCoords({ line: i, ch: text.length }, 'window').left > edge + 0.5) lines.push(text);
		}
		const info = cm.getScrollInfo();
		return { lines, excess: info.width - info.clientWidth };
	})()`, &got)
	return got.Lines, got.Excess, err
}

// Execute clears the response pane and clicks the execute button. For a
// subscription, the pane then shows each event as it arrives (the latest one)
// and the button stops the subscription until it ends.
func (p *Page) Execute() error {
	return p.step("click the execute button", chromedp.Do(p.ctx,
		chromedp.Evaluate[chromedp.Void](`document.querySelector('.result-window .CodeMirror').CodeMirror.setValue('')`),
		chromedp.Click(chromedp.CSS(".graphiql-execute-button")),
	))
}

// Running reports whether an operation runs (the execute button says "Stop").
func (p *Page) Running() (bool, error) {
	label, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](jsButtonLabel))
	return !strings.HasPrefix(label, "Execute"), p.step("read the execute button", err)
}

// Stop clicks the button of a running operation (it stops a subscription) and
// waits until the button offers to execute again.
func (p *Page) Stop() error {
	if err := chromedp.Do(p.ctx, chromedp.Click(chromedp.CSS(".graphiql-execute-button"))); err != nil {
		return p.step("click the stop button", err)
	}
	return p.step("wait for the operation to stop", p.poll(`(`+jsButtonLabel+`).startsWith('Execute')`))
}

// Result returns the text of the response pane.
func (p *Page) Result() (string, error) {
	text, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](jsResultText))
	return text, p.step("read the response", err)
}

// WaitDone waits until the response pane shows a response and the operation
// is over (a subscription: completed), and returns the pane's text.
func (p *Page) WaitDone() (string, error) {
	if err := p.poll(jsDone); err != nil {
		return "", p.step("wait for the response", err)
	}
	return p.Result()
}

// WaitResult waits until the text of the response pane satisfies ok, and
// returns it. The pane is read every 50 ms: a subscription's events that come
// and go faster may be missed.
func (p *Page) WaitResult(ok func(result string) bool) (string, error) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		text, err := p.Result()
		if err != nil {
			return "", err
		}
		if ok(text) {
			return text, nil
		}
		select {
		case <-p.done.Done():
			return text, p.step("wait for the response", fmt.Errorf("the pane shows %q: %w", text, p.done.Err()))
		case <-tick.C:
		}
	}
}

func (p *Page) poll(js string) error {
	_, err := chromedp.Run(p.ctx, chromedp.Poll[chromedp.Void](js,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(0)))
	return err
}

func (p *Page) step(what string, err error) error {
	if err == nil {
		return nil
	}
	if ctxErr := p.done.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
		err = fmt.Errorf("%w (%w)", err, ctxErr)
	}
	return fmt.Errorf("browsertest: %s: %w", what, err)
}

// maxTempDirLen keeps Chromium's singleton socket path,
// $TMPDIR/org.chromium.Chromium.XXXXXX/SingletonSocket, under the 107 bytes a
// Unix socket path may have; with a longer TMPDIR Chromium exits at start with
// "Socket path too long".
const maxTempDirLen = 60

// browserTempDir makes the private TMPDIR of one browser: below os.TempDir(),
// or below /tmp when that would be too long for Chromium.
func browserTempDir() (string, error) {
	dir, err := os.MkdirTemp("", "sbt-")
	if err != nil || len(dir) <= maxTempDirLen {
		return dir, err
	}
	os.Remove(dir)
	return os.MkdirTemp("/tmp", "sbt-")
}

// JavaScript run in the page. GraphiQL 3 renders CodeMirror 5 editors; the
// wrapper element of each carries its editor instance as .CodeMirror.
const (
	jsQueryText  = `(document.querySelector('.graphiql-query-editor .CodeMirror')?.CodeMirror.getValue() ?? '').trim()`
	jsResultText = `document.querySelector('.result-window .CodeMirror')?.CodeMirror.getValue() ?? ''`
	jsReady      = `!!(document.querySelector('.graphiql-query-editor .CodeMirror')?.CodeMirror &&
		document.querySelector('.result-window .CodeMirror')?.CodeMirror &&
		document.querySelector('.graphiql-execute-button'))`
	// The editor's operation name is that of its text's first operation (null for an
	// anonymous one). Documents with several operations may never satisfy it.
	jsOperationNameCurrent = `(() => {
		const cm = document.querySelector('.graphiql-query-editor .CodeMirror').CodeMirror;
		const m = /^\s*(?:query|mutation|subscription)\s+([_A-Za-z][_0-9A-Za-z]*)/m.exec(cm.getValue().replace(/#.*$/gm, ''));
		return m ? cm.operationName === m[1] : cm.operationName == null;
	})()`
	jsButtonLabel = `document.querySelector('.graphiql-execute-button')?.getAttribute('aria-label') ?? ''`
	// Done: a response is shown and the button is back to "Execute" (it says
	// "Stop" while the request runs).
	jsDone = `(` + jsResultText + `).trim() !== '' && (` + jsButtonLabel + `).startsWith('Execute')`
)

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x2028 || r == 0x2029 || r == '<':
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// netLog records the URLs the page requests, which requests are in flight,
// and the WebSockets the page opens.
type netLog struct {
	mu       sync.Mutex
	all      []string
	ws       []string
	inflight map[network.RequestID]bool
	last     time.Time
}

func newNetLog() *netLog {
	return &netLog{inflight: map[network.RequestID]bool{}, last: time.Now()}
}

// event runs on chromedp's read loop: it must be quick and must not block.
func (n *netLog) event(ev any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch ev := ev.(type) {
	case *network.EventRequestWillBeSent:
		if ev.Request == nil {
			return
		}
		n.all = append(n.all, ev.Request.URL)
		n.last = time.Now()
		if !strings.HasPrefix(ev.Request.URL, "data:") {
			n.inflight[ev.RequestID] = true
		}
	case *network.EventLoadingFinished:
		delete(n.inflight, ev.RequestID)
		n.last = time.Now()
	case *network.EventLoadingFailed:
		delete(n.inflight, ev.RequestID)
		n.last = time.Now()
	case *network.EventWebSocketCreated:
		n.ws = append(n.ws, ev.URL)
	}
}

func (n *netLog) urls() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.all...)
}

func (n *netLog) websockets() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.ws...)
}

// waitQuiet waits until no request has been in flight for quiet, giving up
// (without error) after max.
func (n *netLog) waitQuiet(ctx context.Context, quiet, max time.Duration) error {
	deadline := time.Now().Add(max)
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		n.mu.Lock()
		settled := len(n.inflight) == 0 && time.Since(n.last) >= quiet
		n.mu.Unlock()
		if settled || time.Now().After(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}
