package seckill

// AdmissionCalls is how many admission-script calls s's batcher has sent.
func AdmissionCalls(s *Service) int64 { return s.admission.batch.calls.Load() }

// AdmissionInlined is how many of them were sent from the grabbing goroutine.
func AdmissionInlined(s *Service) int64 { return s.admission.batch.inline.Count() }

// SetBackgroundStartHook makes hook run between a background warm's closed check and its start,
// until restore is called.
func SetBackgroundStartHook(hook func()) (restore func()) {
	testHookBackgroundStart = hook
	return func() { testHookBackgroundStart = nil }
}

// UserLockLease is the lease of the synchronous strategy's per-user lock.
const UserLockLease = userLockLease

// UserLockKeyPattern matches the Redis keys of the per-user locks of a Service with this prefix
// (the lock package's default key prefix).
func UserLockKeyPattern(prefix string) string { return "lock:{" + prefix + "-user:*" }

// SetBeforeWarmCommitHook makes hook run right before a warm commits to Redis, until restore.
func SetBeforeWarmCommitHook(hook func()) (restore func()) {
	testHookBeforeWarmCommit = hook
	return func() { testHookBeforeWarmCommit = nil }
}

// SetWarmHeldHook makes hook run right after a warm takes the voucher's row lock, until restore.
func SetWarmHeldHook(hook func()) (restore func()) {
	testHookWarmHeld = hook
	return func() { testHookWarmHeld = nil }
}

// ToldRemembered is how many orders s remembers as told and not yet known written (told.go).
func ToldRemembered(s *Service) int {
	s.told.mu.Lock()
	defer s.told.mu.Unlock()
	n := 0
	for _, v := range s.told.vouchers {
		n += v.len()
	}
	return n
}

// AnnounceChannel is the channel on which s announces new orders while it runs no consumer.
func AnnounceChannel(s *Service) string { return s.announce.channel }

// AnnounceGap is the least time between two announcements of a process.
const AnnounceGap = announceGap

// SetSweepAllHook makes the consumers' sweepers call hook whenever they sweep every live
// voucher at once; it returns the undo.
func SetSweepAllHook(hook func()) (restore func()) {
	testHookSweepAll = hook
	return func() { testHookSweepAll = nil }
}
