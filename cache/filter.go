package cache

import "context"

// Filter answers "definitely absent" (false) or "maybe present" (true) for an id. A Bloom
// filter on the read path turns lookups of ids that never existed into answers that touch
// neither Redis keys nor the database.
type Filter interface {
	Test(ctx context.Context, id string) (bool, error)
	TestMany(ctx context.Context, ids []string) ([]bool, error)
	Add(ctx context.Context, ids ...string) error
}
