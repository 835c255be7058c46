package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// CodeBadRequest is the code of an HTTP request that is not a GraphQL request: a wrong
// method, media type or body (unreadable JSON, a field of the wrong type, a duplicate key,
// too large). Its HTTP status says which (400, 405, 406, 413, 415).
const CodeBadRequest = "BAD_REQUEST"

func init() { errcode.RegisterErrorType(CodeBadRequest, errcode.KindProtocol) }

// Media types of GraphQL responses (GraphQL over HTTP).
const (
	mediaJSON            = "application/json"
	mediaGraphQLResponse = "application/graphql-response+json"
)

// httpTransport serves GraphQL over HTTP, GET and POST, as the GraphQL-over-HTTP spec
// describes, in place of gqlgen's transports:
//   - the response is application/graphql-response+json when the client accepts it, else
//     application/json (also for a missing Accept, */* and application/*), 406 if neither;
//   - a request that is no GraphQL request (method, media type, body) is refused with its 4xx
//     status and BAD_REQUEST, in either media type;
//   - a document that fails to parse or validate, or variables that fail to coerce, are 400
//     under application/graphql-response+json and 200 under application/json;
//   - request errors carry no data entry; an executed operation always does;
//   - the body is strict JSON: one object, UTF-8, no duplicate names, at most maxBody bytes
//     (413 also for a chunked body), query a string, variables and extensions objects;
//   - mutations over GET are 405 with Allow: POST.
type httpTransport struct {
	maxBody  int64
	limits   DocumentLimits
	maxBatch int // operations of a batch (a JSON array body); 0: batches refused
}

var _ graphql.Transport = httpTransport{}

func (httpTransport) Supports(r *http.Request) bool { return !isUpgrade(r) }

func (t httpTransport) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	ctx := r.Context()
	media, ok := negotiate(r.Header.Get("Accept"))
	if !ok {
		t.refuse(ctx, w, exec, mediaJSON, badRequest(http.StatusNotAcceptable, "accept application/graphql-response+json or application/json"))
		return
	}
	req, reqErr := t.params(w, r)
	if reqErr != nil {
		t.refuse(ctx, w, exec, media, reqErr)
		return
	}
	if req.batch {
		t.doBatch(ctx, w, r, exec, media, req.ops)
		return
	}
	status, body := t.execute(ctx, w, r, exec, media, req.ops[0])
	writeResponse(w, media, status, body)
}

// execute runs one operation and returns the status and body of its answer.
func (t httpTransport) execute(ctx context.Context, w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor, media string, p *httpParams) (int, any) {
	ctx = p.context(ctx, r)
	rc, errs := exec.CreateOperationContext(ctx, &p.RawParams)
	if errs != nil {
		return requestErrorStatus(media, errs), requestErrors(exec.DispatchError(graphql.WithOperationContext(ctx, rc), errs))
	}
	if r.Method == http.MethodGet && rc.Operation.Operation != ast.Query {
		w.Header().Set("Allow", http.MethodPost)
		e := badRequest(http.StatusMethodNotAllowed, "only queries may use GET; send mutations with POST")
		return e.status, requestErrors(exec.DispatchError(ctx, gqlerror.List{e.err}))
	}
	responses, ctx := exec.DispatchOperation(ctx, rc)
	return http.StatusOK, responses(ctx)
}

// requestErrorStatus is the status of GraphQL request errors (parse, validation, limits,
// persisted operations): 400 under application/graphql-response+json, 200 under the legacy
// application/json; BAD_REQUEST is 400 under both.
func requestErrorStatus(media string, errs gqlerror.List) int {
	if media == mediaGraphQLResponse {
		return http.StatusBadRequest
	}
	for _, err := range errs {
		if err.Extensions["code"] == CodeBadRequest {
			return http.StatusBadRequest
		}
	}
	return http.StatusOK
}

// httpParams is a GraphQL request over HTTP: gqlgen's parameters, and the documentId of
// GraphQL over HTTP's persisted documents.
type httpParams struct {
	graphql.RawParams
	DocumentID string        `json:"documentId"`
	invalid    *requestError // an operation of a batch refused on its own
}

