package server

import (
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/validator/core"
)

// The "did you mean" hints of dev mode, added to the errors of gqlparser's suggestion-free
// rules (validation.go) with the same wording and the same choice of names as gqlparser's
// own hints, but at a bounded cost: at most maxHints hints per document, no hint for a
// message too long to hold one, and only candidate names close enough in length to be within
// the edit distance are compared.

// maxHints bounds the hints of one document: a response shows at most maxErrors errors.
const maxHints = maxErrors

// maxHintedMessage: a message longer than this quotes an input too long to be within the
// edit distance of any schema name (the distance allowed is 40% of the input's length), so
// no hint is looked for.
const maxHintedMessage = 1 << 10

// hinter adds hints to one document's validation errors.
type hinter struct {
	schema *ast.Schema
	left   int // hints this document may still get
}

// wrap returns rule with a hint added to each error it reports, while hints are left.
func (h *hinter) wrap(rule core.RuleFunc) core.RuleFunc {
	return func(observers *core.Events, addError core.AddErrFunc) {
		rule(observers, func(options ...core.ErrorOption) {
			addError(append(options, h.hint)...) // last: it reads the finished message
		})
	}
}

func (h *hinter) hint(err *gqlerror.Error) {
	if h.left <= 0 || len(err.Message) > maxHintedMessage {
		return
	}
	for _, p := range hintPatterns {
		if m := p.re.FindStringSubmatch(err.Message); m != nil {
			h.left--
			err.Message += p.hint(h.schema, m)
			return
		}
	}
}

// hintPatterns recognise the messages of gqlparser's suggestion-free rules (v2.5), and give
// the hint gqlparser's own rule would have added.
var hintPatterns = []struct {
	re   *regexp.Regexp
	hint func(s *ast.Schema, m []string) string
}{
	{ // FieldsOnCorrectType
		regexp.MustCompile(`^Cannot query field "(\w+)" on type "(\w+)"\.$`),
		func(s *ast.Schema, m []string) string {
			def := s.Types[m[2]]
			if def == nil {
				return ""
			}
			// First, as gqlparser, the object types that have the field (gqlparser also names
			// interfaces, and orders by how often a type is used; here by name).
			if def.IsAbstractType() {
				var types []string
				for _, t := range s.GetPossibleTypes(def) {
					if t.Fields.ForName(m[1]) != nil {
						types = append(types, t.Name)
					}
				}
				if len(types) > 0 {
					sort.Strings(types)
					return " Did you mean to use an inline fragment on " + core.QuotedOrList(types...) + "?"
				}
			}
			if def.Kind == ast.Object || def.Kind == ast.Interface {
				return suggest("Did you mean", m[1], fieldNames(def.Fields))
			}
			return ""
		},
	},
	{ // ScalarLeafs
		regexp.MustCompile(`^Field "(\w+)" of type "[^"]+" must have a selection of subfields\.$`),
		func(_ *ast.Schema, m []string) string { return ` Did you mean "` + m[1] + ` { ... }"?` },
	},
	{ // KnownArgumentNames, on a field
		regexp.MustCompile(`^Unknown argument "(\w+)" on field "(\w+)\.(\w+)"\.$`),
		func(s *ast.Schema, m []string) string {
			if def := s.Types[m[2]]; def != nil {
				if f := def.Fields.ForName(m[3]); f != nil {
					return suggest("Did you mean", m[1], argumentNames(f.Arguments))
				}
			}
			return ""
		},
	},
	{ // KnownArgumentNames, on a directive
		regexp.MustCompile(`^Unknown argument "(\w+)" on directive "@(\w+)"\.$`),
		func(s *ast.Schema, m []string) string {
			if d := s.Directives[m[2]]; d != nil {
				return suggest("Did you mean", m[1], argumentNames(d.Arguments))
			}
			return ""
		},
	},
	{ // KnownTypeNames
		regexp.MustCompile(`^Unknown type "(\w+)"\.$`),
		func(s *ast.Schema, m []string) string {
			names := make([]string, 0, len(s.Types))
			for name := range s.Types {
				names = append(names, name)
			}
			sort.Strings(names) // gqlparser's order is the map's; this one is stable
			return suggest("Did you mean", m[1], names)
		},
	},
	{ // ValuesOfCorrectType: an input object's unknown field
		regexp.MustCompile(`^Field "(\w+)" is not defined by type "(\w+)"\.$`),
		func(s *ast.Schema, m []string) string {
			if def := s.Types[m[2]]; def != nil {
				return suggest("Did you mean", m[1], fieldNames(def.Fields))
			}
			return ""
		},
	},
	{ // ValuesOfCorrectType: an unknown enum value
		regexp.MustCompile(`^Value "(\w+)" does not exist in "([\w\[\]!]+)" enum\.$`),
		func(s *ast.Schema, m []string) string {
			return suggest("Did you mean the enum value", m[1], enumValues(s, m[2]))
		},
	},
	{ // ValuesOfCorrectType: a string given for an enum
		regexp.MustCompile(`^Enum "([\w\[\]!]+)" cannot represent non-enum value: (".*")\.$`),
		func(s *ast.Schema, m []string) string {
			typed, err := strconv.Unquote(m[2])
			if err != nil {
				return ""
			}
			return suggest("Did you mean the enum value", typed, enumValues(s, m[1]))
		},
	},
}

// suggest is gqlparser's hint: the options within edit distance of typed, nearest first.
// The edit distance is at least the difference in length, so options that cannot be within
// gqlparser's threshold (40% of typed's length, plus one) are left out before it compares
// each remaining one with typed.
func suggest(prefix, typed string, options []string) string {
	threshold := len(typed)*2/5 + 1
	n := utf8.RuneCountInString(typed)
	var near []string
	for _, o := range options {
		if d := n - utf8.RuneCountInString(o); d <= threshold && -d <= threshold {
			near = append(near, o)
		}
	}
	if found := core.SuggestionList(typed, near); len(found) > 0 {
		return " " + prefix + " " + core.QuotedOrList(found...) + "?"
	}
	return ""
}

func fieldNames(fields ast.FieldList) []string {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.Name
	}
	return names
}

func argumentNames(args ast.ArgumentDefinitionList) []string {
	names := make([]string, len(args))
	for i, a := range args {
		names[i] = a.Name
	}
	return names
}

// enumValues names the values of the enum a type reference ("[ShopOrderField!]!") names.
func enumValues(s *ast.Schema, typeRef string) []string {
	def := s.Types[strings.Trim(typeRef, "[]!")]
	if def == nil || def.Kind != ast.Enum {
		return nil
	}
	names := make([]string, len(def.EnumValues))
	for i, v := range def.EnumValues {
		names[i] = v.Name
	}
	return names
}
