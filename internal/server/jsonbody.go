package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// jsonScan reads a request's JSON (a body, or the variables or extensions of a GET) in one pass
// of jsontext's decoder (strict RFC 8259, no allocation per token) that both decodes it and
// refuses what encoding/json would let through silently: invalid UTF-8 (replaced by U+FFFD),
// duplicate names (the last wins: a smuggled second "query"), more than one value, and JSON
// past the document limits in values or nesting. Member names match exactly: encoding/json
// also takes "Query" or "QUERY" for "query", a second query no duplicate check sees.
//
// The first refusal sticks: what follows it is not read, and a value read after it is
// meaningless. A value of the wrong type is not a refusal of the scan (the caller decides
// what it answers) and the scan goes on, so that a body both mistyped and too large is
// refused as too large, whichever comes first in it.
type jsonScan struct {
	dec                 *jsontext.Decoder
	what                string // "the body", "variables": the refusals name it
	values              int
	maxValues, maxDepth int
	err                 *requestError
}

// decoders recycles the scans' decoders (and their buffers) across requests.
var decoders = sync.Pool{New: func() any { return jsontext.NewDecoder(bytes.NewReader(nil)) }}

func newJSONScan(raw []byte, what string, maxValues, maxDepth int) *jsonScan {
	dec := decoders.Get().(*jsontext.Decoder)
	dec.Reset(bytes.NewReader(raw))
	return &jsonScan{dec: dec, what: what, maxValues: maxValues, maxDepth: maxDepth}
}

// close returns the decoder to the pool; the scan is done.
func (s *jsonScan) close() {
	s.dec.Reset(bytes.NewReader(nil)) // drops raw
	decoders.Put(s.dec)
	s.dec = nil
}

// token reads the next token; ok is false once the scan has refused the input.
func (s *jsonScan) token() (tok jsontext.Token, ok bool) {
	if s.err != nil {
		return tok, false
	}
	tok, err := s.dec.ReadToken()
	switch {
	case errors.Is(err, jsontext.ErrDuplicateName):
		s.err = badRequest(http.StatusBadRequest, "%s has a duplicate name in a JSON object", s.what)
	case err != nil:
		s.err = badRequest(http.StatusBadRequest, "%s is not valid JSON", s.what)
	case s.dec.StackDepth() > s.maxDepth:
		s.err = &requestError{status: http.StatusBadRequest, err: tooLarge("%s nests more than %d levels", s.what, s.maxDepth)}
	case isValue(s.dec, tok.Kind()):
		if s.values++; s.values > s.maxValues {
			s.err = &requestError{status: http.StatusBadRequest, err: tooLarge("%s has more than %d values", s.what, s.maxValues)}
		}
	}
	return tok, s.err == nil
}

// end checks that the value read was the input's only one, and returns the scan's refusal.
func (s *jsonScan) end() *requestError {
	if s.err != nil {
		return s.err
	}
	switch _, err := s.dec.ReadToken(); {
	case err == io.EOF:
	case err != nil:
		s.err = badRequest(http.StatusBadRequest, "%s is not valid JSON", s.what)
	default:
		s.err = badRequest(http.StatusBadRequest, "%s is more than one JSON value", s.what)
	}
	return s.err
}

// skip reads the next value and drops it.
func (s *jsonScan) skip() {
	if tok, ok := s.token(); ok && (tok.Kind() == '{' || tok.Kind() == '[') {
		s.skipRest()
	}
}

// value reads the next value as gqlgen's decoding of a request makes it: objects
// map[string]any, arrays []any, numbers json.Number.
func (s *jsonScan) value() any {
	tok, ok := s.token()
	if !ok {
		return nil
	}
	switch tok.Kind() {
	case 't', 'f':
		return tok.Bool()
	case '"':
		return tok.String()
	case '0':
		return json.Number(tok.String())
	case '{':
		m := map[string]any{}
		for s.dec.PeekKind() != '}' {
			name, ok := s.token()
			if !ok {
				return nil
			}
			m[name.String()] = s.value()
		}
		s.token()
		return m
	case '[':
		a := []any{}
		for s.dec.PeekKind() != ']' {
			a = append(a, s.value())
			if s.err != nil {
				return nil
			}
		}
		s.token()
		return a
	}
	return nil // null
}

// object reads an object or null (nil); ok is false for any other value.
func (s *jsonScan) object() (m map[string]any, ok bool) {
	switch v := s.value().(type) {
	case nil:
		return nil, true
	case map[string]any:
		return v, true
	}
	return nil, false
}

// str reads a string or null (""); ok is false for any other value.
func (s *jsonScan) str() (string, bool) {
	switch v := s.value().(type) {
	case nil:
		return "", true
	case string:
		return v, true
	}
	return "", false
}

// params reads a GraphQL request object: query, operationName and documentId strings or null,
// variables and extensions objects or null, other members ignored. null gives nil with ok;
// ok is false for any other value, and for a member of the wrong type.
func (s *jsonScan) params() (p *httpParams, ok bool) {
	tok, read := s.token()
	if !read {
		return nil, false
	}
	switch tok.Kind() {
	case 'n':
		return nil, true
	case '{':
	case '[':
		s.skipRest()
		return nil, false
	default:
		return nil, false
	}
	p, ok = &httpParams{}, true
	for s.dec.PeekKind() != '}' {
		name, read := s.token()
		if !read {
			return nil, false
		}
		good := true
		switch name.String() {
		case "query":
			p.Query, good = s.str()
		case "operationName":
			p.OperationName, good = s.str()
		case "documentId":
			p.DocumentID, good = s.str()
		case "variables":
			p.Variables, good = s.object()
		case "extensions":
			p.Extensions, good = s.object()
		default:
			s.skip()
		}
		ok = ok && good
	}
	if _, read = s.token(); !read || !ok {
		return nil, false
	}
	return p, true
}

// batch reads a JSON array of GraphQL request objects (params), a null one as nil; ok is
// false for any other value, or an operation that is neither an object nor null.
func (s *jsonScan) batch() (ops []*httpParams, ok bool) {
	tok, read := s.token()
	if !read || tok.Kind() != '[' {
		return nil, false
	}
	ok = true
	for s.dec.PeekKind() != ']' {
		p, good := s.params()
		if s.err != nil {
			return nil, false
		}
		ops, ok = append(ops, p), ok && good
	}
	s.token()
	return ops, ok
}

// skipRest reads the rest of the container just opened.
func (s *jsonScan) skipRest() {
	for depth, ok := s.dec.StackDepth()-1, true; ok && s.dec.StackDepth() > depth; {
		_, ok = s.token()
	}
}

// isValue tells a value's first token from an object's name and from closing delimiters.
func isValue(dec *jsontext.Decoder, k jsontext.Kind) bool {
	if k == '}' || k == ']' {
		return false
	}
	depth := dec.StackDepth()
	if k == '{' || k == '[' { // the container just opened: its parent decides
		depth--
	}
	kind, length := dec.StackIndex(depth)
	return kind != '{' || length%2 == 0 // in an object, names are the odd tokens
}
