package server

import (
	"context"

	"entgo.io/contrib/entgql"
	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/surgekit/surge/ent"
	gql "github.com/surgekit/surge/graph"
)

// Codes of the query-shape limits; both are protocol errors (HTTP 4xx, nothing executed).
const (
	CodeComplexityLimit = "COMPLEXITY_LIMIT_EXCEEDED" // gqlgen's own code
	CodeDepthLimit      = "DEPTH_LIMIT_EXCEEDED"
)

func init() {
	errcode.RegisterErrorType(CodeComplexityLimit, errcode.KindProtocol)
	errcode.RegisterErrorType(CodeDepthLimit, errcode.KindProtocol)
}

// listGuess is the assumed size of lists that take no page argument.
const listGuess = 10

// dbRoundTrip is the complexity of a root field that goes to the database. Aliases multiply
// root fields, and with them round trips, which a cost of 1 per field does not show: 29
// aliases of nodes(100 ids) were 2 927 queries within the budget. With the default budget of
// 3000, an operation holds at most 60 such fields (a nodes or shop(id:) call costs a query
// per table whatever its ids; aliased shop(id:) and voucher(id:) share one).
const dbRoundTrip = 50

// setComplexity makes list fields cost their page size times their children, so that
// first: 100 weighs 100 times a single node (gqlgen counts 1 per field otherwise), and root
// fields that reach the database cost a round trip.
func setComplexity(c *gql.ComplexityRoot) {
	page := func(first, last *int) int {
		// Out-of-range sizes are clamped here and refused by the resolver with a precise
		// BAD_USER_INPUT, rather than reported as a complexity error.
		switch {
		case first != nil:
			return min(max(*first, 1), gql.MaxPageSize)
		case last != nil:
			return min(max(*last, 1), gql.MaxPageSize)
		}
		return gql.DefaultPageSize
	}
	c.Query.Shops = func(child int, _ *entgql.Cursor[int], first *int, _ *entgql.Cursor[int], last *int, _ []*ent.ShopOrder, _ *ent.ShopWhereInput) int {
		return 1 + dbRoundTrip + child*page(first, last)
	}
	c.Query.MyOrders = func(child int, first *int, _ *entgql.Cursor[int]) int {
		return 1 + dbRoundTrip + child*page(first, nil)
	}
	c.Query.Nodes = func(child int, ids []int) int {
		return 1 + dbRoundTrip + child*min(max(len(ids), 1), gql.MaxNodeIDs)
	}
	one := func(child int, _ int) int { return 1 + dbRoundTrip + child }
	c.Query.Node, c.Query.Shop, c.Query.Voucher, c.Query.Order = one, one, one, one
	c.Query.Me = func(child int) int { return 1 + dbRoundTrip + child }
	c.Query.ShopTypes = func(child int) int { return 1 + child*listGuess } // cached, never expires
	c.Query.Vouchers = func(child int, _ int) int { return 1 + dbRoundTrip + child*listGuess }
	c.Shop.Vouchers = func(child int) int { return 1 + child*listGuess }
}

// depthLimit rejects operations nested deeper than Max fields. Introspection fields are not
// counted: GraphiQL's own schema query is deep by nature and is governed by the
// introspection switch instead.
type depthLimit struct{ Max int }

var _ interface {
	graphql.HandlerExtension
	graphql.OperationContextMutator
} = depthLimit{}

func (depthLimit) ExtensionName() string                          { return "DepthLimit" }
func (depthLimit) Validate(schema graphql.ExecutableSchema) error { return nil }

func (d depthLimit) MutateOperationContext(_ context.Context, op *graphql.OperationContext) *gqlerror.Error {
	if op.Operation == nil {
		return nil
	}
	if depth := selectionDepth(op.Operation.SelectionSet, 0, d.Max); depth > d.Max {
		err := gqlerror.Errorf("query depth exceeds the limit of %d", d.Max)
		errcode.Set(err, CodeDepthLimit)
		return err
	}
	return nil
}

// selectionDepth returns the depth of set, stopping early once it passes limit (fragment
// cycles are already rejected by validation, and the early stop bounds the walk anyway).
func selectionDepth(set ast.SelectionSet, depth, limit int) int {
	if depth > limit {
		return depth
	}
	deepest := depth
	for _, sel := range set {
		var d int
		switch s := sel.(type) {
		case *ast.Field:
			if len(s.Name) > 1 && s.Name[:2] == "__" {
				continue
			}
			d = selectionDepth(s.SelectionSet, depth+1, limit)
		case *ast.InlineFragment:
			d = selectionDepth(s.SelectionSet, depth, limit)
		case *ast.FragmentSpread:
			if s.Definition != nil {
				d = selectionDepth(s.Definition.SelectionSet, depth, limit)
			}
		}
		deepest = max(deepest, d)
	}
	return deepest
}
