// Package examples_test checks that the libraries' examples work when copied out of the
// repository, as a reader of their documentation would copy them.
package examples_test

import (
	"bytes"
	"context"
	"go/ast"
	"go/doc"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/testenv"
)

// The packages whose examples a reader copies: the libraries of the repository.
var libraries = []string{"cache", "idgen", "lock"}

// example is one Example function as a program of its own.
type example struct {
	name    string // cache.ExampleCache_GetOrLoad
	dir     string // its directory in the scratch module
	program *ast.File
	fset    *token.FileSet
	output  string // its // Output: comment
	checked bool   // it has one (else it is only compiled)
}

// programs turns each example of the library in dir into a main package, the way go/doc does
// for the documentation's "run" button (Example.Play): the body as main, with the imports and
// the file's declarations it uses. An example that needs anything else of the test files
// (another file's helper, an internal package) cannot be copied and has no program.
func programs(t *testing.T, root, lib string) []example {
	t.Helper()
	fset := token.NewFileSet()
	dir := filepath.Join(root, lib)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		if f.Name.Name == lib+"_test" { // the examples live in the external test package
			files = append(files, f)
		}
	}
	var out []example
	for _, ex := range doc.Examples(files...) {
		name := lib + ".Example" + ex.Name
		if ex.Name == "" {
			name = lib + ".Example"
		}
		if ex.Play == nil {
			t.Errorf("%s cannot be copied as shown: it uses something besides its own file's declarations and importable packages", name)
			continue
		}
		out = append(out, example{name: name, dir: strings.ReplaceAll(name, ".", "_"), program: ex.Play, fset: fset,
			output: strings.TrimSpace(ex.Output), checked: ex.Output != "" || ex.EmptyOutput})
	}
	if len(out) == 0 {
		t.Errorf("%s: no examples found", lib)
	}
	return out
}

