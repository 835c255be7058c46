// Package browsertest drives a headless Chromium for end-to-end tests of the
// GraphiQL playground (package internal/playground).
//
// It needs a Chromium binary; scripts/ensure-chromium.sh installs one from
// Debian's packages (apt-get install chromium).
package browsertest

import (
	"context"
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
func Chromium() (string, error) {
	const debian = "/usr/bin/chromium"
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
	exe, err := Chromium()
	if err != nil {
		return "", nil, err
	}
	target, err := url.Parse(pageURL)
	if err != nil {
		return "", nil, fmt.Errorf("browsertest: page URL: %w", err)
	}
	params := target.Query()
	params.Set("query", query)
	target.RawQuery = params.Encode()

	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultTimeout)
		defer cancel()
	}

	// Chromium's own temporary files (shared memory, since the default
	// options set disable-dev-shm-usage, and org.chromium.Chromium.* dirs,
	// which it leaves behind) go to a private TMPDIR, removed at the end,
	// after the browser and all its children are gone.
	tmp, err := browserTempDir()
	if err != nil {
		return "", nil, fmt.Errorf("browsertest: %w", err)
	}
	defer os.RemoveAll(tmp)

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
		chromedp.WindowSize(1280, 900),
		chromedp.Env("TMPDIR="+tmp),
		// No user-data-dir option: chromedp then makes a fresh temporary one,
		// passes it as --user-data-dir, and removes it after the browser exits.
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc() // kills Chromium if still running and waits for it
	browserCtx, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser() // closes the browser gracefully; runs before cancelAlloc

	netlog := newNetLog()
	defer func() { requested = netlog.urls() }()
	if err := chromedp.Listen(browserCtx, netlog.event); err != nil {
		return "", nil, fmt.Errorf("browsertest: start chromium: %w", err)
	}

	step := func(what string, err error) error {
		if err == nil {
			return nil
		}
		if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
			err = fmt.Errorf("%w (%w)", err, ctxErr)
		}
		return fmt.Errorf("browsertest: %s: %w", what, err)
	}
	poll := func(js string) error {
		_, err := chromedp.Run(browserCtx, chromedp.Poll[chromedp.Void](js,
			chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(0)))
		return err
	}

	if err := chromedp.Do(browserCtx, chromedp.Navigate(target.String())); err != nil {
		return "", nil, step("open "+target.String(), err)
	}
	if err := poll(jsReady); err != nil {
		return "", nil, step("wait for GraphiQL", err)
	}

	// The URL parameter must have reached the query editor.
	want := strings.TrimSpace(query)
	waitCtx, cancelWait := context.WithTimeout(browserCtx, 5*time.Second)
	_, err = chromedp.Run(waitCtx, chromedp.Poll[chromedp.Void](
		fmt.Sprintf(`(%s) === %s`, jsQueryText, jsString(want)),
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(0)))
	cancelWait()
	if err != nil {
		got, _ := chromedp.Run(browserCtx, chromedp.Evaluate[string](jsQueryText))
		return "", nil, step("query editor", fmt.Errorf("shows %q, want %q from the query parameter: %w", got, want, err))
	}

	// Let the schema fetch settle, so that its outcome cannot land in the
	// response pane after the click.
	if err := netlog.waitQuiet(ctx, networkQuiet, networkQuietMax); err != nil {
		return "", nil, step("wait for the network to settle", err)
	}

	if err := chromedp.Do(browserCtx,
		chromedp.Evaluate[chromedp.Void](`document.querySelector('.result-window .CodeMirror').CodeMirror.setValue('')`),
		chromedp.Click(chromedp.CSS(".graphiql-execute-button")),
	); err != nil {
		return "", nil, step("click the execute button", err)
	}
	if err := poll(jsDone); err != nil {
		return "", nil, step("wait for the response", err)
	}
	result, err = chromedp.Run(browserCtx, chromedp.Evaluate[string](jsResultText))
	if err != nil {
		return "", nil, step("read the response", err)
	}
	return result, nil, nil
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
	// Done: a response is shown and the button is back to "Execute" (it says
	// "Stop" while the request runs).
	jsDone = `(` + jsResultText + `).trim() !== '' &&
		(document.querySelector('.graphiql-execute-button')?.getAttribute('aria-label') ?? '').startsWith('Execute')`
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

// netLog records the URLs the page requests and which requests are in flight.
type netLog struct {
	mu       sync.Mutex
	all      []string
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
	}
}

func (n *netLog) urls() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.all...)
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
