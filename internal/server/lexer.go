package server

import "github.com/vektah/gqlparser/v2/gqlerror"

// scanDocument counts the lexical tokens of a GraphQL document and the nesting of its braces,
// brackets and parentheses, and measures its names, in one pass without allocating, and
// refuses it as soon as one passes its limit. It only measures: malformed input (an
// unterminated string, a stray character) is counted as it comes and left for the parser to
// report.
func scanDocument(src string, l DocumentLimits) *gqlerror.Error {
	tokens, depth := 0, 0
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',':
			i++
			continue
		case c == '#':
			i = skipComment(src, i)
			continue
		case c == 0xEF && len(src) > i+2 && src[i+1] == 0xBB && src[i+2] == 0xBF: // U+FEFF is ignored
			i += 3
			continue
		}
		if tokens++; tokens > l.MaxTokens {
			return tooLarge("the document has more than %d tokens", l.MaxTokens)
		}
		switch c {
		case '{', '[', '(':
			if depth++; depth > l.MaxNesting {
				return tooLarge("the document nests braces, brackets or parentheses more than %d deep", l.MaxNesting)
			}
			i++
		case '}', ']', ')':
			depth = max(depth-1, 0)
			i++
		case '"':
			i = skipString(src, i)
		case '.':
			i = skipRun(src, i, func(b byte) bool { return b == '.' }) // "..." is one token
		default:
			switch {
			case c == '-' || '0' <= c && c <= '9':
				i = skipRun(src, i, isNumberByte)
			case isNameByte(c):
				start := i
				if i = skipRun(src, i, isNameByte); i-start > l.MaxNameBytes {
					return tooLarge("the document has a name longer than %d bytes", l.MaxNameBytes)
				}
			default:
				i++ // other punctuation (! $ & : = @ |) or a stray byte
			}
		}
	}
	return nil
}

func isNameByte(b byte) bool {
	return b == '_' || 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9'
}

// isNumberByte covers a number's sign, digits, fraction and exponent (and the letters of a
// malformed one, which the parser reports).
func isNumberByte(b byte) bool { return b == '-' || b == '+' || b == '.' || isNameByte(b) }

func skipRun(src string, i int, in func(byte) bool) int {
	for i < len(src) && in(src[i]) {
		i++
	}
	return i
}

func skipComment(src string, i int) int {
	for i < len(src) && src[i] != '\n' && src[i] != '\r' {
		i++
	}
	return i
}

// skipString skips a "string" (escapes honoured, ended by a line break if unterminated) or a
// """block string""" (where \""" is an escaped quote triple).
func skipString(src string, i int) int {
	if len(src) >= i+3 && src[i:i+3] == `"""` {
		for i += 3; i < len(src); i++ {
			switch {
			case src[i] == '\\' && len(src) >= i+4 && src[i+1:i+4] == `"""`:
				i += 3
			case src[i] == '"' && len(src) >= i+3 && src[i:i+3] == `"""`:
				return i + 3
			}
		}
		return i
	}
	for i++; i < len(src); i++ {
		switch src[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		case '\n', '\r':
			return i
		}
	}
	return i
}
