package cache

// Waiters is how many ids have goroutines registered for their next event (tests only).
func Waiters[V any](c *Cache[V]) int { return c.events.pending() }

// L1Epoch is the invalidation count of id's L1 bucket (tests only).
func L1Epoch[V any](c *Cache[V], id string) uint64 { return c.l1.begin(id) }
