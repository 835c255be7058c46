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
// of CPU and a 1 MB answer. Each operation's introspection may resolve at most Max fields and
// answer at most MaxBytes of JSON, both counted over the schema the way the answer will hold
// them (every type of types, every field of fields…, every description's length): fields
// bound the CPU, bytes the answer, which few fields with long strings make large (165
// aliases of __schema { types { description } }: 965 KB).
type introspectionLimit struct {
	Max, MaxBytes int
	schema        *ast.Schema
}

// introspectionAllowance is how many times the fields and the answer of GraphiQL's full
// schema query an operation may introspect.
const introspectionAllowance = 2

// newIntrospectionLimit allows introspectionAllowance times the fields and the bytes of what
// GraphiQL's full schema query (as gqlgen ships it) answers on schema, so the limit follows
// the schema.
func newIntrospectionLimit(schema *ast.Schema) introspectionLimit {
	doc, err := gqlparser.LoadQuery(schema, introspection.Query)
	if err != nil {
		panic(fmt.Sprintf("GraphiQL's introspection query does not validate: %v", err))
	}
	full := introspectionCost(schema, doc.Operations[0], nil, 1<<30, 1<<40)
	return introspectionLimit{Max: introspectionAllowance * full.fields, MaxBytes: introspectionAllowance * full.bytes, schema: schema}
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
	var err *gqlerror.Error
	switch cost := introspectionCost(l.schema, op.Operation, op.Variables, l.Max, l.MaxBytes); {
	case cost.fields > l.Max:
		err = gqlerror.Errorf("the operation's introspection resolves more than %d fields (twice GraphiQL's full schema query)", l.Max)
	case cost.bytes > l.MaxBytes:
		err = gqlerror.Errorf("the operation's introspection answers more than %d bytes (twice GraphiQL's full schema query)", l.MaxBytes)
	default:
		return nil
	}
	errcode.Set(err, CodeComplexityLimit)
	return err
}

// introspectionCounts are what the introspection of an operation resolves: fields (the
// members of the objects of its answer) and the bytes of its JSON.
type introspectionCounts struct{ fields, bytes int }

// introspectionCost counts the introspection in op (its __schema and __type fields, and the
// answer's braces and commas between them) and stops counting once past maxFields or
// maxBytes, so that counting costs no more than the limit allows. A field selected twice
// under one response name counts twice (gqlgen resolves it once), as do list members that
// includeDeprecated: false leaves out, and @skip/@include are not followed: the counts are
// exact without these and an upper bound with them.
func introspectionCost(schema *ast.Schema, op *ast.OperationDefinition, vars map[string]any, maxFields, maxBytes int) introspectionCounts {
	c := introspectionCounter{schema: schema, vars: vars, fields: maxFields, bytes: maxBytes}
	members := 0
	eachField(op.SelectionSet, func(f *ast.Field) {
		if c.over() || (f.Name != "__schema" && f.Name != "__type") { // fields of the query type only
			return
		}
		c.member(f, &members)
		if f.Name == "__schema" {
			c.object("__Schema", f.SelectionSet, c.schemaValue)
			return
		}
		name, _ := f.ArgumentMap(vars)["name"].(string)
		c.typeObject(f.SelectionSet, introType{def: schema.Types[name]})
	})
	if members > 0 {
		c.bytes -= 2 // the answer's braces
	}
	return introspectionCounts{fields: maxFields - c.fields, bytes: maxBytes - c.bytes}
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

// introspectionCounter spends what the answer's objects hold from what is still allowed.
type introspectionCounter struct {
	schema        *ast.Schema
	vars          map[string]any
	fields, bytes int // still allowed; negative once over
}

func (c *introspectionCounter) over() bool { return c.fields < 0 || c.bytes < 0 }

// member spends one member of an object, its "name": and the comma before all but the
// first (members counts them).
func (c *introspectionCounter) member(f *ast.Field, members *int) {
	c.fields--
	c.bytes -= len(f.Alias) + 3 // a response name needs no escaping
	if *members > 0 {
		c.bytes--
	}
	*members++
}

// object counts one object of the answer whose type is typename: its braces and, for each
// field of set, the member, whose value value counts (a nested object or list counts itself
// and returns 0; a leaf returns its JSON's bytes).
func (c *introspectionCounter) object(typename string, set ast.SelectionSet, value func(f *ast.Field) int) {
	if c.over() {
		return
	}
	c.bytes -= 2
	members := 0
	eachField(set, func(f *ast.Field) {
		if c.over() {
			return
		}
		c.member(f, &members)
		if f.Name == "__typename" {
			c.bytes -= jsonStringBytes(typename)
			return
		}
		c.bytes -= value(f)
	})
}

// list counts a list of n values, each counted by elem(i). It returns 0 (its bytes are spent).
func (c *introspectionCounter) list(n int, elem func(i int)) int {
	c.bytes -= 2 + max(n-1, 0)
	for i := 0; i < n && !c.over(); i++ {
		elem(i)
	}
	return 0
}

// Bytes of JSON leaves.
const (
	nullBytes  = len("null")
	trueBytes  = len("true")
	falseBytes = len("false")
)

// jsonStringBytes is the length of s as the answer holds it: quoted, with \t \r \n \\ \"
// and \u00XX escapes (graphql.MarshalString), and <, >, &, U+2028 and U+2029 escaped as
// \uXXXX by encoding/json, which writes the response around the data.
func jsonStringBytes(s string) int {
	n := 2 + len(s)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\t' || c == '\r' || c == '\n' || c == '\\' || c == '"':
			n++
		case c < 0x20 || c == '<' || c == '>' || c == '&':
			n += 5
		case c == 0xe2 && i+2 < len(s) && s[i+1] == 0x80 && (s[i+2] == 0xa8 || s[i+2] == 0xa9):
			n += 3 // 3 bytes of UTF-8 become 6
		}
	}
	return n
}

