package server

import (
	"context"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"
)

// CodeDocumentTooLarge is the code of a document or of variables over the size limits (HTTP
// 400 with application/graphql-response+json; nothing parsed, validated or executed).
const CodeDocumentTooLarge = "DOCUMENT_TOO_LARGE"

func init() { errcode.RegisterErrorType(CodeDocumentTooLarge, errcode.KindProtocol) }

// DocumentLimits bound what a request may make the server parse and validate. gqlparser's
// validation costs grow with the square of some shapes (nested input values, fields sharing a
// response name, fragments spread side by side), so the bounds are checked before it runs,
// the way graphql-js's maxTokens is.
type DocumentLimits struct {
	// MaxTokens bounds the lexical tokens of a document (punctuation, names, values) and the
	// JSON values of its variables and extensions.
	MaxTokens int
	// MaxNesting bounds the nesting of braces, brackets and parentheses in a document, and of
	// objects and arrays in its variables and extensions.
	MaxNesting int
	// MaxFields bounds the field selections of a document's operations, a fragment counted
	// wherever it is spread (and once if it is spread nowhere).
	MaxFields int
	// MaxNameBytes bounds each name of a document (field, alias, argument, type, enum value,
	// variable, fragment, directive). Validation compares an unknown name with the schema's
	// names (edit distance, for "did you mean" hints), at a cost that grows with its length;
	// no schema name comes near this bound.
	MaxNameBytes int
}

func (l *DocumentLimits) setDefaults() {
	if l.MaxTokens <= 0 {
		l.MaxTokens = 2000
	}
	if l.MaxNesting <= 0 {
		l.MaxNesting = 32
	}
	if l.MaxFields <= 0 {
		l.MaxFields = 500
	}
	if l.MaxNameBytes <= 0 {
		l.MaxNameBytes = 256
	}
}

func tooLarge(format string, args ...any) *gqlerror.Error {
	err := gqlerror.Errorf(format, args...)
	errcode.Set(err, CodeDocumentTooLarge)
	return err
}

// documentLimits applies DocumentLimits to every operation, over HTTP and WebSocket alike,
// before gqlgen parses the document. A document already in the executor's query cache passed
// them when it was first seen; only its variables are checked again.
type documentLimits struct {
	DocumentLimits
	accepted graphql.Cache[*ast.QueryDocument]
}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationParameterMutator
} = documentLimits{}

func (documentLimits) ExtensionName() string                          { return "DocumentLimits" }
func (documentLimits) Validate(schema graphql.ExecutableSchema) error { return nil }

func (d documentLimits) MutateOperationParameters(ctx context.Context, p *graphql.RawParams) *gqlerror.Error {
	if err := d.checkJSON("variables", p.Variables); err != nil {
		return err
	}
	if err := d.checkJSON("extensions", p.Extensions); err != nil {
		return err
	}
	if _, ok := d.accepted.Get(ctx, p.Query); ok {
		return nil
	}
	if err := scanDocument(p.Query, d.DocumentLimits); err != nil {
		return err
	}
	// Bounded in tokens and nesting, the parse is cheap; a syntax error is left to the
	// executor's own parse, which reports it.
	doc, err := parser.ParseQuery(&ast.Source{Input: p.Query})
	if err != nil {
		return nil
	}
	if n := countFields(doc, d.MaxFields); n > d.MaxFields {
		return tooLarge("the document selects more than %d fields (fragments counted where spread)", d.MaxFields)
	}
	return nil
}

// checkJSON bounds decoded JSON (variables, extensions) in values and nesting.
func (d documentLimits) checkJSON(what string, m map[string]any) *gqlerror.Error {
	budget := d.MaxTokens
	if !withinJSON(m, d.MaxNesting, &budget) {
		return tooLarge("%s exceed %d values or %d levels of nesting", what, d.MaxTokens, d.MaxNesting)
	}
	return nil
}

// withinJSON walks v, spending one unit of budget per value; it stops as soon as the budget
// or the nesting runs out.
func withinJSON(v any, depth int, budget *int) bool {
	if *budget--; *budget < 0 {
		return false
	}
	switch v := v.(type) {
	case map[string]any:
		if depth--; depth < 0 {
			return false
		}
		for _, e := range v {
			if !withinJSON(e, depth, budget) {
				return false
			}
		}
	case []any:
		if depth--; depth < 0 {
			return false
		}
		for _, e := range v {
			if !withinJSON(e, depth, budget) {
				return false
			}
		}
	}
	return true
}

// countFields counts the field selections of every operation of doc, a fragment's fields
// wherever it is spread (inline fragments and spreads count one each), plus those of
// fragments no operation spreads (validation walks them too). Counts per fragment are
// memoized, so fragments spreading each other cost linear time, and saturate just past limit,
// so fragments that double each other cannot overflow. A cycle (refused by validation later)
// counts once.
func countFields(doc *ast.QueryDocument, limit int) int {
	c := fieldCounter{ceiling: limit + 1, defs: map[string]*ast.FragmentDefinition{}, memo: map[string]int{}, visiting: map[string]bool{}}
	for _, f := range doc.Fragments {
		c.defs[f.Name] = f
	}
	total := 0
	for _, op := range doc.Operations {
		total = c.add(total, c.set(op.SelectionSet))
	}
	for _, f := range doc.Fragments {
		if _, spread := c.memo[f.Name]; !spread {
			total = c.add(total, c.fragment(f.Name))
		}
	}
	return total
}

type fieldCounter struct {
	ceiling  int
	defs     map[string]*ast.FragmentDefinition
	memo     map[string]int
	visiting map[string]bool
}

func (c *fieldCounter) add(a, b int) int { return min(a+b, c.ceiling) }

func (c *fieldCounter) set(set ast.SelectionSet) int {
	n := 0
	for _, sel := range set {
		n = c.add(n, 1)
		switch s := sel.(type) {
		case *ast.Field:
			n = c.add(n, c.set(s.SelectionSet))
		case *ast.InlineFragment:
			n = c.add(n, c.set(s.SelectionSet))
		case *ast.FragmentSpread:
			n = c.add(n, c.fragment(s.Name))
		}
	}
	return n
}

func (c *fieldCounter) fragment(name string) int {
	if n, ok := c.memo[name]; ok {
		return n
	}
	def := c.defs[name]
	if def == nil || c.visiting[name] {
		return 0
	}
	c.visiting[name] = true
	n := c.set(def.SelectionSet)
	delete(c.visiting, name)
	c.memo[name] = n
	return n
}
