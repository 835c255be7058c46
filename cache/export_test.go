package cache

// Waiters is how many ids have goroutines registered for their next event (tests only).
func Waiters[V any](c *Cache[V]) int { return c.events.pending() }
