package e2e_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/surgekit/surge/internal/testenv"
)

// compareSchemas builds a schema with graphql-js (what client code generators use) from the SDL
// file, and another from a live server's introspection, and prints whether they print the same
// (types sorted), and the validation errors of a client document against the SDL.
//
//	node compare-schemas.mjs <sdl file> <url> <document>
const compareSchemas = `
import { buildSchema, buildClientSchema, getIntrospectionQuery, lexicographicSortSchema, parse, printSchema, validate } from 'graphql';
import { readFileSync } from 'node:fs';

const [file, url, document] = process.argv.slice(2);
const fromSDL = buildSchema(readFileSync(file, 'utf8'));
const r = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' },
  body: JSON.stringify({ query: getIntrospectionQuery({ descriptions: true }) }) });
const fromServer = buildClientSchema((await r.json()).data);
const a = printSchema(lexicographicSortSchema(fromSDL)).split('\n');
const b = printSchema(lexicographicSortSchema(fromServer)).split('\n');
const diff = [];
for (let i = 0; i < Math.max(a.length, b.length) && diff.length < 10; i++) {
  if (a[i] !== b[i]) diff.push({ line: i + 1, sdl: a[i], introspection: b[i] });
}
console.log(JSON.stringify({ lines: a.length, diff,
  errors: validate(fromSDL, parse(document)).map((e) => e.message) }));
`

// Issue 13, item 4: "surge schema" prints the SDL that introspection would give, so that client
// code generators work against a production server, which keeps introspection off.
func TestSchemaCommand(t *testing.T) {
	out, err := exec.Command(testenv.SurgeBinary(t), "schema").Output()
	if err != nil {
		t.Fatalf("surge schema: %v %s", err, exitStderr(err))
	}
	file := filepath.Join(t.TempDir(), "schema.graphql")
	if err := os.WriteFile(file, out, 0o644); err != nil {
		t.Fatal(err)
	}
	dev := startSurge(t, nil) // the embedded default: dev mode, introspection on
	var res struct {
		Lines  int
		Diff   []map[string]any
		Errors []string
	}
	const document = `mutation Grab($v: ID!) { seckillVoucher(voucherId: $v) { orderId status order { id voucher { title } } } }`
	runNode(t, compareSchemas, &res, file, dev.url+"/query", document)
	if len(res.Diff) > 0 || res.Lines < 500 {
		t.Errorf("surge schema (%d lines) and the server's introspection differ: %v", res.Lines, res.Diff)
	}
	if len(res.Errors) > 0 {
		t.Errorf("a client document against the SDL: %v", res.Errors)
	}
}
