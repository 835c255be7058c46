package server

import (
	"context"
	"fmt"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/99designs/gqlgen/graphql/introspection"
	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// introspectionLimit prices introspection, which gqlgen's complexity leaves out (__schema
// costs nothing there, and list fields such as types or fields count once whatever their
// length): 27 aliases of __schema { types { fields { args … } } } (3.7 KB) cost 240–430 ms
// of CPU and a 1 MB answer. Each operation may make introspection resolve at most Max
// fields, counted over the schema the way the answer will hold them (every type of types,
// every field of fields…).
type introspectionLimit struct {
	Max    int
	schema *ast.Schema
}

// introspectionAllowance is how many times the fields of GraphiQL's full schema query an
// operation may introspect.
const introspectionAllowance = 2

// newIntrospectionLimit allows introspectionAllowance times the fields that GraphiQL's full
// schema query (as gqlgen ships it) resolves on schema, so the limit follows the schema.
func newIntrospectionLimit(schema *ast.Schema) introspectionLimit {
	doc, err := gqlparser.LoadQuery(schema, introspection.Query)
	if err != nil {
		panic(fmt.Sprintf("GraphiQL's introspection query does not validate: %v", err))
	}
	full := introspectionFields(schema, doc.Operations[0], nil, 1<<30)
	return introspectionLimit{Max: introspectionAllowance * full, schema: schema}
}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationContextMutator
} = introspectionLimit{}

func (introspectionLimit) ExtensionName() string                          { return "IntrospectionLimit" }
func (introspectionLimit) Validate(schema graphql.ExecutableSchema) error { return nil }

func (l introspectionLimit) MutateOperationContext(_ context.Context, op *graphql.OperationContext) *gqlerror.Error {
	if op.Operation == nil {
		return nil
	}
	if introspectionFields(l.schema, op.Operation, op.Variables, l.Max) > l.Max {
		err := gqlerror.Errorf("the operation's introspection resolves more than %d fields (twice GraphiQL's full schema query)", l.Max)
		errcode.Set(err, CodeComplexityLimit)
		return err
	}
	return nil
}

// introspectionFields counts the fields the introspection in op will resolve (the members of
// the objects of its answer) and stops counting once past limit, so that counting costs no
// more than the limit allows. A field selected twice under one response name counts twice
// (gqlgen resolves it once), so the count is exact without such repeats and an upper bound
// with them.
func introspectionFields(schema *ast.Schema, op *ast.OperationDefinition, vars map[string]any, limit int) int {
	c := introspectionCounter{schema: schema, left: limit}
	eachField(op.SelectionSet, func(f *ast.Field) {
		if c.over() {
			return
		}
		switch f.Name { // __schema and __type are fields of the query type only
		case "__schema":
			c.spend(1)
			c.schemaFields(f.SelectionSet)
		case "__type":
			c.spend(1)
			name, _ := f.ArgumentMap(vars)["name"].(string)
			if def := schema.Types[name]; def != nil {
				c.typeFields(f.SelectionSet, introType{def: def})
			}
		}
	})
	return limit - c.left
}

// eachField calls visit for each field of set, inside fragments too.
func eachField(set ast.SelectionSet, visit func(*ast.Field)) {
	for _, sel := range set {
		switch s := sel.(type) {
		case *ast.Field:
			visit(s)
		case *ast.InlineFragment:
			eachField(s.SelectionSet, visit)
		case *ast.FragmentSpread:
			if s.Definition != nil { // linked by validation, which refuses cycles
				eachField(s.Definition.SelectionSet, visit)
			}
		}
	}
}

type introspectionCounter struct {
	schema *ast.Schema
	left   int // fields still allowed; negative once over
}

func (c *introspectionCounter) spend(n int) { c.left -= n }
func (c *introspectionCounter) over() bool  { return c.left < 0 }

// each counts set's fields for one object of the answer, and calls list for each field that
// holds more objects.
func (c *introspectionCounter) each(set ast.SelectionSet, list func(f *ast.Field)) {
	if c.over() {
		return
	}
	eachField(set, func(f *ast.Field) {
		if c.over() {
			return
		}
		c.spend(1)
		list(f)
	})
}

