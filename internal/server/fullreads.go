package server

import (
	"context"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// fullRead is the complexity of a statement that reads a whole table. A root field is priced
// as one round trip (dbRoundTrip), which holds for lookups by id but not for a filter on a
// column without an index, an order on one, or a count: each reads every row. 57 aliases of
// shops(where: {nameContains}) { totalCount } against 100 000 shops were 3.4–3.8 s of MariaDB
// CPU for one request, within the budget. At 300, the default budget of 3000 admits fewer
// than ten full reads per operation (and per batch: they share it).
const fullRead = 300

// indexedFilters are the where-input fields a statement answers through an index (the
// primary key, a foreign key's index, an edge's existence through that index). Every other
// filter (nameContains, areaEqualFold, scoreGT, …) is evaluated on each row: a full read of
// its table. A field the generator adds later is priced as a full read until listed here.
var indexedFilters = indexed(map[string][]string{
	"ShopWhereInput":     {"id", "typeID", "hasType", "hasVouchers"},
	"VoucherWhereInput":  {"id", "shopID", "hasShop"},
	"ShopTypeWhereInput": {"id"},
})

// indexed lists each input type's indexed fields with every predicate on them (equality,
// ranges, lists): all of them use the index.
func indexed(fields map[string][]string) map[string]bool {
	out := map[string]bool{}
	for input, names := range fields {
		for _, name := range names {
			for _, op := range []string{"", "NEQ", "In", "NotIn", "GT", "GTE", "LT", "LTE"} {
				out[input+"."+name+op] = true
			}
		}
	}
	return out
}

// fullReads prices the statements that read whole tables: it adds fullRead per full read to
// the operation's complexity (computed by gqlgen's ComplexityLimit, which runs first) and
// refuses the operation over the budget, saying why. Counted, for every field of the
// operation that lists a whole table (it takes a where argument: shops), fragments followed
// where spread: each filter of its where argument on a column without an index (nested ones
// too), an orderBy (no order field has an index; the default order is the primary key), and
// a selection of totalCount or pageInfo (entgql counts the matching rows for either).
type fullReads struct {
	max    int
	schema *ast.Schema
}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationContextMutator
} = &fullReads{}

func (*fullReads) ExtensionName() string { return "FullReads" }

func (f *fullReads) Validate(es graphql.ExecutableSchema) error {
	f.schema = es.Schema()
	return nil
}

func (f *fullReads) MutateOperationContext(ctx context.Context, op *graphql.OperationContext) *gqlerror.Error {
	if op.Operation == nil {
		return nil
	}
	reads := f.selections(op.Operation.SelectionSet, op.Variables)
	if reads == 0 {
		return nil
	}
	stats := extension.GetComplexityStats(ctx)
	if stats == nil { // no complexity limit installed before this one
		stats = &extension.ComplexityStats{}
	}
	stats.Complexity += reads * fullRead // what batchLimits charges the batch
	if stats.Complexity > f.max {
		err := gqlerror.Errorf("operation has complexity %d, which exceeds the limit of %d: %d of it for %d full reads of a table "+
			"(%d each: a filter on a field without an index, orderBy, totalCount or pageInfo)",
			stats.Complexity, f.max, reads*fullRead, reads, fullRead)
		errcode.Set(err, CodeComplexityLimit)
		return err
	}
	return nil
}

// selections counts the full reads of the fields in set.
func (f *fullReads) selections(set ast.SelectionSet, vars map[string]any) int {
	n := 0
	for _, sel := range set {
		switch s := sel.(type) {
		case *ast.Field:
			n += f.field(s, vars)
		case *ast.InlineFragment:
			n += f.selections(s.SelectionSet, vars)
		case *ast.FragmentSpread:
			if s.Definition != nil {
				n += f.selections(s.Definition.SelectionSet, vars)
			}
		}
	}
	return n
}

func (f *fullReads) field(s *ast.Field, vars map[string]any) int {
	if s.Definition == nil || strings.HasPrefix(s.Name, "__") {
		return 0
	}
	n := f.selections(s.SelectionSet, vars)
	where := s.Definition.Arguments.ForName("where")
	if where == nil {
		return n // not a list over a whole table (myOrders reads one user's orders by index)
	}
	args := s.ArgumentMap(vars)
	if args["where"] != nil {
		n += f.filters(where.Type.Name(), args["where"])
	}
	if order := args["orderBy"]; order != nil {
		if l, isList := order.([]any); !isList || len(l) > 0 {
			n++
		}
	}
	if selects(s.SelectionSet, "totalCount") || selects(s.SelectionSet, "pageInfo") {
		n++
	}
	return n
}

// filters counts the filters of a where value (of input type input) that use no index,
// following not, and, or and the edges' inputs.
func (f *fullReads) filters(input string, v any) int {
	def := f.schema.Types[input]
	switch x := v.(type) {
	case []any:
		n := 0
		for _, e := range x {
			n += f.filters(input, e)
		}
		return n
	case map[string]any:
		n := 0
		for name, value := range x {
			fd := def.Fields.ForName(name)
			if fd == nil || value == nil {
				continue
			}
			if t := f.schema.Types[fd.Type.Name()]; t != nil && t.Kind == ast.InputObject {
				n += f.filters(t.Name, value)
			} else if !indexedFilters[input+"."+name] {
				n++
			}
		}
		return n
	}
	return 0
}

// selects reports whether set selects a field named name, directly or through fragments.
func selects(set ast.SelectionSet, name string) bool {
	for _, sel := range set {
		switch s := sel.(type) {
		case *ast.Field:
			if s.Name == name {
				return true
			}
		case *ast.InlineFragment:
			if selects(s.SelectionSet, name) {
				return true
			}
		case *ast.FragmentSpread:
			if s.Definition != nil && selects(s.Definition.SelectionSet, name) {
				return true
			}
		}
	}
	return false
}