// optionalString is the bytes of a nullable string: null when empty.
func optionalString(s string) int {
	if s == "" {
		return nullBytes
	}
	return jsonStringBytes(s)
}

func boolBytes(b bool) int {
	if b {
		return trueBytes
	}
	return falseBytes
}

// includeDeprecated is the argument of fields and enumValues (false by default).
func (c *introspectionCounter) includeDeprecated(f *ast.Field) bool {
	b, _ := f.ArgumentMap(c.vars)["includeDeprecated"].(bool)
	return b
}

// schemaValue counts a __Schema member's value.
func (c *introspectionCounter) schemaValue(f *ast.Field) int {
	s := c.schema
	switch f.Name {
	case "description":
		return optionalString(s.Description)
	case "types":
		defs := make([]*ast.Definition, 0, len(s.Types))
		for _, def := range s.Types {
			defs = append(defs, def)
		}
		return c.list(len(defs), func(i int) { c.typeObject(f.SelectionSet, introType{def: defs[i]}) })
	case "queryType":
		return c.typeObject(f.SelectionSet, introType{def: s.Query})
	case "mutationType":
		return c.typeObject(f.SelectionSet, introType{def: s.Mutation})
	case "subscriptionType":
		return c.typeObject(f.SelectionSet, introType{def: s.Subscription})
	case "directives":
		dirs := make([]*ast.DirectiveDefinition, 0, len(s.Directives))
		for _, d := range s.Directives {
			dirs = append(dirs, d)
		}
		return c.list(len(dirs), func(i int) { c.object("__Directive", f.SelectionSet, c.directiveValue(dirs[i])) })
	}
	return nullBytes
}

