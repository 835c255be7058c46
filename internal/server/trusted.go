package server

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
)

// TrustedDocuments are the only operations a server in trusted-documents mode runs: the
// persisted documents of its clients' builds, by id.
type TrustedDocuments struct {
	byID   map[string]string
	byText map[[sha256.Size]byte]bool
}

// apolloManifestFormat names the manifest of Apollo's generate-persisted-query-manifest.
const apolloManifestFormat = "apollo-persisted-query-manifest"

// LoadTrustedDocuments reads a manifest file (see ParseTrustedDocuments).
func LoadTrustedDocuments(path string) (*TrustedDocuments, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("trusted documents: %w", err)
	}
	docs, err := ParseTrustedDocuments(data)
	if err != nil {
		return nil, fmt.Errorf("trusted documents %s: %w", path, err)
	}
	return docs, nil
}

// ParseTrustedDocuments reads a manifest in either format clients' build tools write:
//   - a JSON object of id → document, as GraphQL Codegen's client preset
//     (persisted-documents.json, ids the documents' SHA-256) and Relay's persisted queries
//     (ids MD5 or the build's own) write it;
//   - Apollo's persisted query manifest, {"format": "apollo-persisted-query-manifest",
//     "version": 1, "operations": [{"id", "name", "type", "body"}]}.
//
// Every document must parse; ids are taken as they are.
func ParseTrustedDocuments(data []byte) (*TrustedDocuments, error) {
	byID, err := manifestDocuments(data)
	if err != nil {
		return nil, err
	}
	if len(byID) == 0 {
		return nil, errors.New("the manifest holds no document")
	}
	t := &TrustedDocuments{byID: byID, byText: make(map[[sha256.Size]byte]bool, len(byID))}
	for id, doc := range byID {
		if _, err := parser.ParseQuery(&ast.Source{Input: doc}); err != nil {
			return nil, fmt.Errorf("document %q does not parse: %w", id, err)
		}
		t.byText[sha256.Sum256([]byte(doc))] = true
	}
	return t, nil
}

func manifestDocuments(data []byte) (map[string]string, error) {
	var apollo struct {
		Format     string `json:"format"`
		Version    int    `json:"version"`
		Operations []struct {
			ID   string `json:"id"`
			Body string `json:"body"`
		} `json:"operations"`
	}
	if json.Unmarshal(data, &apollo) == nil && apollo.Format == apolloManifestFormat {
		if apollo.Version != 1 {
			return nil, fmt.Errorf("%s version %d: want 1", apolloManifestFormat, apollo.Version)
		}
		byID := make(map[string]string, len(apollo.Operations))
		for _, op := range apollo.Operations {
			byID[op.ID] = op.Body
		}
		return byID, nil
	}
	var byID map[string]string
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&byID); err != nil {
		return nil, fmt.Errorf(`want a JSON object of id → document, or an %s: %w`, apolloManifestFormat, err)
	}
	return byID, nil
}

// Len is the number of documents.
func (t *TrustedDocuments) Len() int { return len(t.byID) }

// sha256Prefix marks a SHA-256 id in GraphQL over HTTP's persisted documents: GraphQL
// Codegen's client preset writes and sends its ids so, Apollo's link sends the bare hex.
const sha256Prefix = "sha256:"

// document returns the document of id, which may carry sha256Prefix or not whichever way
// the manifest writes it.
func (t *TrustedDocuments) document(id string) (string, bool) {
	if doc, ok := t.byID[id]; ok {
		return doc, true
	}
	if bare, prefixed := strings.CutPrefix(id, sha256Prefix); prefixed {
		doc, ok := t.byID[bare]
		return doc, ok
	}
	doc, ok := t.byID[sha256Prefix+id]
	return doc, ok
}

// holds reports whether doc is, to the byte, one of the documents.
func (t *TrustedDocuments) holds(doc string) bool { return t.byText[sha256.Sum256([]byte(doc))] }
