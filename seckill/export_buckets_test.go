package seckill

// HomeBucket is homeBucket for tests: the bucket holding a user's buyer record among k.
var HomeBucket = homeBucket
