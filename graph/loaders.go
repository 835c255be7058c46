package graph

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vikstrous/dataloadgen"

	"github.com/surgekit/surge/ent"
	"github.com/surgekit/surge/graph/scalar"
)

// loaderWait bounds how long a loader waits for the lookups it expects (see WithLoaders)
// before it fetches what it has. rootLookups leaves out those that never come (an alias
// left out by @skip, an id the scalar refuses), so one comes late only when the CPUs are so
// busy that the resolvers' goroutines wait to run: with 40 aliases, four busy loops and
// -race on 2 cores, 2 ms split them into two fetches in 3 runs of 30, 10 ms in 1 of 30,
// 20 ms in none. A query whose lookups all arrive never waits it.
const loaderWait = 20 * time.Millisecond

// loaders batch the lookups by id of one operation. They are made on the operation's first
// lookup: most operations (a seckill grab, say) make none.
type loaders struct {
	once     sync.Once
	make     func() (*dataloadgen.Loader[int, *ent.Shop], *dataloadgen.Loader[int, *ent.Voucher])
	shops    *dataloadgen.Loader[int, *ent.Shop]
	vouchers *dataloadgen.Loader[int, *ent.Voucher]
}

func (l *loaders) ready() *loaders {
	l.once.Do(func() { l.shops, l.vouchers = l.make() })
	return l
}

type loadersKey struct{}

// WithLoaders returns ctx carrying fresh loaders for one operation (the server installs them
// around every operation; they cache what they loaded until the operation ends). Each loader
// knows from the operation how many distinct ids its root field asks for (all aliases of
// shop(id:), of voucher(id:)) and fetches as soon as they have all asked: gqlgen resolves
// root fields concurrently, so the aliases cost one fetch, with no timed wait for a single one.
func (r *Resolver) WithLoaders(ctx context.Context) context.Context {
	op := graphql.GetOperationContext(ctx)
	return context.WithValue(ctx, loadersKey{}, &loaders{make: func() (*dataloadgen.Loader[int, *ent.Shop], *dataloadgen.Loader[int, *ent.Voucher]) {
		lookups := rootLookups(op)
		options := func(field string) []dataloadgen.Option {
			return []dataloadgen.Option{dataloadgen.WithWait(loaderWait), dataloadgen.WithBatchCapacity(max(1, len(lookups[field])))}
		}
		return dataloadgen.NewMappedLoader(r.Catalog.Shops, options("shop")...), dataloadgen.NewMappedLoader(r.Catalog.Vouchers, options("voucher")...)
	}})
}

// rootLookups lists, per root field of a query (aliases and fragments included), the distinct
// ids it will look up: not those of fields that @skip or @include leave out, nor ids the ID
// scalar refuses (their fields fail before any lookup), since the loaders wait for every id
// listed.
func rootLookups(op *graphql.OperationContext) map[string]map[int]bool {
	out := map[string]map[int]bool{}
	if op.Operation == nil || op.Operation.Operation != ast.Query {
		return out
	}
	for _, f := range graphql.CollectFields(op, op.Operation.SelectionSet, []string{"Query"}) {
		raw, ok := f.ArgumentMap(op.Variables)["id"]
		if !ok {
			continue
		}
		id, err := scalar.UnmarshalID(raw)
		if err != nil {
			continue
		}
		if out[f.Name] == nil {
			out[f.Name] = map[int]bool{}
		}
		out[f.Name][id] = true
	}
	return out
}

// shopByID is a shop, or (nil, nil): batched with the operation's other shop lookups.
func (r *Resolver) shopByID(ctx context.Context, id int) (*ent.Shop, error) {
	return loadByID(ctx, id, func(l *loaders) *dataloadgen.Loader[int, *ent.Shop] { return l.shops }, r.Catalog.Shop)
}

// voucherByID is a voucher, or (nil, nil): batched with the operation's other voucher lookups.
func (r *Resolver) voucherByID(ctx context.Context, id int) (*ent.Voucher, error) {
	return loadByID(ctx, id, func(l *loaders) *dataloadgen.Loader[int, *ent.Voucher] { return l.vouchers }, r.Catalog.Voucher)
}

// loadByID loads id through the operation's loader (picked by pick) if there is one, else
// with one: (nil, nil) when id does not exist.
func loadByID[V any](ctx context.Context, id int, pick func(*loaders) *dataloadgen.Loader[int, V], one func(context.Context, int) (V, error)) (V, error) {
	l, ok := ctx.Value(loadersKey{}).(*loaders)
	if !ok {
		return one(ctx, id)
	}
	v, err := pick(l.ready()).Load(ctx, id)
	if errors.Is(err, dataloadgen.ErrNotFound) {
		var none V
		return none, nil
	}
	return v, err
}
