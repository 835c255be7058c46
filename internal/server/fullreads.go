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
// shops(first: 1, where: {nameContains}) { totalCount } against 100 000 shops were 3.4–3.8 s
// of MariaDB CPU for one request, within the budget. At 300, the default budget of 3000 admits
// fewer than ten full reads per operation (and per batch: they share it). What the budget
// admits may still cost more than a request's database time (SURGE_DB_BUDGET, dbbudget.go):
// the database stops it there.
const fullRead = 300

// indexedFilters are the where-input fields on a column with an index (the primary key, a
// foreign key). Any other field (nameContains, areaEqualFold, scoreGT, …) is evaluated on each
// row read. A field the generator adds later is priced as such until listed here.
var indexedFilters = indexed(map[string][]string{
	"ShopWhereInput":     {"id", "typeID"},
	"VoucherWhereInput":  {"id", "shopID"},
	"ShopTypeWhereInput": {"id"},
})

// indexed lists each input type's indexed fields with every predicate on them (equality,
// ranges, lists).
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

// inOrder are the where-input fields whose conjunction an index answers in the order of the
// primary key (the default order), so that a page stops after its rows, whether any match or
// not: ranges and lists on the primary key, and on shops one type (the index on type_id holds
// the primary key after it).
var inOrder = map[string]bool{
	"ShopWhereInput.typeID": true,
}

func init() {
	for _, input := range []string{"ShopWhereInput", "VoucherWhereInput", "ShopTypeWhereInput"} {
		for _, op := range []string{"", "NEQ", "In", "NotIn", "GT", "GTE", "LT", "LTE"} {
			inOrder[input+".id"+op] = true
		}
	}
}

// fullReads prices the statements that read whole tables: it adds fullRead per full read to
// the operation's complexity (computed by gqlgen's ComplexityLimit, which runs first) and
// refuses the operation over the budget, saying why. Counted, for every field of the
// operation that lists a whole table (it takes a where argument: shops), fragments followed
// where spread, unless its filter selects rows by primary key (byKey):
//   - a filter that an index does not answer in order (inOrder): as many full reads as it
//     evaluates predicates on each row (filters), one at least;
//   - an orderBy (no order field has an index; the default order is the primary key);
//   - a selection of totalCount or pageInfo (entgql counts the matching rows for either).
type fullReads struct {
	max    int
	schema *ast.Schema
}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationContextMutator
} = &fullReads{}

func (*fullReads) ExtensionName() string { return fullReadsStat }

// fullReadsStat names the operation's count of full reads in its stats.
const fullReadsStat = "FullReads"

// pricedFullReads is the number of full reads the cost model counted in ctx's operation.
func pricedFullReads(ctx context.Context) int {
	if !graphql.HasOperationContext(ctx) {
		return 0
	}
	n, _ := graphql.GetOperationContext(ctx).Stats.GetExtension(fullReadsStat).(int)
	return n
}

func (f *fullReads) Validate(es graphql.ExecutableSchema) error {
	f.schema = es.Schema()
	return nil
}

func (f *fullReads) MutateOperationContext(ctx context.Context, op *graphql.OperationContext) *gqlerror.Error {
	if op.Operation == nil {
		return nil
	}
	reads := f.selections(op.Operation.SelectionSet, op.Variables)
	op.Stats.SetExtension(fullReadsStat, reads) // how a spent database time is reported (errors.go)
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
	input := where.Type.Name()
	w, _ := args["where"].(map[string]any)
	if f.byKey(input, w) {
		return n // at most as many rows as keys, filtered, counted and sorted
	}
	if !f.inOrder(input, w) {
		n += max(1, f.filters(input, w, true))
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

// conjuncts calls fn with each field of a where value that every row must match: its own, and
// those of the items of its and (of its or, when that has one item), recursively.
func conjuncts(w map[string]any, fn func(name string, value any)) {
	for name, value := range w {
		if value == nil {
			continue
		}
		if items, isList := value.([]any); isList && (name == "and" || name == "or" && len(items) == 1) {
			for _, item := range items {
				if m, ok := item.(map[string]any); ok {
					conjuncts(m, fn)
				}
			}
			continue
		}
		fn(name, value)
	}
}

// byKey reports whether a where value selects rows by primary key (id, idIn) and holds no
// edge: the database reads those rows only, whatever else the filter says. (An edge is a
// subquery the database may run over the whole neighbour table: 8 aliases of 1 900 ids with
// nested edges were 110 ms of MariaDB CPU.)
func (f *fullReads) byKey(input string, w map[string]any) bool {
	found := false
	conjuncts(w, func(name string, _ any) { found = found || name == "id" || name == "idIn" })
	return found && !f.edges(input, w)
}

// edges reports whether a where value (of input type input) holds an edge's predicate at
// any depth.
func (f *fullReads) edges(input string, v any) bool {
	def := f.schema.Types[input]
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			if f.edges(input, e) {
				return true
			}
		}
	case map[string]any:
		for name, value := range x {
			fd := def.Fields.ForName(name)
			if fd == nil || value == nil {
				continue
			}
			if isEdge(def, name) {
				return true
			}
			if t := f.schema.Types[fd.Type.Name()]; t != nil && t.Kind == ast.InputObject && f.edges(t.Name, value) {
				return true
			}
		}
	}
	return false
}

// isEdge reports whether field name of where input def is an edge's predicate: hasVouchers
// (beside hasVouchersWith) or hasVouchersWith.
func isEdge(def *ast.Definition, name string) bool {
	return strings.HasPrefix(name, "has") && (strings.HasSuffix(name, "With") || def.Fields.ForName(name+"With") != nil)
}

// inOrder reports whether a where value reads only rows that match it, in the default order
// (see inOrder): no filter, or ranges on the primary key, on shops within one type. Any other
// filter reads rows that may not match, as many as the table holds when none does: a
// contradiction (hasVouchers and not hasVouchers) never fills a page.
func (f *fullReads) inOrder(input string, w map[string]any) bool {
	ok := true
	conjuncts(w, func(name string, _ any) { ok = ok && inOrder[input+"."+name] })
	return ok
}

// filters counts the predicates a where value (of input type input) evaluates on each row
// read, each priced as a full read: each filter on a column without an index; an edge's
// (hasVouchers, hasTypeWith, …), a subquery on each row, plus its own filters; and under not
// and an or of several branches, every filter, indexed or not (no index answers them). top
// is whether v's fields are conjuncts of the statement's filter, where an index may answer
// them.
func (f *fullReads) filters(input string, v any, top bool) int {
	def := f.schema.Types[input]
	switch x := v.(type) {
	case []any:
		n := 0
		for _, e := range x {
			n += f.filters(input, e, top)
		}
		return n
	case map[string]any:
		n := 0
		for name, value := range x {
			fd := def.Fields.ForName(name)
			if fd == nil || value == nil {
				continue
			}
			t := f.schema.Types[fd.Type.Name()]
			switch {
			case name == "and":
				n += f.filters(input, value, top)
			case name == "or":
				items, _ := value.([]any)
				n += f.filters(input, value, top && len(items) == 1)
			case name == "not":
				n += f.filters(input, value, false)
			case isEdge(def, name) && t != nil && t.Kind == ast.InputObject: // hasVouchersWith
				n += 1 + f.filters(t.Name, value, true)
			case isEdge(def, name): // hasVouchers
				n++
			case t != nil && t.Kind == ast.InputObject:
				n += f.filters(t.Name, value, top)
			case !top || !indexedFilters[input+"."+name]:
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
