// Package commalist reads comma-separated settings ("a:1, b:2,,c:3"): addresses, phones,
// ids. One parser, so that every flag and variable of the project trims and skips alike.
package commalist

import "strings"

// Split returns the non-empty, trimmed items of s; nil when there is none.
func Split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
