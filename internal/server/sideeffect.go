package server

import (
	"context"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// sideEffectDirective marks the schema's mutations that cost something real per call (an SMS,
// a session, a grab); see graph/schema.graphqls.
const sideEffectDirective = "sideEffect"

// sideEffectLimit refuses an operation that selects more than one @sideEffect field: 1 400
// aliases of sendLoginCode in one request would send 1 400 SMS. It runs after validation
// (fields know their definitions, spreads their fragments), before execution.
type sideEffectLimit struct{}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationContextMutator
} = sideEffectLimit{}

func (sideEffectLimit) ExtensionName() string                          { return "SideEffectLimit" }
func (sideEffectLimit) Validate(schema graphql.ExecutableSchema) error { return nil }

func (sideEffectLimit) MutateOperationContext(_ context.Context, op *graphql.OperationContext) *gqlerror.Error {
	if op.Operation == nil || op.Operation.Operation != ast.Mutation {
		return nil
	}
	names := sideEffects(op.Operation.SelectionSet, nil)
	if len(names) <= 1 {
		return nil
	}
	err := gqlerror.Errorf("an operation may run one @sideEffect mutation at most, this one selects %d (%s)",
		len(names), truncate(strings.Join(names, ", "), 64))
	errcode.Set(err, errcode.ValidationFailed)
	return err
}

// sideEffects lists the @sideEffect fields of a root selection set, through fragments and
// inline fragments (root fields only: side effects live on Mutation).
func sideEffects(set ast.SelectionSet, found []string) []string {
	for _, sel := range set {
		switch s := sel.(type) {
		case *ast.Field:
			if s.Definition != nil && s.Definition.Directives.ForName(sideEffectDirective) != nil {
				found = append(found, s.Name)
			}
		case *ast.InlineFragment:
			found = sideEffects(s.SelectionSet, found)
		case *ast.FragmentSpread:
			if s.Definition != nil {
				found = sideEffects(s.Definition.SelectionSet, found)
			}
		}
	}
	return found
}
