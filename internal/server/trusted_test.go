package server

import "testing"

func TestParseTrustedDocuments(t *testing.T) {
	for name, c := range map[string]struct {
		manifest string
		ids      []string
	}{
		"client preset": {`{"sha256:a1b2": "query A { shopTypes { id } }", "c3d4": "{ me { id } }"}`, []string{"sha256:a1b2", "a1b2", "c3d4", "sha256:c3d4"}},
		"apollo": {`{"format": "apollo-persisted-query-manifest", "version": 1, "operations": [
			{"id": "x", "name": "A", "type": "query", "body": "query A { shopTypes { id } }"}]}`, []string{"x"}},
		"not JSON":        {`[1, 2]`, nil},
		"empty":           {`{}`, nil},
		"does not parse":  {`{"a": "query {"}`, nil},
		"apollo version2": {`{"format": "apollo-persisted-query-manifest", "version": 2, "operations": []}`, nil},
	} {
		docs, err := ParseTrustedDocuments([]byte(c.manifest))
		if c.ids == nil {
			if err == nil {
				t.Errorf("%s: accepted", name)
			}
			continue
		}
		if err != nil || docs.Len() == 0 {
			t.Errorf("%s: %v, %v", name, docs, err)
			continue
		}
		for _, id := range c.ids {
			doc, ok := docs.document(id)
			if !ok || !docs.holds(doc) || docs.holds(doc+" ") {
				t.Errorf("%s: document %q: %q %v", name, id, doc, ok)
			}
		}
	}
}