// directiveValue counts a __Directive member's value.
func (c *introspectionCounter) directiveValue(d *ast.DirectiveDefinition) func(f *ast.Field) int {
	return func(f *ast.Field) int {
		switch f.Name {
		case "name":
			return jsonStringBytes(d.Name)
		case "description":
			return optionalString(d.Description)
		case "locations":
			n := 2 + max(len(d.Locations)-1, 0)
			for _, l := range d.Locations {
				n += jsonStringBytes(string(l))
			}
			return n
		case "args":
			return c.inputValues(f, d.Arguments, false) // gqlgen answers no directive argument deprecated
		case "isRepeatable":
			return boolBytes(d.IsRepeatable)
		}
		return nullBytes
	}
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

// typeObject counts a __Type object (null for a type the schema lacks). It returns 0 (its
// bytes are spent), as a value function returns a nested value's.
func (c *introspectionCounter) typeObject(set ast.SelectionSet, t introType) int {
	if t.def == nil && t.typ == nil {
		c.bytes -= nullBytes
		return 0
	}
	c.object("__Type", set, func(f *ast.Field) int { return c.typeValue(f, t) })
	return 0
}

// typeValue counts a __Type member's value. Lists that do not apply to the type's kind are
// empty ([]), as gqlgen answers them.
func (c *introspectionCounter) typeValue(f *ast.Field, t introType) int {
	def := t.def
	kind := ast.DefinitionKind("")
	if def != nil {
		kind = def.Kind
	}
	switch f.Name {
	case "kind":
		switch {
		case def != nil:
			return jsonStringBytes(string(kind))
		case t.typ.NonNull:
			return jsonStringBytes("NON_NULL")
		}
		return jsonStringBytes("LIST")
	case "name":
		if def == nil {
			return nullBytes
		}
		return jsonStringBytes(def.Name)
	case "description":
		if def == nil {
			return nullBytes
		}
		return optionalString(def.Description)
	case "specifiedByURL":
		if d := specifiedBy(def); d != "" {
			return jsonStringBytes(d)
		}
		return nullBytes
	case "isOneOf":
		return boolBytes(kind == ast.InputObject && def.Directives.ForName("oneOf") != nil)
	case "fields":
		if kind != ast.Object && kind != ast.Interface {
			return 2
		}
		fields := make([]*ast.FieldDefinition, 0, len(def.Fields))
		for _, fd := range def.Fields {
			if !strings.HasPrefix(fd.Name, "__") && (c.includeDeprecated(f) || fd.Directives.ForName("deprecated") == nil) {
				fields = append(fields, fd)
			}
		}
		return c.list(len(fields), func(i int) { c.object("__Field", f.SelectionSet, c.fieldValue(fields[i])) })
	case "inputFields":
		if kind != ast.InputObject {
			return 2
		}
		return c.list(len(def.Fields), func(i int) {
			fd := def.Fields[i]
			c.object("__InputValue", f.SelectionSet, c.inputValue(fd.Name, fd.Description, fd.Type, fd.DefaultValue, fd.Directives.ForName("deprecated")))
		})
	case "interfaces":
		if kind != ast.Object && kind != ast.Interface {
			return 2
		}
		return c.list(len(def.Interfaces), func(i int) { c.typeObject(f.SelectionSet, introType{def: c.schema.Types[def.Interfaces[i]]}) })
	case "possibleTypes":
		if kind != ast.Interface && kind != ast.Union {
			return 2
		}
		types := c.schema.GetPossibleTypes(def)
		return c.list(len(types), func(i int) { c.typeObject(f.SelectionSet, introType{def: types[i]}) })
	case "enumValues":
		if kind != ast.Enum {
			return 2
		}
		values := make([]*ast.EnumValueDefinition, 0, len(def.EnumValues))
		for _, v := range def.EnumValues {
			if c.includeDeprecated(f) || v.Directives.ForName("deprecated") == nil {
				values = append(values, v)
			}
		}
		return c.list(len(values), func(i int) {
			v := values[i]
			c.object("__EnumValue", f.SelectionSet, c.deprecatable(v.Name, v.Description, v.Directives.ForName("deprecated"), ""))
		})
	case "ofType":
		if t.typ == nil {
			return nullBytes
		}
		of := *t.typ
		if of.NonNull {
			of.NonNull = false
			return c.typeObject(f.SelectionSet, wrapType(c.schema, &of))
		}
		return c.typeObject(f.SelectionSet, wrapType(c.schema, of.Elem))
	}
	return nullBytes
}

// specifiedBy is the URL of a scalar's @specifiedBy ("" if none).
func specifiedBy(def *ast.Definition) string {
	if def == nil || def.Kind != ast.Scalar {
		return ""
	}
	if d := def.Directives.ForName("specifiedBy"); d != nil {
		if url := d.Arguments.ForName("url"); url != nil && url.Value != nil {
			return url.Value.Raw
		}
	}
	return ""
}

// fieldValue counts a __Field member's value.
func (c *introspectionCounter) fieldValue(fd *ast.FieldDefinition) func(f *ast.Field) int {
	common := c.deprecatable(fd.Name, fd.Description, fd.Directives.ForName("deprecated"), "No longer supported")
	return func(f *ast.Field) int {
		switch f.Name {
		case "args":
			return c.inputValues(f, fd.Arguments, true)
		case "type":
			return c.typeObject(f.SelectionSet, wrapType(c.schema, fd.Type))
		}
		return common(f)
	}
}

// inputValues counts arguments as a list of __InputValue objects; deprecation says whether
// @deprecated on them is answered.
func (c *introspectionCounter) inputValues(f *ast.Field, args ast.ArgumentDefinitionList, deprecation bool) int {
	return c.list(len(args), func(i int) {
		a := args[i]
		var deprecated *ast.Directive
		if deprecation {
			deprecated = a.Directives.ForName("deprecated")
		}
		c.object("__InputValue", f.SelectionSet, c.inputValue(a.Name, a.Description, a.Type, a.DefaultValue, deprecated))
	})
}

// inputValue counts an __InputValue member's value.
func (c *introspectionCounter) inputValue(name, description string, typ *ast.Type, def *ast.Value, deprecated *ast.Directive) func(f *ast.Field) int {
	common := c.deprecatable(name, description, deprecated, "")
	return func(f *ast.Field) int {
		switch f.Name {
		case "type":
			return c.typeObject(f.SelectionSet, wrapType(c.schema, typ))
		case "defaultValue":
			if def == nil {
				return nullBytes
			}
			return jsonStringBytes(def.String())
		}
		return common(f)
	}
}

// deprecatable counts the members that fields, input values and enum values share: name,
// description, isDeprecated and deprecationReason (its reason argument, else
// defaultReason, else null).
func (c *introspectionCounter) deprecatable(name, description string, deprecated *ast.Directive, defaultReason string) func(f *ast.Field) int {
	return func(f *ast.Field) int {
		switch f.Name {
		case "name":
			return jsonStringBytes(name)
		case "description":
			return optionalString(description)
		case "isDeprecated":
			return boolBytes(deprecated != nil)
		case "deprecationReason":
			if deprecated == nil {
				return nullBytes
			}
			if r := deprecated.Arguments.ForName("reason"); r != nil && r.Value != nil {
				return jsonStringBytes(r.Value.Raw)
			}
			return optionalString(defaultReason)
		}
		return nullBytes
	}
}
