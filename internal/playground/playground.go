// Package playground serves a GraphiQL playground whose assets are embedded in
// the binary, so it works with no internet access: no CDN, no web fonts, no
// external URL is loaded at runtime (fonts are inlined as data: URLs).
//
// The page is served at "/" (and "/index.html"), the assets under
// [AssetPrefix]. The page references its assets by relative URLs, so it also
// works below a prefix when mounted with http.StripPrefix, as long as the page
// URL ends in "/" (e.g. "/ui/" with http.StripPrefix("/ui", h)).
//
// On a first visit the page opens on the README's walkthrough, one tab per
// step: DemoData (the shop types, shops and their vouchers with the seckill
// stock), SendLoginCode, Login, Grab, MyOrders, and the OrderStatus and
// VoucherStock subscriptions; their comment lines fit the query editor of a
// 1 400 px window. After a login run in the page, every operation without an
// Authorization header of its own carries that login's token (a logout, or a
// reload, forgets it). GraphiQL keeps the tabs in localStorage: a later visit
// shows them as left.
//
// The URL parameters "query", "variables" and "headers" open a tab of their
// own, the first one (before the walkthrough's on a first visit). The page
// shows the request headers editor (for {"Authorization": "Bearer <token>"}),
// and posts queries and mutations as JSON to the endpoint given to [Handler]. Subscriptions run over a WebSocket
// to the same endpoint (ws:// for an http:// endpoint, wss:// for https://)
// with the bundled graphql-ws client (protocol graphql-transport-ws), through
// GraphiQL's createGraphiQLFetcher: the headers editor's contents become the
// connection_init payload, so {"Authorization": "Bearer <token>"} authenticates
// the connection. The result pane shows the latest event; the run button
// stops the subscription.
//
// # Regenerating dist
//
// The embedded files in dist/ are built from the npm project in web/ (GraphiQL
// 3, React 18, graphql-ws 6, bundled with esbuild) and committed. After changing web/ or
// bumping a version in web/package.json, rebuild and commit dist/:
//
//	cd internal/playground/web && npm ci && npm run build
//
// (use "npm install" instead of "npm ci" when package.json changed, to update
// package-lock.json). The build writes dist/index.html, an html/template whose
// {{.}} receives the JSON config, and content-hashed dist/assets/app-*.js and
// app-*.css.
package playground

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"
)

// AssetPrefix is the URL path prefix under which [Handler] serves the
// JavaScript and CSS of the playground.
const AssetPrefix = "/playground/assets/"

// DefaultEndpoint is the endpoint used when [Handler] gets an empty one.
const DefaultEndpoint = "/query"

//go:embed dist
var dist embed.FS

var pageTemplate = template.Must(template.ParseFS(dist, "dist/index.html"))

// config is rendered as JSON into the page's <script type="application/json">
// block; html/template escapes it for that context.
type config struct {
	Endpoint string `json:"endpoint"`
}

// Handler returns an http.Handler serving the playground page at "/" and
// "/index.html", and its embedded assets under [AssetPrefix]. Queries are
// POSTed as JSON to endpoint, which may be a path ("/query") or an absolute
// http(s) URL; an empty endpoint means [DefaultEndpoint]. Other paths get 404,
// methods other than GET and HEAD get 405.
func Handler(endpoint string) http.Handler {
	if endpoint == "" {
		endpoint = DefaultEndpoint
	}
	var page bytes.Buffer
	if err := pageTemplate.Execute(&page, config{Endpoint: endpoint}); err != nil {
		// The template is embedded and tested; this cannot fail at runtime.
		panic(fmt.Sprintf("playground: render page: %v", err))
	}
	return &handler{
		page: page.Bytes(),
		csp:  contentSecurityPolicy(endpoint),
	}
}

type handler struct {
	page []byte
	csp  string
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	switch p := r.URL.Path; {
	case p == "/" || p == "/index.html":
		hd := w.Header()
		hd.Set("Content-Type", "text/html; charset=utf-8")
		hd.Set("Cache-Control", "no-cache")
		hd.Set("Content-Security-Policy", h.csp)
		hd.Set("Referrer-Policy", "same-origin")
		http.ServeContent(w, r, "index.html", time.Time{}, bytes.NewReader(h.page))
	case strings.HasPrefix(p, AssetPrefix):
		a := lookupAsset(strings.TrimPrefix(p, AssetPrefix))
		if a == nil {
			http.NotFound(w, r)
			return
		}
		a.serve(w, r)
	default:
		http.NotFound(w, r)
	}
}

