package examples_test

import (
	"bytes"
	"fmt"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readmeGoBlocks returns the README's ```go blocks.
func readmeGoBlocks(t *testing.T, root string) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(raw), -1) {
		blocks = append(blocks, m[1])
	}
	return blocks
}

// outputComment is what a program's "// Output:" comment, at the end of its main, says it prints.
var outputComment = regexp.MustCompile(`(?m)^\s*// Output:\n((?:\s*//.*\n)+)`)

// readmePrograms returns the README's Go programs (the ```go blocks that are a package main) as
// examples: TestExamplesBuildAndRunOutsideTheRepository builds and runs them like the
// libraries' examples, and compares what they print with their "// Output:" comment.
func readmePrograms(t *testing.T, root string) []example {
	t.Helper()
	var out []example
	for i, b := range readmeGoBlocks(t, root) {
		if !strings.HasPrefix(b, "package main") {
			continue
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, "main.go", b, parser.ParseComments)
		if err != nil {
			t.Fatalf("the README's Go program %d does not parse: %v", i+1, err)
		}
		var want []string
		if m := outputComment.FindStringSubmatch(b); m != nil {
			for _, l := range strings.Split(strings.TrimSpace(m[1]), "\n") {
				want = append(want, strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(l), "//"), " "))
			}
		} else {
			t.Errorf("the README's Go program %d does not say what it prints (an // Output: comment)", i+1)
		}
		name := fmt.Sprintf("README.program%d", i+1)
		out = append(out, example{name: name, dir: strings.ReplaceAll(name, ".", "_"), program: f, fset: fset,
			output: strings.Join(want, "\n"), checked: want != nil})
	}
	if len(out) == 0 {
		t.Error("the README has no Go program (a ```go block that is a package main)")
	}
	return out
}

// The README's Go snippets that are not whole programs are excerpts of the libraries'
// examples: each of their lines appears, in the same order, in one example's program, which
// TestExamplesBuildAndRunOutsideTheRepository builds and runs. So a snippet cannot drift from
// code that runs.
func TestREADMESnippetsAreExcerptsOfExamples(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	var sources [][]string
	for _, lib := range libraries {
		for _, ex := range programs(t, root, lib) {
			var b bytes.Buffer
			if err := format.Node(&b, ex.fset, ex.program); err != nil {
				t.Fatal(err)
			}
			sources = append(sources, trimmedLines(b.String()))
		}
	}
	excerpts := 0
	for _, b := range readmeGoBlocks(t, root) {
		if strings.HasPrefix(b, "package main") {
			continue
		}
		excerpts++
		lines := trimmedLines(b)
		found := false
		for _, src := range sources {
			if isSubsequence(lines, src) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("this README snippet is not an excerpt of any example of %v (its lines, in order, in one example):\n%s", libraries, b)
		}
	}
	if excerpts == 0 {
		t.Error("the README shows no excerpt of the libraries' examples")
	}
}

// trimmedLines is the non-blank lines of s, without their indentation.
func trimmedLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

func isSubsequence(sub, of []string) bool {
	i := 0
	for _, l := range of {
		if i < len(sub) && l == sub[i] {
			i++
		}
	}
	return i == len(sub)
}
