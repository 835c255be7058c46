package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// Codes of persisted operations. The first two, and their messages, are the ones Apollo
// Client's PersistedQueryLink acts on: it resends the query in full after NOT_FOUND, and stops
// sending hashes after NOT_SUPPORTED. The last two are Apollo Router's for safelisting.
const (
	CodePersistedQueryNotFound     = "PERSISTED_QUERY_NOT_FOUND"
	CodePersistedQueryNotSupported = "PERSISTED_QUERY_NOT_SUPPORTED"
	CodePersistedQueryNotInList    = "PERSISTED_QUERY_NOT_IN_LIST"
	CodeQueryNotInSafelist         = "QUERY_NOT_IN_SAFELIST"
)

func init() {
	for _, code := range []string{CodePersistedQueryNotFound, CodePersistedQueryNotSupported, CodePersistedQueryNotInList, CodeQueryNotInSafelist} {
		errcode.RegisterErrorType(code, errcode.KindProtocol)
	}
}

// PersistedQueries configures operations sent by id instead of text.
type PersistedQueries struct {
	// APQ stores automatic persisted queries (Apollo's protocol: a hash first, the query
	// with its hash when the server does not know it). Nil: refused with
	// PERSISTED_QUERY_NOT_SUPPORTED, and Apollo's link falls back to plain queries.
	APQ *APQStore
	// Trusted, when set, is the only operations the server runs: by id
	// (extensions.persistedQuery.sha256Hash, or documentId) or by their exact text. Anything
	// else is refused (PERSISTED_QUERY_NOT_IN_LIST, QUERY_NOT_IN_SAFELIST); APQ is off.
	Trusted *TrustedDocuments
}

// apqVersion is the only version of Apollo's persistedQuery extension.
const apqVersion = 1

// persistedLookup turns an operation sent by id into its document, before the document
// limits, parsing and validation, over HTTP and WebSocket alike. A query sent with its hash
// (APQ) is checked against it and left to persistedRegister, which stores it once it has
// passed every check.
type persistedLookup struct {
	PersistedQueries
}

// persistedRegister stores the document of an APQ registration (a query sent with its
// hash) once validation and the server's limits have accepted it, so that documents that
// cannot run are never stored. A mutation sent by GET (refused with 405) is not stored.
type persistedRegister struct {
	store *APQStore
	log   *slog.Logger
}

var (
	_ interface {
		graphql.HandlerExtension
		graphql.OperationParameterMutator
	} = persistedLookup{}
	_ interface {
		graphql.HandlerExtension
		graphql.OperationContextMutator
	} = persistedRegister{}
)

func (persistedLookup) ExtensionName() string                            { return "PersistedLookup" }
func (persistedLookup) Validate(graphql.ExecutableSchema) error          { return nil }
func (persistedRegister) ExtensionName() string                          { return "PersistedRegister" }
func (persistedRegister) Validate(schema graphql.ExecutableSchema) error { return nil }

// apqRegistration is what persistedLookup leaves for persistedRegister in the operation's
// stats: the hash of a query to store.
type apqRegistration struct{ hash string }

const apqRegistrationStats = "APQRegistration"

// documentIDKey carries the documentId of an HTTP request (GraphQL over HTTP's persisted
// documents) from the transport.
type documentIDKey struct{}

// overGETKey marks operations that came by GET.
type overGETKey struct{}

func (l persistedLookup) MutateOperationParameters(ctx context.Context, p *graphql.RawParams) *gqlerror.Error {
	documentID, _ := ctx.Value(documentIDKey{}).(string)
	hash, err := l.apqHash(p)
	if err != nil {
		return err
	}
	if l.Trusted != nil {
		return l.trusted(p, documentID, hash)
	}
	switch {
	case documentID != "":
		return badRequestError("documentId needs a server with trusted documents (SURGE_TRUSTED_DOCUMENTS); send the query, or extensions.persistedQuery")
	case hash == "":
		return nil
	case l.APQ == nil:
		return persistedError("PersistedQueryNotSupported", CodePersistedQueryNotSupported)
	case p.Query != "":
		if sha256Hex(p.Query) != hash {
			return badRequestError("extensions.persistedQuery.sha256Hash is not the SHA-256 of the query")
		}
		graphql.GetOperationContext(ctx).Stats.SetExtension(apqRegistrationStats, &apqRegistration{hash: hash})
		return nil
	}
	// A store that cannot answer is a miss: the client sends the query in full, which runs.
	doc, ok, _ := l.APQ.Get(ctx, hash)
	if !ok {
		return persistedError("PersistedQueryNotFound", CodePersistedQueryNotFound)
	}
	p.Query = doc
	return nil
}

// trusted resolves an operation in trusted-documents mode: text only if it is a document of
// the manifest, ids only of the manifest.
func (l persistedLookup) trusted(p *graphql.RawParams, documentID, hash string) *gqlerror.Error {
	if p.Query != "" {
		if !l.Trusted.holds(p.Query) {
			return persistedError("this server runs only its trusted documents: send the operation's id (extensions.persistedQuery.sha256Hash or documentId), not its text",
				CodeQueryNotInSafelist)
		}
		return nil
	}
	id := documentID
	if id == "" {
		id = hash
	}
	doc, ok := l.Trusted.document(id)
	if !ok {
		return persistedError("the operation "+truncate(id, maxIDInMessage)+" is not one of this server's trusted documents (a client of another release?)",
			CodePersistedQueryNotInList)
	}
	p.Query = doc
	return nil
}

// maxIDInMessage bounds the id quoted in a refusal: it is the client's.
const maxIDInMessage = 80

// apqHash reads extensions.persistedQuery: "" when absent.
func (l persistedLookup) apqHash(p *graphql.RawParams) (string, *gqlerror.Error) {
	raw, ok := p.Extensions["persistedQuery"]
	if !ok || raw == nil {
		return "", nil
	}
	pq, _ := raw.(map[string]any)
	hash, _ := pq["sha256Hash"].(string)
	if l.Trusted == nil { // an APQ hash is the query's SHA-256, with or without its prefix
		hash = strings.TrimPrefix(hash, sha256Prefix)
	}
	if hash == "" {
		return "", badRequestError("extensions.persistedQuery needs a sha256Hash and version 1")
	}
	// A json.Number or a float64, depending on the transport's decoder.
	if fmt.Sprint(pq["version"]) != strconv.Itoa(apqVersion) {
		return "", badRequestError("extensions.persistedQuery: only version 1 is supported")
	}
	return hash, nil
}

func persistedError(message, code string) *gqlerror.Error {
	err := &gqlerror.Error{Message: message}
	errcode.Set(err, code)
	return err
}

func sha256Hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func (r persistedRegister) MutateOperationContext(ctx context.Context, op *graphql.OperationContext) *gqlerror.Error {
	reg, ok := op.Stats.GetExtension(apqRegistrationStats).(*apqRegistration)
	if !ok || r.store == nil {
		return nil
	}
	if ctx.Value(overGETKey{}) != nil && op.Operation.Operation != ast.Query {
		return nil
	}
	switch err := r.store.Put(ctx, reg.hash, op.RawQuery); {
	case errors.Is(err, ErrAPQRateLimited):
		r.log.DebugContext(ctx, "persisted query not stored: over the registration limit; the client will send it in full again")
	case err != nil:
		r.log.WarnContext(ctx, "persisted query not stored: the client will send it in full again", "err", err)
	}
	return nil
}
