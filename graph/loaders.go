package graph

import (
	"context"
	"errors"
	"time"

	"github.com/vikstrous/dataloadgen"

	"github.com/surgekit/surge/ent"
)

// loaderWait is how long a loader gathers keys before it fetches them: gqlgen resolves the
// root fields of a query concurrently, so aliases of shop(id:) or voucher(id:) arrive within
// it and cost one fetch.
const loaderWait = 500 * time.Microsecond

// loaders batch the lookups by id of one operation.
type loaders struct {
	shops    *dataloadgen.Loader[int, *ent.Shop]
	vouchers *dataloadgen.Loader[int, *ent.Voucher]
}

type loadersKey struct{}

// WithLoaders returns ctx carrying fresh loaders for one operation (the server installs them
// around every operation; they cache what they loaded until the operation ends).
func (r *Resolver) WithLoaders(ctx context.Context) context.Context {
	wait := dataloadgen.WithWait(loaderWait)
	return context.WithValue(ctx, loadersKey{}, &loaders{
		shops:    dataloadgen.NewMappedLoader(r.Catalog.Shops, wait),
		vouchers: dataloadgen.NewMappedLoader(r.Catalog.Vouchers, wait),
	})
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
	v, err := pick(l).Load(ctx, id)
	if errors.Is(err, dataloadgen.ErrNotFound) {
		var none V
		return none, nil
	}
	return v, err
}