// contentSecurityPolicy allows the page to load only its own assets and to
// talk only to its own origin and to the endpoint's origin, over HTTP and
// WebSocket ('self' covers ws:// and wss:// of the page's own host).
func contentSecurityPolicy(endpoint string) string {
	connect := "'self'"
	if u, err := url.Parse(endpoint); err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
		ws := "ws"
		if u.Scheme == "https" {
			ws = "wss"
		}
		connect += " " + u.Scheme + "://" + u.Host + " " + ws + "://" + u.Host
	}
	return strings.Join([]string{
		"default-src 'none'",
		"script-src 'self'",
		"style-src 'self' 'unsafe-inline'",
		"img-src 'self' data:",
		"font-src 'self' data:",
		"connect-src " + connect,
		"base-uri 'none'",
		"form-action 'none'",
	}, "; ")
}

// asset is one embedded file under dist/assets.
type asset struct {
	name        string
	contentType string
	etag        string
	data        []byte

	gzOnce sync.Once
	gz     []byte // nil when gzip does not pay off
}

var (
	assetsOnce sync.Once
	assets     map[string]*asset
)

func lookupAsset(name string) *asset {
	assetsOnce.Do(loadAssets)
	return assets[name]
}

func loadAssets() {
	assets = map[string]*asset{}
	entries, err := fs.ReadDir(dist, "dist/assets")
	if err != nil {
		panic(fmt.Sprintf("playground: embedded dist/assets missing: %v", err))
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		data, err := dist.ReadFile("dist/assets/" + e.Name())
		if err != nil {
			panic(fmt.Sprintf("playground: read embedded %s: %v", e.Name(), err))
		}
		sum := sha256.Sum256(data)
		assets[e.Name()] = &asset{
			name:        e.Name(),
			contentType: contentType(e.Name()),
			etag:        `"` + hex.EncodeToString(sum[:12]) + `"`,
			data:        data,
		}
	}
}

// contentTypes pins the types of the files the build emits, so that they do
// not depend on the host's mime.types.
var contentTypes = map[string]string{
	".js":    "text/javascript; charset=utf-8",
	".css":   "text/css; charset=utf-8",
	".html":  "text/html; charset=utf-8",
	".json":  "application/json",
	".map":   "application/json",
	".txt":   "text/plain; charset=utf-8",
	".svg":   "image/svg+xml",
	".png":   "image/png",
	".woff2": "font/woff2",
	".woff":  "font/woff",
}

func contentType(name string) string {
	ext := strings.ToLower(path.Ext(name))
	if ct, ok := contentTypes[ext]; ok {
		return ct
	}
	if ct := mime.TypeByExtension(ext); ct != "" {
		return ct
	}
	return "application/octet-stream"
}

func (a *asset) compressible() bool {
	ct := a.contentType
	return strings.HasPrefix(ct, "text/") || strings.HasPrefix(ct, "application/json") || strings.HasPrefix(ct, "image/svg")
}

// gzipped returns the gzip encoding of the asset, computed once, or nil.
func (a *asset) gzipped() []byte {
	a.gzOnce.Do(func() {
		if !a.compressible() || len(a.data) < 1024 {
			return
		}
		var b bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
		zw.Write(a.data) // writes to a bytes.Buffer cannot fail
		zw.Close()
		if b.Len() < len(a.data) {
			a.gz = b.Bytes()
		}
	})
	return a.gz
}

func (a *asset) serve(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Type", a.contentType)
	// File names carry a content hash, so a URL never changes its content.
	hd.Set("Cache-Control", "public, max-age=31536000, immutable")
	body, etag := a.data, a.etag
	if a.compressible() {
		hd.Add("Vary", "Accept-Encoding")
		if gz := a.gzipped(); gz != nil && acceptsGzip(r) {
			hd.Set("Content-Encoding", "gzip")
			body, etag = gz, strings.TrimSuffix(a.etag, `"`)+`-gz"`
		}
	}
	hd.Set("ETag", etag)
	http.ServeContent(w, r, a.name, time.Time{}, bytes.NewReader(body))
}

func acceptsGzip(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept-Encoding") {
		for part := range strings.SplitSeq(v, ",") {
			coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			if !strings.EqualFold(strings.TrimSpace(coding), "gzip") {
				continue
			}
			q := strings.ReplaceAll(strings.TrimSpace(params), " ", "")
			return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
		}
	}
	return false
}
