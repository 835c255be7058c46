package server

import (
	"bytes"
	"context"
	"net/http"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// httpRequest is what one HTTP request carries: one operation, or a batch of them.
type httpRequest struct {
	ops   []*httpParams
	batch bool
}

// isBatch reports whether a body is a JSON array: a batch of operations.
func isBatch(body []byte) bool {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	return len(trimmed) > 0 && trimmed[0] == '['
}

// decodeBatch reads a batch: a JSON array of request objects, bounded like maxBatch bodies.
// A refusal of the whole batch (batching off, too many operations) is answered to each of its
// operations, so that a batching client shows it for each; an operation without a query
// answers BAD_REQUEST in its place while the others run.
func (t httpTransport) decodeBatch(body []byte, h http.Header) (*httpRequest, *requestError) {
	ops := max(t.maxBatch, 1)
	maxValues := ops*(t.limits.MaxTokens+envelopeValues) + 1
	s := newJSONScan(body, "the batch", maxValues, t.limits.MaxNesting+envelopeDepth+1)
	defer s.close()
	batch, ok := s.batch()
	if err := s.end(); err != nil {
		return nil, err
	}
	if !ok {
		return nil, badRequest(http.StatusBadRequest, "a batch must be a JSON array of request objects")
	}
	var refusal *requestError
	switch {
	case len(batch) == 0:
		return nil, badRequest(http.StatusBadRequest, "the batch is empty")
	case t.maxBatch == 0:
		refusal = badRequest(http.StatusBadRequest, "batched requests (a JSON array of operations) are off on this server: send one operation per request, or ask its operators for SURGE_BATCH_MAX")
	case len(batch) > t.maxBatch:
		refusal = badRequest(http.StatusBadRequest, "a batch may hold %d operations at most, this one holds %d", t.maxBatch, len(batch))
	}
	if refusal != nil {
		refusal.batch = len(batch)
		return nil, refusal
	}
	for i, p := range batch {
		if p == nil {
			batch[i] = &httpParams{invalid: badRequest(http.StatusBadRequest, "each operation of a batch must be a JSON object")}
		} else if err := p.check(h); err != nil {
			p.invalid = err
		}
	}
	return &httpRequest{ops: batch, batch: true}, nil
}

// doBatch runs the operations of a batch one after the other, under the request's deadline
// and one shared budget (batchLimits), and answers a JSON array of their responses, in order,
// with status 200: each response says how its operation went.
func (t httpTransport) doBatch(ctx context.Context, w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor, media string, ops []*httpParams) {
	ctx = context.WithValue(ctx, batchBudgetKey{}, &batchBudget{})
	out := make([]any, len(ops))
	for i, p := range ops {
		if p.invalid != nil {
			out[i] = requestErrors(exec.DispatchError(ctx, gqlerror.List{p.invalid.err}))
			continue
		}
		_, out[i] = t.execute(ctx, w, r, exec, media, p)
	}
	writeResponse(w, media, http.StatusOK, out)
}

// batchBudget is what the operations of one batch have used so far.
type batchBudget struct {
	complexity  int
	sideEffects []string
}

type batchBudgetKey struct{}

// batchLimits makes a batch count as one request: its operations share the complexity
// budget, and together run one @sideEffect mutation at most, so that batching multiplies
// neither the work nor the SMS one request may cause. It runs after the per-operation limits.
type batchLimits struct{ maxComplexity int }

var _ interface {
	graphql.HandlerExtension
	graphql.OperationContextMutator
} = batchLimits{}

func (batchLimits) ExtensionName() string                          { return "BatchLimits" }
func (batchLimits) Validate(schema graphql.ExecutableSchema) error { return nil }

func (l batchLimits) MutateOperationContext(ctx context.Context, op *graphql.OperationContext) *gqlerror.Error {
	b, ok := ctx.Value(batchBudgetKey{}).(*batchBudget)
	if !ok {
		return nil
	}
	cost := 0
	if stats := extension.GetComplexityStats(ctx); stats != nil {
		cost = stats.Complexity
	}
	if b.complexity+cost > l.maxComplexity {
		err := gqlerror.Errorf("the operations of this batch exceed the complexity limit of %d together: this one costs %d, %d was left",
			l.maxComplexity, cost, l.maxComplexity-b.complexity)
		errcode.Set(err, CodeComplexityLimit)
		return err
	}
	var effects []string
	if op.Operation.Operation == ast.Mutation {
		effects = sideEffects(op.Operation.SelectionSet, nil)
	}
	if len(b.sideEffects)+len(effects) > 1 {
		err := gqlerror.Errorf("a batch may run one @sideEffect mutation at most, this one adds %s to %s",
			truncate(strings.Join(effects, ", "), maxNamesInMessage), truncate(strings.Join(b.sideEffects, ", "), maxNamesInMessage))
		errcode.Set(err, errcode.ValidationFailed)
		return err
	}
	b.complexity += cost
	b.sideEffects = append(b.sideEffects, effects...)
	return nil
}

// maxNamesInMessage bounds a list of field names quoted in a refusal.
const maxNamesInMessage = 64