// schemaFields counts a __Schema object's fields.
func (c *introspectionCounter) schemaFields(set ast.SelectionSet) {
	c.each(set, func(f *ast.Field) {
		switch f.Name {
		case "types":
			for _, def := range c.schema.Types {
				c.typeFields(f.SelectionSet, introType{def: def})
			}
		case "queryType":
			c.typeFields(f.SelectionSet, introType{def: c.schema.Query})
		case "mutationType":
			c.typeFields(f.SelectionSet, introType{def: c.schema.Mutation})
		case "subscriptionType":
			c.typeFields(f.SelectionSet, introType{def: c.schema.Subscription})
		case "directives":
			for _, d := range c.schema.Directives {
				c.each(f.SelectionSet, func(f *ast.Field) {
					if f.Name == "args" {
						c.inputValues(f.SelectionSet, d.Arguments)
					}
				})
			}
		}
	})
}

// introType is a __Type as gqlgen's introspection answers it: a named type (def), or a
// non-null or list wrapper (typ) whose ofType is the type it wraps.
type introType struct {
	def *ast.Definition
	typ *ast.Type
}

func wrapType(schema *ast.Schema, t *ast.Type) introType {
	if !t.NonNull && t.NamedType != "" {
		return introType{def: schema.Types[t.NamedType]}
	}
	return introType{typ: t}
}

// typeFields counts a __Type object's fields (none for a null type).
func (c *introspectionCounter) typeFields(set ast.SelectionSet, t introType) {
	if t.def == nil && t.typ == nil {
		return
	}
	kind := ast.DefinitionKind("")
	if t.def != nil {
		kind = t.def.Kind
	}
	c.each(set, func(f *ast.Field) {
		switch {
		case f.Name == "fields" && (kind == ast.Object || kind == ast.Interface):
			for _, fd := range t.def.Fields {
				if strings.HasPrefix(fd.Name, "__") {
					continue
				}
				c.each(f.SelectionSet, func(f *ast.Field) {
					switch f.Name {
					case "args":
						c.inputValues(f.SelectionSet, fd.Arguments)
					case "type":
						c.typeFields(f.SelectionSet, wrapType(c.schema, fd.Type))
					}
				})
			}
		case f.Name == "inputFields" && kind == ast.InputObject:
			for _, fd := range t.def.Fields {
				c.inputValue(f.SelectionSet, fd.Type)
			}
		case f.Name == "interfaces" && (kind == ast.Object || kind == ast.Interface):
			for _, name := range t.def.Interfaces {
				c.typeFields(f.SelectionSet, introType{def: c.schema.Types[name]})
			}
		case f.Name == "possibleTypes" && t.def != nil && t.def.IsAbstractType():
			for _, def := range c.schema.GetPossibleTypes(t.def) {
				c.typeFields(f.SelectionSet, introType{def: def})
			}
		case f.Name == "enumValues" && kind == ast.Enum:
			for range t.def.EnumValues {
				c.each(f.SelectionSet, func(*ast.Field) {})
			}
		case f.Name == "ofType" && t.typ != nil:
			of := *t.typ
			if of.NonNull {
				of.NonNull = false
				c.typeFields(f.SelectionSet, wrapType(c.schema, &of))
			} else if of.Elem != nil {
				c.typeFields(f.SelectionSet, wrapType(c.schema, of.Elem))
			}
		}
	})
}

func (c *introspectionCounter) inputValues(set ast.SelectionSet, args ast.ArgumentDefinitionList) {
	for _, a := range args {
		c.inputValue(set, a.Type)
	}
}

// inputValue counts an __InputValue object's fields.
func (c *introspectionCounter) inputValue(set ast.SelectionSet, typ *ast.Type) {
	c.each(set, func(f *ast.Field) {
		if f.Name == "type" {
			c.typeFields(f.SelectionSet, wrapType(c.schema, typ))
		}
	})
}
