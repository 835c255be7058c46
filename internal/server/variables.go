package server

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"

	"github.com/surgekit/surge/internal/apperr"
)

// intVariables coerces the Int values of an operation's variables as the GraphQL spec does,
// before gqlgen does it its own way: gqlparser takes the string "5" for an Int (and gqlgen
// then parses it), and answers 1.5 with "cannot use value 0 as Int". Here every Int in a
// variable, at the top, in a list or in an input object, must be a JSON number holding a
// whole number within 32 bits; anything else is refused as BAD_USER_INPUT with a message that
// names the variable, where in it, and the value. It runs after documentLimits: the document
// and the variables are bounded by then.
type intVariables struct {
	schema *ast.Schema
	parsed graphql.Cache[*ast.QueryDocument] // the executor's query cache
}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationParameterMutator
} = &intVariables{}

func (*intVariables) ExtensionName() string { return "IntVariables" }

func (v *intVariables) Validate(schema graphql.ExecutableSchema) error {
	v.schema = schema.Schema()
	return nil
}

func (v *intVariables) MutateOperationParameters(ctx context.Context, p *graphql.RawParams) *gqlerror.Error {
	if len(p.Variables) == 0 {
		return nil
	}
	doc, ok := v.parsed.Get(ctx, p.Query)
	if !ok {
		var err error
		if doc, err = parser.ParseQuery(&ast.Source{Input: p.Query}); err != nil {
			return nil // the executor's parse reports it
		}
	}
	op := doc.Operations.ForName(p.OperationName)
	if op == nil {
		return nil // so does the executor
	}
	for _, def := range op.VariableDefinitions {
		value, ok := p.Variables[def.Variable]
		if !ok {
			continue
		}
		if msg, at := v.check(def.Type, value, def.Variable); msg != "" {
			err := gqlerror.ErrorPathf(ast.Path{ast.PathName("variable"), ast.PathName(def.Variable)},
				"Variable \"$%s\" got invalid value %s%s; %s", def.Variable, quoteValue(valueAt(value, at)), where(def.Variable, at), msg)
			errcode.Set(err, string(apperr.BadUserInput))
			return err
		}
	}
	return nil
}

// check walks value as a value of typ; on the first bad Int it returns what is wrong and the
// path to it from the variable (name, then fields and list indexes).
func (v *intVariables) check(typ *ast.Type, value any, name string) (msg string, at []any) {
	if value == nil {
		return "", nil // null: the executor checks nullability
	}
	if typ.Elem != nil {
		list, ok := value.([]any)
		if !ok {
			return v.check(typ.Elem, value, name) // one value stands for a list of one
		}
		for i, e := range list {
			if msg, at := v.check(typ.Elem, e, name); msg != "" {
				return msg, append([]any{i}, at...)
			}
		}
		return "", nil
	}
	if typ.NamedType == "Int" {
		return intProblem(value), nil
	}
	def := v.schema.Types[typ.NamedType]
	obj, ok := value.(map[string]any)
	if def == nil || def.Kind != ast.InputObject || !ok {
		return "", nil // not an Int: the executor coerces it
	}
	for _, f := range def.Fields {
		if fv, present := obj[f.Name]; present {
			if msg, at := v.check(f.Type, fv, name); msg != "" {
				return msg, append([]any{f.Name}, at...)
			}
		}
	}
	return "", nil
}

// intProblem says why a variable's JSON value is not a GraphQL Int, or "" if it is one.
func intProblem(value any) string {
	var text string
	switch n := value.(type) {
	case json.Number: // the transports decode with UseNumber
		text = n.String()
	case float64:
		text = strconv.FormatFloat(n, 'f', -1, 64)
	case int, int32, int64:
		text = fmt.Sprint(n)
	default:
		return "Int cannot represent a non-numeric value: send a JSON number"
	}
	if _, err := strconv.ParseInt(text, 10, 32); err == nil {
		return ""
	}
	if _, err := strconv.ParseInt(text, 10, 64); err == nil {
		return "Int cannot represent a value outside 32 bits (-2147483648 to 2147483647)"
	}
	return "Int cannot represent a non-integer value: send a whole number between -2147483648 and 2147483647"
}

// valueAt is the part of value at path.
func valueAt(value any, path []any) any {
	for _, step := range path {
		switch s := step.(type) {
		case int:
			value = value.([]any)[s]
		case string:
			value = value.(map[string]any)[s]
		}
	}
	return value
}

// where names the place of a value inside a variable (` at "w.sortGT"`), or "" for the
// variable itself.
func where(name string, path []any) string {
	if len(path) == 0 {
		return ""
	}
	s := name
	for _, step := range path {
		switch step := step.(type) {
		case int:
			s += "[" + strconv.Itoa(step) + "]"
		case string:
			s += "." + step
		}
	}
	return fmt.Sprintf(" at %q", s)
}

// quoteValue is a JSON rendering of a client's value, bounded: it is repeated in the answer.
func quoteValue(value any) string {
	b, err := json.Marshal(value)
	if err != nil {
		return "?"
	}
	return truncate(string(b), 40)
}