// persisted reports whether the request names a persisted operation (by documentId or
// Apollo's extensions.persistedQuery), which may come without its query.
func (p *httpParams) persisted() bool {
	return p.DocumentID != "" || p.Extensions["persistedQuery"] != nil
}

// context hands what the operation's extensions need from the HTTP request: the documentId,
// and whether it came by GET (a mutation sent by GET is never stored as a persisted query).
func (p *httpParams) context(ctx context.Context, r *http.Request) context.Context {
	if p.DocumentID != "" {
		ctx = context.WithValue(ctx, documentIDKey{}, p.DocumentID)
	}
	if r.Method == http.MethodGet {
		ctx = context.WithValue(ctx, overGETKey{}, true)
	}
	return ctx
}

// requestError is a refusal before GraphQL: its HTTP status and a client-safe message.
type requestError struct {
	status int
	err    *gqlerror.Error
	batch  int // the refusal of a whole batch: answered once for each of its operations
}

func badRequest(status int, format string, args ...any) *requestError {
	return &requestError{status: status, err: badRequestError(format, args...)}
}

// badRequestError is a BAD_REQUEST error; found before execution, it is answered 400.
func badRequestError(format string, args ...any) *gqlerror.Error {
	err := gqlerror.Errorf(format, args...)
	errcode.Set(err, CodeBadRequest)
	return err
}

// refuse answers a request error (through the executor, so metrics and the presenter see it).
func (t httpTransport) refuse(ctx context.Context, w http.ResponseWriter, exec graphql.GraphExecutor, media string, e *requestError) {
	body := requestErrors(exec.DispatchError(ctx, gqlerror.List{e.err}))
	if e.batch == 0 {
		writeResponse(w, media, e.status, body)
		return
	}
	each := make([]any, e.batch)
	for i := range each {
		each[i] = body
	}
	writeResponse(w, media, e.status, each)
}

// requestErrors drops the data entry: a request that was not executed has none.
func requestErrors(resp *graphql.Response) any {
	return struct {
		Errors     gqlerror.List  `json:"errors"`
		Extensions map[string]any `json:"extensions,omitempty"`
	}{resp.Errors, resp.Extensions}
}

func writeResponse(w http.ResponseWriter, media string, status int, body any) {
	b, err := json.Marshal(body)
	if err != nil { // a resolver produced a value that JSON cannot hold: a server bug
		b, status = []byte(`{"errors":[{"message":"internal error","extensions":{"code":"INTERNAL"}}]}`), http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", media+"; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// negotiate picks the response media type from an Accept header: the acceptable one with the
// higher q, application/graphql-response+json on a tie; wildcards and a missing header mean
// application/json. ok is false when the client accepts neither.
func negotiate(accept string) (media string, ok bool) {
	if strings.TrimSpace(accept) == "" {
		return mediaJSON, true
	}
	best := map[string]float64{}
	for part := range strings.SplitSeq(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		q := 1.0
		if v, ok := params["q"]; ok {
			if q, err = strconv.ParseFloat(v, 64); err != nil {
				continue
			}
		}
		switch mt {
		case "*/*", "application/*":
			mt = mediaJSON
		case mediaJSON, mediaGraphQLResponse:
		default:
			continue
		}
		best[mt] = max(best[mt], q)
	}
	switch {
	case best[mediaGraphQLResponse] > 0 && best[mediaGraphQLResponse] >= best[mediaJSON]:
		return mediaGraphQLResponse, true
	case best[mediaJSON] > 0:
		return mediaJSON, true
	}
	return "", false
}

// params reads the GraphQL request of r: from the URL for GET, from the JSON body for POST.
func (t httpTransport) params(w http.ResponseWriter, r *http.Request) (*httpRequest, *requestError) {
	switch r.Method {
	case http.MethodGet:
		p, err := t.paramsFromURL(r)
		if err != nil {
			return nil, err
		}
		return &httpRequest{ops: []*httpParams{p}}, nil
	case http.MethodPost:
		return t.paramsFromBody(w, r)
	}
	w.Header().Set("Allow", "GET, POST")
	return nil, badRequest(http.StatusMethodNotAllowed, "use GET or POST")
}

func (t httpTransport) paramsFromURL(r *http.Request) (*httpParams, *requestError) {
	q := r.URL.Query()
	p := &httpParams{DocumentID: q.Get("documentId")}
	p.Query, p.OperationName, p.Headers = q.Get("query"), q.Get("operationName"), r.Header
	for name, dst := range map[string]*map[string]any{"variables": &p.Variables, "extensions": &p.Extensions} {
		if v := q.Get(name); v != "" {
			if err := t.decodeObject([]byte(v), name, dst); err != nil {
				return nil, err
			}
		}
	}
	if !q.Has("query") && !p.persisted() {
		return nil, badRequest(http.StatusBadRequest, "the query parameter is missing")
	}
	return p, nil
}

func (t httpTransport) paramsFromBody(w http.ResponseWriter, r *http.Request) (*httpRequest, *requestError) {
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != mediaJSON {
		return nil, badRequest(http.StatusUnsupportedMediaType, "send the request as application/json")
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return nil, badRequest(http.StatusUnsupportedMediaType, "send the request in UTF-8")
	}
	if r.ContentLength > t.maxBody {
		return nil, badRequest(http.StatusRequestEntityTooLarge, "the body exceeds %d bytes", t.maxBody)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, t.maxBody))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, badRequest(http.StatusRequestEntityTooLarge, "the body exceeds %d bytes", t.maxBody)
	case err != nil:
		return nil, badRequest(http.StatusBadRequest, "the body could not be read")
	case len(body) == 0:
		return nil, badRequest(http.StatusBadRequest, `the body is empty: send {"query": "..."}`)
	}
	if isBatch(body) {
		return t.decodeBatch(body, r.Header)
	}
	p, reqErr := t.decodeBody(body, r.Header)
	if reqErr != nil {
		return nil, reqErr
	}
	return &httpRequest{ops: []*httpParams{p}}, nil
}

