package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
	"github.com/vektah/gqlparser/v2/validator"
	"github.com/vektah/gqlparser/v2/validator/rules"

	gql "github.com/surgekit/surge/graph"
)

var testSchema = gql.NewExecutableSchema(gql.Config{}).Schema()

// validationMessages validates src with rules and returns the errors' messages.
func validationMessages(t *testing.T, src string, r *rules.Rules) []string {
	t.Helper()
	doc, err := parser.ParseQuery(&ast.Source{Input: src})
	if err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	var msgs []string
	for _, e := range validator.ValidateWithRules(testSchema, doc, r) {
		msgs = append(msgs, e.Message)
	}
	return msgs
}

func TestScanDocumentRefusesLongNames(t *testing.T) {
	l := DocumentLimits{MaxTokens: 2000, MaxNesting: 32, MaxNameBytes: 10}
	long := "n2345678901" // 11 bytes
	for _, src := range []string{
		`{ ` + long + ` }`,                                           // field
		`{ ` + long + `: shops { totalCount } }`,                     // alias
		`{ shops(` + long + `: 1) { totalCount } }`,                  // argument
		`{ shops(where: {` + long + `: "a"}) { totalCount } }`,       // input field
		`{ shops(orderBy: [{field: ` + long + `}]) { totalCount } }`, // enum value
		`{ __typename } fragment F on ` + long + ` { id }`,           // type condition
		`query Q($` + long + `: Int) { __typename }`,                 // variable
		`query ` + long + ` { __typename }`,                          // operation
		`{ __typename @` + long + ` }`,                               // directive
	} {
		err := scanDocument(src, l)
		if err == nil || err.Extensions["code"] != CodeDocumentTooLarge || !strings.Contains(err.Message, "name longer than 10 bytes") {
			t.Errorf("%s: %v, want DOCUMENT_TOO_LARGE for an 11-byte name", src, err)
		}
	}
	for _, src := range []string{
		`{ n234567890 }`, // 10 bytes
		`{ shop(id: "` + strings.Repeat("x", 100) + `") { id } }`,
		`{ shop(id: """` + strings.Repeat("x", 100) + `""") { id } }`,
		"{ __typename } # " + strings.Repeat("x", 100),
		`{ shops(first: 1234567890123) { totalCount } }`, // numbers are no names
	} {
		if err := scanDocument(src, l); err != nil {
			t.Errorf("%s: %v, want it accepted", src, err)
		}
	}
}

// typos are validation errors for which gqlparser gives a "did you mean" hint.
var typos = []string{
	`{ shopz { id } }`,                                      // field
	`{ shops(firs: 1) { totalCount } }`,                     // argument
	`{ __typename @skip(iff: true) }`,                       // directive argument
	`{ shops(where: {nam: "x"}) { totalCount } }`,           // input field
	`{ shops(orderBy: [{field: SCOR}]) { totalCount } }`,    // enum value
	`{ shops(orderBy: [{field: "SCORE"}]) { totalCount } }`, // a string for an enum
	`{ __typename } fragment F on Shopp { id }`,             // fragment type
	`{ shops { totalCount } shopTypes }`,                    // a selection missing
	`{ node(id: "1") { name } }`,                            // a field of some implementations
}

// With suggestions on, this server's hints are gqlparser's own: same wording, same names.
func TestHintsAreGqlparsers(t *testing.T) {
	for _, src := range typos {
		want := validationMessages(t, src, rules.NewDefaultRules())
		got := validationMessages(t, src, validationRules(testSchema, true, true)())
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s:\n got %q\nwant %q", src, got, want)
		}
		if !strings.Contains(fmt.Sprint(got), "Did you mean") {
			t.Errorf("%s: no hint: %q", src, got)
		}
	}
}

func TestHintsAreBounded(t *testing.T) {
	// Suggestions off: no rule hints (nor computes a hint).
	for _, src := range typos {
		if got := validationMessages(t, src, validationRules(testSchema, false, false)()); strings.Contains(fmt.Sprint(got), "Did you mean") {
			t.Errorf("%s: a hint with suggestions off: %q", src, got)
		}
	}
	// Suggestions on: at most maxHints hints per document, every error still reported.
	var fields []string
	for i := range 3 * maxHints {
		fields = append(fields, fmt.Sprintf(`nam%d: "x"`, i)) // each one hint: "name"
	}
	msgs := validationMessages(t, "{ shops(where: {"+strings.Join(fields, " ")+"}) { totalCount } }", validationRules(testSchema, false, true)())
	hinted := 0
	for _, m := range msgs {
		if strings.Contains(m, "Did you mean") {
			hinted++
		}
	}
	if len(msgs) != 3*maxHints || hinted != maxHints {
		t.Fatalf("%d unknown input fields: %d errors, %d with a hint; want %d errors, %d hints", 3*maxHints, len(msgs), hinted, 3*maxHints, maxHints)
	}
	// A string given for an enum, too long to be near any value, gets no hint (and costs no
	// comparison with each value).
	long := `{ shops(orderBy: [{field: "` + strings.Repeat("S", 1<<16) + `"}]) { totalCount } }`
	if got := validationMessages(t, long, validationRules(testSchema, false, true)()); len(got) != 1 || strings.Contains(got[0], "Did you mean") {
		t.Fatalf("a 64 KiB string for an enum: %.200q", got)
	}
}
