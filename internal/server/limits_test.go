package server

import (
	"testing"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
)

func depthOf(t *testing.T, q string) int {
	t.Helper()
	doc, err := parser.ParseQuery(&ast.Source{Input: q})
	if err != nil {
		t.Fatal(err)
	}
	// Resolve fragment spreads the way validation would.
	for _, op := range doc.Operations {
		link(op.SelectionSet, doc.Fragments)
	}
	for _, f := range doc.Fragments {
		link(f.SelectionSet, doc.Fragments)
	}
	return selectionDepth(doc.Operations[0].SelectionSet, 0, 100)
}

func link(set ast.SelectionSet, frags ast.FragmentDefinitionList) {
	for _, s := range set {
		switch s := s.(type) {
		case *ast.Field:
			link(s.SelectionSet, frags)
		case *ast.InlineFragment:
			link(s.SelectionSet, frags)
		case *ast.FragmentSpread:
			s.Definition = frags.ForName(s.Name)
		}
	}
}

func TestSelectionDepth(t *testing.T) {
	for q, want := range map[string]int{
		`{ a }`:                          1,
		`{ a { b { c } } d }`:            3,
		`{ a { ... on T { b { c } } } }`: 3,
		`{ a { ...F } } fragment F on T { b { c { d } } }`:                          4,
		`{ __schema { types { fields { type { ofType { ofType { name } } } } } } }`: 0,
		`{ a { __typename } }`: 1,
	} {
		if got := depthOf(t, q); got != want {
			t.Errorf("%s: depth %d, want %d", q, got, want)
		}
	}
}
