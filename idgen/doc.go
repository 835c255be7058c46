// Package idgen will generate globally unique 64-bit ids from Redis: 31 bits of seconds since
// a fixed epoch and 32 bits of a per-day INCR sequence, plus a segment mode.
//
// Not implemented yet: it is tracked as issue 4. Nothing imports it.
package idgen