// requirements is the require blocks of the go.mod in dir.
func requirements(t *testing.T, dir string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	in := false
	for _, line := range strings.Split(string(src), "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "require (":
			in = true
		case in && trimmed == ")":
			in = false
			b.WriteString(")\n")
			continue
		case !in && !strings.HasPrefix(trimmed, "require "):
			continue
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// Every example of cache, idgen and lock, and every program of the README, builds as a program
// in a module of its own outside the repository (which requires github.com/surgekit/surge,
// replaced by this checkout, at the versions of surge's go.mod), and prints what its Output
// comment (a README program: the text block after it) says when run with the addresses an
// importer sets, REDIS_ADDR and MYSQL_DSN, and none of the test suite's SURGE_TEST_*. Each
// address is a proxy that counts connections, so an example that talks to Redis or a database
// is seen to use the address it was given rather than one written into it. What a run leaves in
// Redis is checked after each program: every key under "example:" and with a TTL. A program
// that builds a UniversalClient runs once more against a Redis Cluster (a private one-node
// cluster: multi-key calls across slots fail there as on any cluster).
func TestExamplesBuildAndRunOutsideTheRepository(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	scratch := t.TempDir()
	var all []example
	for _, lib := range libraries {
		all = append(all, programs(t, root, lib)...)
	}
	all = append(all, readmePrograms(t, root)...)
	for _, ex := range all {
		var b bytes.Buffer
		if err := format.Node(&b, ex.fset, ex.program); err != nil {
			t.Fatalf("%s: %v", ex.name, err)
		}
		if err := os.MkdirAll(filepath.Join(scratch, ex.dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(scratch, ex.dir, "main.go"), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// surge's own requirements, pinned: go adds nothing at "latest" (which the module proxy
	// here refuses), and fetches only exact versions that the module cache may not hold yet.
	mod := "module example.test/copied\n\ngo 1.26\n\nrequire github.com/surgekit/surge v0.0.0\n\n" + requirements(t, root) +
		"\nreplace github.com/surgekit/surge => " + strconv.Quote(root) + "\n"
	if err := os.WriteFile(filepath.Join(scratch, "go.mod"), []byte(mod), 0o644); err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(scratch, "go.sum"), sum, 0o644); err != nil {
		t.Fatal(err)
	}

	// -mod=mod lets go complete go.sum for the programs' imports (go-redis, the MySQL driver)
	// at the versions surge's go.mod gives.
	bin := filepath.Join(scratch, "bin")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, testenv.GoCommand(), "build", "-o", bin+string(filepath.Separator), "./...")
	build.Dir = scratch
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod -buildvcs=false", "GOWORK=off", "GOSUMDB=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("the examples do not build outside the repository: %v\n%s", err, out)
	}

	// The services, each behind a counting proxy: a private Redis (whose every key the checks
	// below may read as the examples') and a fresh database; a private one-node cluster.
	single := testenv.StartRedis(t)
	redisProxy := testenv.NewProxy(t, single.Addr)
	cfg, err := mysql.ParseDSN(testenv.MySQL(t))
	if err != nil {
		t.Fatal(err)
	}
	mysqlProxy := testenv.NewProxy(t, cfg.Addr)
	cfg.Addr = mysqlProxy.Addr
	cluster := privateCluster(t)
	var env []string
	for _, kv := range os.Environ() { // an example that reads the suite's variables finds none
		if !strings.HasPrefix(kv, "SURGE_TEST_") && !strings.HasPrefix(kv, "REDIS_ADDR=") && !strings.HasPrefix(kv, "MYSQL_DSN=") {
			env = append(env, kv)
		}
	}
	env = append(env, "MYSQL_DSN="+cfg.FormatDSN())

	for _, ex := range all {
		t.Run(ex.name, func(t *testing.T) {
			if !ex.checked {
				// Like go test, which compiles an example without an Output comment and never
				// runs it: such examples show a deployment's set-up (Sentinel addresses) that
				// this machine has not. Built above, with every other one.
				t.Skip("no // Output: the example is compiled, not run")
			}
			before, beforeSQL := redisProxy.Accepted(), mysqlProxy.Accepted()
			run(t, bin, ex, append(env, "REDIS_ADDR="+redisProxy.Addr))
			imports := importPaths(ex.program)
			if slices.Contains(imports, "github.com/redis/go-redis/v9") && redisProxy.Accepted() == before {
				t.Errorf("it uses Redis but not through REDIS_ADDR")
			}
			if slices.Contains(imports, "database/sql") && mysqlProxy.Accepted() == beforeSQL {
				t.Errorf("it uses a database but not through MYSQL_DSN")
			}
			checkLeftKeys(t, single.Addr)
			if usesUniversalClient(ex.program) {
				run(t, bin, ex, append(env, "REDIS_ADDR="+cluster))
				checkLeftKeys(t, cluster)
			}
		})
	}
}

// run runs the example's program with env and compares what it prints with its Output.
func run(t *testing.T, bin string, ex example, env []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, filepath.Base(ex.dir)))
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("run: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}
	if got := strings.TrimSpace(string(out)); ex.checked && got != ex.output {
		t.Errorf("printed\n%s\nwant (its Output comment)\n%s", got, ex.output)
	}
}

// checkLeftKeys fails the test for any key of the Redis at addr that is not under "example:"
// or has no TTL: an example leaves nothing behind for good, and nothing outside its namespace.
func checkLeftKeys(t *testing.T, addr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	it := rdb.Scan(ctx, 0, "*", 1000).Iterator()
	for it.Next(ctx) {
		key := it.Val()
		ttl, err := rdb.PTTL(ctx, key).Result()
		switch {
		case err != nil:
			t.Fatal(err)
		case !strings.HasPrefix(key, "example:"):
			t.Errorf("it left the key %q, outside the example namespace", key)
		case ttl == -1:
			t.Errorf("it left the key %q without a TTL", key)
		default:
			continue
		}
		rdb.Del(ctx, key) // so that the next example is not blamed for it
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
}

// privateCluster starts a Redis Cluster of one node (every slot on it) and returns its address.
func privateCluster(t *testing.T) string {
	t.Helper()
	node := testenv.StartRedis(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
	rdb := redis.NewClient(&redis.Options{Addr: node.Addr})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rdb.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err(); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(rdb.ClusterInfo(ctx).Val(), "cluster_state:ok") {
		if ctx.Err() != nil {
			t.Fatal("the private cluster did not reach cluster_state:ok")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return node.Addr
}

// usesUniversalClient reports whether the program builds a redis.UniversalClient, which a
// comma-separated REDIS_ADDR turns into a Cluster client.
func usesUniversalClient(f *ast.File) bool {
	found := false
	ast.Inspect(f, func(n ast.Node) bool {
		if s, ok := n.(*ast.SelectorExpr); ok && s.Sel.Name == "NewUniversalClient" {
			found = true
		}
		return !found
	})
	return found
}

// importPaths lists the imports of a program (go/doc's synthesized file has them in its
// declarations only, not in File.Imports).
func importPaths(f *ast.File) []string {
	var paths []string
	ast.Inspect(f, func(n ast.Node) bool {
		if s, ok := n.(*ast.ImportSpec); ok {
			if p, err := strconv.Unquote(s.Path.Value); err == nil {
				paths = append(paths, p)
			}
		}
		return true
	})
	return paths
}