// decodeBody parses {"query", "operationName", "variables", "extensions", "documentId"}
// strictly, in one pass (jsonScan): numbers kept as json.Number as gqlgen expects, a member of
// the wrong type refused. The query may be missing when the request names a persisted
// operation.
func (t httpTransport) decodeBody(body []byte, h http.Header) (*httpParams, *requestError) {
	s := t.scan(body, "the body")
	defer s.close()
	p, ok := s.params()
	if err := s.end(); err != nil {
		return nil, err
	}
	if !ok {
		return nil, badRequest(http.StatusBadRequest,
			`the body must be a JSON object: query a string, operationName a string or null, variables and extensions objects or null`)
	}
	if p == nil { // null: a request without members
		p = &httpParams{}
	}
	if err := p.check(h); err != nil {
		return nil, err
	}
	return p, nil
}

// check completes a decoded request: the query may be missing only when the request names a
// persisted operation.
func (p *httpParams) check(h http.Header) *requestError {
	if p.Query == "" && !p.persisted() {
		return badRequest(http.StatusBadRequest, "query is missing")
	}
	p.Headers = h
	return nil
}

// decodeObject decodes a JSON object (variables, extensions of a GET), numbers kept as
// json.Number as gqlgen expects.
func (t httpTransport) decodeObject(raw []byte, name string, dst *map[string]any) *requestError {
	s := t.scan(raw, name)
	defer s.close()
	m, ok := s.object()
	if err := s.end(); err != nil {
		return err
	}
	if !ok || m == nil {
		return badRequest(http.StatusBadRequest, "%s must be a JSON object or null", name)
	}
	*dst = m
	return nil
}

// The request's own JSON around variables and extensions: the body object and its four
// members.
const (
	envelopeValues = 5
	envelopeDepth  = 1
)

// scan reads a request's JSON within the document limits, with room for the request's
// envelope.
func (t httpTransport) scan(raw []byte, what string) *jsonScan {
	return newJSONScan(raw, what, t.limits.MaxTokens+envelopeValues, t.limits.MaxNesting+envelopeDepth)
}

// checkJSON refuses what a scan refuses (jsonScan), reading raw as one value of any type.
func (t httpTransport) checkJSON(raw []byte, what string) *requestError {
	s := t.scan(raw, what)
	defer s.close()
	s.skip()
	return s.end()
}
