package lua

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// script is one embedded script with the parser of its reply: the only way this package's
// wrappers run a script, so that no reply is read unchecked.
type script[T any] struct {
	name  string
	s     *redis.Script
	parse func(reply any) (T, bool) // false: a reply the script never gives
}

func newScript[T any](parse func(any) (T, bool), names ...string) script[T] {
	return script[T]{name: names[len(names)-1], s: load(names...), parse: parse}
}

// call binds a script to its keys and arguments.
func (s script[T]) call(keys []string, args ...any) Call[T] {
	return Call[T]{s: s, keys: keys, args: args}
}

// read parses a reply (or passes its error on).
func (s script[T]) read(reply any, err error) (T, error) {
	var zero T
	if err != nil {
		return zero, err
	}
	v, ok := s.parse(reply)
	if !ok {
		return zero, malformed(s.name, reply)
	}
	return v, nil
}

// Call is one script call with its keys and arguments, built by the wrapper of its script
// (CacheLease, LockObtain...). Run it, or queue it on a pipeline and read it afterwards.
type Call[T any] struct {
	s    script[T]
	keys []string
	args []any
	ro   bool // a read-only script: EVAL_RO, which replicas run too
}

// Run runs the call (EVALSHA, then EVAL if Redis does not have the script) and parses its
// reply; a reply the script never gives is ErrMalformedReply.
func (c Call[T]) Run(ctx context.Context, rdb redis.Scripter) (T, error) {
	if c.ro {
		return c.s.read(c.s.s.RunRO(ctx, rdb, c.keys, c.args...).Result())
	}
	return c.s.read(c.s.s.Run(ctx, rdb, c.keys, c.args...).Result())
}

// Queue queues the call on a pipeline by EVALSHA (the script's hash only). A Redis that
// does not have the script answers NOSCRIPT without running anything: see Pending.NoScript.
func (c Call[T]) Queue(ctx context.Context, p redis.Pipeliner) *Pending[T] {
	if c.ro {
		return &Pending[T]{c: c, cmd: c.s.s.EvalShaRO(ctx, p, c.keys, c.args...)}
	}
	return &Pending[T]{c: c, cmd: c.s.s.EvalSha(ctx, p, c.keys, c.args...)}
}

// QueueEval queues the call on a pipeline by EVAL (the whole script).
func (c Call[T]) QueueEval(ctx context.Context, p redis.Pipeliner) *Pending[T] {
	if c.ro {
		return &Pending[T]{c: c, cmd: c.s.s.EvalRO(ctx, p, c.keys, c.args...)}
	}
	return &Pending[T]{c: c, cmd: c.s.s.Eval(ctx, p, c.keys, c.args...)}
}

// Load loads the script into rdb's script cache and returns its SHA1, for tools that send
// EVALSHA themselves.
func (c Call[T]) Load(ctx context.Context, rdb redis.Scripter) (string, error) {
	return c.s.s.Load(ctx, rdb).Result()
}

// Pending is a queued call; read it once its pipeline ran.
type Pending[T any] struct {
	c   Call[T]
	cmd *redis.Cmd
}

// Result parses the reply.
func (p *Pending[T]) Result() (T, error) { return p.c.s.read(p.cmd.Result()) }

// NoScript says Redis did not have the script (a Queue on a node that never saw it): it ran
// nothing, and the call can be sent again with QueueEval.
func (p *Pending[T]) NoScript() bool { return redis.HasErrorPrefix(p.cmd.Err(), "NOSCRIPT") }

// Call is the call that was queued.
func (p *Pending[T]) Call() Call[T] { return p.c }

// Parsers shared by the wrappers.

// parseFlag reads a 1/0 reply.
func parseFlag(reply any) (bool, bool) {
	n, ok := reply.(int64)
	return n == 1, ok && (n == 0 || n == 1)
}

// parseOne reads the constant 1 of scripts that cannot refuse.
func parseOne(reply any) (struct{}, bool) {
	n, ok := reply.(int64)
	return struct{}{}, ok && n == 1
}

// parseInt reads an integer reply.
func parseInt(reply any) (int64, bool) {
	n, ok := reply.(int64)
	return n, ok
}

// ints reads an array of exactly n integers (n < 0: any length).
func ints(reply any, n int) ([]int64, bool) {
	r, ok := reply.([]any)
	if !ok || (n >= 0 && len(r) != n) {
		return nil, false
	}
	out := make([]int64, len(r))
	for i, v := range r {
		if out[i], ok = v.(int64); !ok {
			return nil, false
		}
	}
	return out, true
}

// Hash is the script's SHA1 (what EVALSHA sends).
func (c Call[T]) Hash() string { return c.s.s.Hash() }
