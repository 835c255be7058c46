package seckill

// HomeBucket is homeBucket for tests: the bucket holding a user's buyer record among k.
var HomeBucket = homeBucket

// SetBeforeBucketCommitHook makes hook run before a warm commits each bucket of a voucher
// with buckets (bucket: its index), until restore.
func SetBeforeBucketCommitHook(hook func(bucket int)) (restore func()) {
	testHookBeforeBucketCommit = hook
	return func() { testHookBeforeBucketCommit = nil }
}
