package app

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// maxConfigRow bounds a row of the configuration table: a row says what a setting does, its
// details go in the sections below the table.
const maxConfigRow = 220

// Every setting of `surge serve -h` has its row in docs/configuration.md, under its variable and
// its flag, and every row is a setting the server has; no row runs on past maxConfigRow.
func TestConfigurationTableListsEverySetting(t *testing.T) {
	raw, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{} // variable → row
	for _, line := range strings.Split(string(raw), "\n") {
		if m := regexp.MustCompile("^\\| `(SURGE_[A-Z0-9_]+)` \\|").FindStringSubmatch(line); m != nil {
			rows[m[1]] = line
			if n := len([]rune(line)); n > maxConfigRow {
				t.Errorf("the row of %s is %d characters long (at most %d): move the details below the table", m[1], n, maxConfigRow)
			}
		}
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	ConfigFlags(fs, func(string) string { return "" })
	fs.VisitAll(func(f *flag.Flag) {
		env := "SURGE_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		row, ok := rows[env]
		switch {
		case !ok:
			t.Errorf("-%s (%s) has no row in docs/configuration.md", f.Name, env)
		case !strings.Contains(row, "`-"+f.Name+"`"):
			t.Errorf("the row of %s does not name its flag -%s", env, f.Name)
		}
		delete(rows, env)
	})
	for env := range rows {
		t.Errorf("docs/configuration.md has a row for %s, which surge serve does not take", env)
	}
}

// Every relative link of the README and docs/ names a file that exists and, with a #fragment,
// a heading of that file (GitHub's anchors: lower case, punctuation dropped, spaces to hyphens).
func TestDocumentationLinksResolve(t *testing.T) {
	root := filepath.Join("..", "..")
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"README.md", "CHANGELOG.md", "CONTRIBUTING.md"} {
		files = append(files, filepath.Join(root, name))
	}
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	checked := 0
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(stripCode(string(raw)), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			path, fragment, _ := strings.Cut(target, "#")
			dest := file
			if path != "" {
				dest = filepath.Join(filepath.Dir(file), path)
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s links to %s, which does not exist", rel(root, file), target)
					continue
				}
			}
			if fragment != "" && strings.HasSuffix(dest, ".md") && !hasAnchor(t, dest, fragment) {
				t.Errorf("%s links to %s: %s has no heading with that anchor", rel(root, file), target, rel(root, dest))
			}
		}
	}
	if checked < 20 {
		t.Errorf("only %d relative links found: is the link pattern still right?", checked)
	}
}

// stripCode drops fenced code blocks, whose brackets are not links.
func stripCode(s string) string {
	return regexp.MustCompile("(?s)```.*?```").ReplaceAllString(s, "")
}

func hasAnchor(t *testing.T, file, fragment string) bool {
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(stripCode(string(raw)), "\n") {
		if title, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " "); ok && strings.HasPrefix(line, "#") && anchor(title) == fragment {
			return true
		}
	}
	return false
}

// anchor is GitHub's anchor of a heading.
func anchor(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(title)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func rel(root, file string) string {
	if r, err := filepath.Rel(root, file); err == nil {
		return r
	}
	return file
}
