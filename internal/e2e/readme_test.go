package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/surgekit/surge/internal/app"
)

// fencedBlocks returns the fenced code blocks of one language in a Markdown file, in order.
func fencedBlocks(t *testing.T, file, lang string) []string {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)```"+lang+"\n(.*?)```").FindAllStringSubmatch(string(raw), -1) {
		blocks = append(blocks, m[1])
	}
	return blocks
}

// placeholder is a value the reader fills in from an earlier answer: <devCode>, <orderId>.
var placeholder = regexp.MustCompile(`<([A-Za-z]+)>`)

// The README's walkthrough runs as written: every ```graphql block of the README, in order, each
// sent whole as one document (what pasting it into the playground sends), against the embedded
// default in this process (dev mode, in-process Redis, SQLite, demo data). A placeholder
// <name> takes the value of the field name in the latest answer that has one, as the reader
// copies it; once an answer holds a token, the requests carry it, as the README's header line
// says. Any error fails the test. Then the Node script of docs/schema.md, pointed at this server
// with that token, prints the voucher's stock after the grab (graphql-ws with ws on Node 20).
func TestREADMEWalkthrough(t *testing.T) {
	blocks := fencedBlocks(t, "../../README.md", "graphql")
	if len(blocks) < 4 {
		t.Fatalf("the README has %d GraphQL blocks: is the walkthrough still there?", len(blocks))
	}
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte(`{"Authorization": "Bearer <token>"}`)) {
		t.Fatal(`the README no longer tells its reader to add the header {"Authorization": "Bearer <token>"}`)
	}

	cfg, err := app.ParseConfig([]string{"-data-dir", t.TempDir()}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(context.Background(), cfg, app.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(func() { srv.Close(); a.Close() })

	var answers []map[string]any // newest last
	token := ""
	for i, block := range blocks {
		var missing []string
		doc := placeholder.ReplaceAllStringFunc(block, func(p string) string {
			name := placeholder.FindStringSubmatch(p)[1]
			for j := len(answers) - 1; j >= 0; j-- {
				if v, ok := findField(answers[j], name); ok {
					return v
				}
			}
			missing = append(missing, p)
			return p
		})
		data, failure := postAsPlayground(t, srv.URL, token, doc)
		if failure != "" || missing != nil {
			t.Fatalf("GraphQL block %d of the README fails as it stands:\n%s→ %s\n(placeholders no earlier answer fills: %v)", i+1, doc, failure, missing)
		}
		answers = append(answers, data)
		if v, ok := findField(data, "token"); ok {
			token = v
		}
	}

	// What the walkthrough says the reader sees.
	var browse, grab, order map[string]any
	for _, d := range answers {
		switch {
		case d["onSale"] != nil:
			browse = d
		case d["seckillVoucher"] != nil:
			grab = d
		case d["order"] != nil:
			order = d
		}
	}
	if token == "" || browse == nil || grab == nil || order == nil {
		t.Fatalf("the walkthrough no longer logs in, browses the vouchers on sale, grabs and reads the order: %v", answers)
	}
	if str(browse, "me", "role") != "ADMIN" {
		t.Errorf("the walkthrough's login is not the dev admin: %v", browse["me"])
	}
	var seckill map[string]any
	for _, v := range list(browse, "onSale", "edges", 0, "node", "vouchers") {
		if str(v, "kind") == "SECKILL" {
			seckill, _ = v.(map[string]any)
		}
	}
	if seckill == nil || seckill["id"] != "17179869186" || seckill["stock"] != float64(100) {
		t.Fatalf("the shops on sale show no seckill voucher 17179869186 with stock 100: %v", browse["onSale"])
	}
	if id := str(grab, "seckillVoucher", "orderId"); id == "" || str(order, "order", "id") != id || str(order, "order", "voucher", "title") == "" {
		t.Errorf("the grab %v and the order read back %v do not match", grab, order)
	}

	// docs/schema.md's script, saved under the name it gives (an ES module saved as sub.js does
	// not run) and pointed at this server: it prints the stock, 99 after the grab. Its
	// directory lies below the JS clients' node_modules, which Node finds upwards.
	js := fencedBlocks(t, "../../docs/schema.md", "js")
	if len(js) != 1 {
		t.Fatalf("docs/schema.md has %d JavaScript blocks, want its one script", len(js))
	}
	name := scriptName(t, "../../docs/schema.md")
	script := strings.NewReplacer("<token>", token, "ws://localhost:8080", "ws"+strings.TrimPrefix(srv.URL, "http")).Replace(js[0])
	dir, err := os.MkdirTemp(jsClientsDir(t), "readme-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", name)
	cmd.Dir = dir
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	line, _ := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "99" {
		t.Errorf("the script of docs/schema.md printed %q, want the stock after one grab, 99", line)
	}
}

// postAsPlayground sends one document as GraphiQL does (no operation name: a document of one
// operation needs none) and returns its data, or what failed: the status and the answer.
func postAsPlayground(t *testing.T, url, token, doc string) (map[string]any, string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": doc})
	req, _ := http.NewRequest(http.MethodPost, url+"/query", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/graphql-response+json, application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var r struct {
		Data   map[string]any `json:"data"`
		Errors []gqlError     `json:"errors"`
	}
	if err := json.Unmarshal(raw, &r); err != nil || resp.StatusCode != http.StatusOK || len(r.Errors) > 0 || r.Data == nil {
		return nil, fmt.Sprintf("%d %s", resp.StatusCode, raw)
	}
	return r.Data, ""
}

// findField returns the first string under the key name anywhere in v.
func findField(v any, name string) (string, bool) {
	switch x := v.(type) {
	case map[string]any:
		if s, ok := x[name].(string); ok {
			return s, true
		}
		for _, e := range x {
			if s, ok := findField(e, name); ok {
				return s, true
			}
		}
	case []any:
		for _, e := range x {
			if s, ok := findField(e, name); ok {
				return s, true
			}
		}
	}
	return "", false
}

// scriptName is the file name a document tells its reader to save its Node script as ("save it
// as `sub.mjs`").
func scriptName(t *testing.T, file string) string {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("save it as `([^`/]+)`").FindSubmatch(raw)
	if m == nil {
		t.Fatalf("%s does not say under which name to save its Node script", file)
	}
	return string(m[1])
}
