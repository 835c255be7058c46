// Package seckill will own the flash-sale flow: atomic Lua admission, asynchronous order
// persistence through a Redis Stream consumer group, recovery and reconciliation.
//
// Not implemented yet: it is tracked as issue 5. Nothing imports it.
package seckill
