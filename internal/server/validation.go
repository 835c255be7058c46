package server

import (
	"strconv"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/validator/core"
	"github.com/vektah/gqlparser/v2/validator/rules"
)

// validationRules are gqlparser's rules plus this server's: Int literals within 32 bits (as
// the GraphQL spec's Int, which gqlparser does not check), and, when introspection is off,
// __schema and __type refused as a validation error (as Apollo Server does) rather than
// answered null with an execution error.
func validationRules(introspection bool) func() *rules.Rules {
	return func() *rules.Rules {
		r := rules.NewDefaultRules()
		r.AddRule("IntWithin32Bits", intWithin32Bits)
		if !introspection {
			r.AddRule("NoIntrospection", noIntrospection)
		}
		return r
	}
}

func intWithin32Bits(observers *core.Events, addError core.AddErrFunc) {
	observers.OnValue(func(_ *core.Walker, v *ast.Value) {
		if v.Kind != ast.IntValue || v.Definition == nil || v.Definition.Name != "Int" {
			return
		}
		if _, err := strconv.ParseInt(v.Raw, 10, 32); err != nil {
			addError(core.Message("Int cannot represent non 32-bit signed integer value: %s", truncate(v.Raw, 32)), core.At(v.Position))
		}
	})
}

func noIntrospection(observers *core.Events, addError core.AddErrFunc) {
	observers.OnField(func(_ *core.Walker, f *ast.Field) {
		if f.Name == "__schema" || f.Name == "__type" {
			addError(core.Message("introspection is disabled on this server"), core.At(f.Position))
		}
	})
}
