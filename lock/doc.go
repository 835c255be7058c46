// Package lock will hold Redis distributed locks in the Redisson tradition: owner tokens with
// Lua release, reentrancy, pub/sub wake-up, a watchdog, fencing tokens and multi-locks.
//
// Not implemented yet: it is tracked as issue 4. Nothing imports it.
package lock
