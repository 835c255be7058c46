package server

import (
	"strconv"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/validator/core"
	"github.com/vektah/gqlparser/v2/validator/rules"
)

// suggestionRules are gqlparser's rules that compute "did you mean" hints, each with its
// variant that does not. gqlgen's SetDisableSuggestion swaps only the first two; the others
// compare every unknown name (and a string given for an enum) with each candidate name by
// edit distance, whether or not the hint is shown: a 1 MiB input field name cost 3.7 s of
// CPU.
var suggestionRules = []struct{ with, without core.Rule }{
	{rules.FieldsOnCorrectTypeRule, rules.FieldsOnCorrectTypeRuleWithoutSuggestions},
	{rules.ScalarLeafsRule, rules.ScalarLeafsRuleWithoutSuggestions},
	{rules.KnownArgumentNamesRule, rules.KnownArgumentNamesRuleWithoutSuggestions},
	{rules.KnownTypeNamesRule, rules.KnownTypeNamesRuleWithoutSuggestions},
	{rules.ValuesOfCorrectTypeRule, rules.ValuesOfCorrectTypeRuleWithoutSuggestions},
}

// validationRules are gqlparser's rules plus this server's: Int literals within 32 bits (as
// the GraphQL spec's Int, which gqlparser does not check), and, when introspection is off,
// __schema and __type refused as a validation error (as Apollo Server does) rather than
// answered null with an execution error. gqlparser's rules always run without their hints;
// with suggestions on, bounded hints are added to their errors (hints.go).
func validationRules(schema *ast.Schema, introspection, suggestions bool) func() *rules.Rules {
	return func() *rules.Rules { // called once per document validated
		r := rules.NewDefaultRules()
		h := &hinter{schema: schema, left: maxHints}
		for _, s := range suggestionRules {
			r.RemoveRule(s.with.Name)
			rule := s.without.RuleFunc
			if suggestions {
				rule = h.wrap(rule)
			}
			r.AddRule(s.without.Name, rule)
		}
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
