package lock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/lua"
)

// The replica check (Options.ReplicaAcks).
//
// Redis replicates asynchronously: a master answers a script before any replica has its
// writes. If the master dies then and a replica that had not received them is promoted, the
// lock is gone from the new master while its holder's handle still says Valid, and the next
// caller obtains it too. WAIT n t, sent on the connection that ran the script, blocks until n
// replicas acknowledged every write of that connection (or t passes) and answers how many did:
// a lock write that n replicas have survives the failover to any of them.
//
// WAIT is keyless and applies to the connection it arrives on, so it must follow the script
// on the same connection of the node that owns the key: it goes in the same pipeline, sent to
// that node's own client. go-redis would send a keyless command in a Cluster pipeline to any
// master, and ClusterClient.Wait to any node; so on a Cluster each key's master client
// (MasterForKey) runs its scripts and a WAIT in one pipeline (one connection). A single node
// or a Sentinel failover client (*redis.Client) runs the pipeline as it is.

// ErrNotReplicated means fewer than Options.ReplicaAcks replicas acknowledged a lock write
// within the ReplicaTimeout (or the caller's deadline). An acquisition that was not
// acknowledged is undone (released on the master, with the owner check) and not returned: the
// caller may retry. A renewal that was not acknowledged makes the lock lost (the Cause of its
// Context wraps both ErrLockLost and ErrNotReplicated): the lease the replicas know is older
// than the one the master has, so after a failover the lock may expire before the handle's
// deadline.
var ErrNotReplicated = errors.New("lock: not acknowledged by enough replicas")

// checksReplicas says whether lock writes wait for replica acknowledgements.
func (c *Client) checksReplicas() bool { return c.opts.ReplicaAcks > 0 }

// checkReplicaClient panics on a client whose connections the check cannot address.
func checkReplicaClient(rdb redis.UniversalClient, o Options) {
	if o.ReplicaAcks <= 0 {
		return
	}
	switch rdb.(type) {
	case *redis.Client, *redis.ClusterClient:
	default:
		panic(fmt.Sprintf("lock: ReplicaAcks needs a *redis.Client (single node, Sentinel) or *redis.ClusterClient, not %T", rdb))
	}
}

// runOne runs call, which touches key, and returns its reply. With the replica check, a call
// that wrote (wrote(reply)) and was not acknowledged returns its reply with ErrNotReplicated.
func runOne[T any](ctx context.Context, c *Client, key string, call lua.Call[T], wrote func(T) bool) (T, error) {
	if !c.checksReplicas() {
		return call.Run(ctx, c.rdb)
	}
	r := runAll(ctx, c, []string{key}, func(int) lua.Call[T] { return call }, wrote)[0]
	return r.v, r.err
}

// runAll runs call(i), which touches keys[i], for every key, in one round trip per node.
// With the replica check and a wrote func, each node's pipeline ends in WAIT, and the calls
// that wrote on a node whose WAIT fell short carry ErrNotReplicated (with their reply); an
// operation with such calls counts once in the metrics. wrote nil: no WAIT (releases).
func runAll[T any](ctx context.Context, c *Client, keys []string, call func(i int) lua.Call[T], wrote func(T) bool) []result[T] {
	if !c.checksReplicas() || wrote == nil {
		return pipelineAll(ctx, c.rdb, call, len(keys))
	}
	res := make([]result[T], len(keys))
	nodes, err := mastersOf(ctx, c.rdb, keys)
	if err != nil {
		for i := range res {
			res[i].err = err
		}
		return res
	}
	var wg sync.WaitGroup
	for node, idx := range nodes {
		run := func() { runAcked(ctx, c, node, keys, idx, call, wrote, res) }
		if len(nodes) == 1 {
			run()
		} else {
			wg.Go(run) // the WAITs of several nodes overlap
		}
	}
	wg.Wait()
	for _, r := range res {
		if errors.Is(r.err, ErrNotReplicated) {
			c.reg.metrics.countNotReplicated()
			break
		}
	}
	return res
}

// mastersOf groups the indexes of keys by the client of the master that owns them.
func mastersOf(ctx context.Context, rdb redis.UniversalClient, keys []string) (map[*redis.Client][]int, error) {
	nodes := map[*redis.Client][]int{}
	switch rdb := rdb.(type) {
	case *redis.Client:
		for i := range keys {
			nodes[rdb] = append(nodes[rdb], i)
		}
	case *redis.ClusterClient:
		for i, k := range keys {
			node, err := rdb.MasterForKey(ctx, k)
			if err != nil {
				return nil, err
			}
			nodes[node] = append(nodes[node], i)
		}
	}
	return nodes, nil
}

// runAcked runs the calls idx on node in one pipeline that ends in WAIT, and stores their
// results in res. Calls that met NOSCRIPT (they did not run) are sent again with EVAL, in a
// second pipeline with a WAIT of its own. So the first call of a script on a node (a fresh
// node, a replica just promoted) sends two WAITs: when too few replicas answer, it takes two
// ReplicaTimeouts (within the caller's deadline) before ErrNotReplicated.
func runAcked[T any](ctx context.Context, c *Client, node *redis.Client, keys []string, idx []int,
	call func(i int) lua.Call[T], wrote func(T) bool, res []result[T]) {
	want := int64(c.opts.ReplicaAcks)
	timeout := c.waitTimeout(ctx, node)
	pending := make([]*lua.Pending[T], len(idx))
	waits := make([]*redis.IntCmd, len(idx))
	round := func(which []int, queue func(j int, p redis.Pipeliner) *lua.Pending[T]) {
		var wait *redis.IntCmd
		_, _ = node.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, j := range which {
				pending[j] = queue(j, p)
			}
			// Pipeliner has no Wait; WAIT numreplicas timeout-ms, as go-redis's Client.Wait sends it.
			wait = redis.NewIntCmd(ctx, "wait", want, timeout.Milliseconds())
			return p.Process(ctx, wait)
		})
		for _, j := range which {
			waits[j] = wait
		}
	}
	all := make([]int, len(idx))
	for j := range all {
		all[j] = j
	}
	round(all, func(j int, p redis.Pipeliner) *lua.Pending[T] { return call(idx[j]).Queue(ctx, p) })
	var redo []int
	for j, p := range pending {
		if p.NoScript() {
			redo = append(redo, j)
		}
	}
	if len(redo) > 0 {
		round(redo, func(j int, p redis.Pipeliner) *lua.Pending[T] { return pending[j].Call().QueueEval(ctx, p) })
	}
	for j, i := range idx {
		v, err := pending[j].Result()
		if err == nil && wrote(v) {
			acks, werr := waits[j].Result()
			switch {
			case werr != nil:
				err = fmt.Errorf("%w: %s: WAIT: %w", ErrNotReplicated, keys[i], werr)
			case acks < want:
				err = fmt.Errorf("%w: %s: %d of %d replicas within %v", ErrNotReplicated, keys[i], acks, want, timeout)
			}
		}
		if cc, ok := c.rdb.(*redis.ClusterClient); ok && isRedirect(err) {
			cc.ReloadState(ctx) // the slot moved (a failover, a reshard): learn where
		}
		res[i] = result[T]{v, err}
	}
}

// isRedirect reports a Cluster redirection: the node no longer serves the slot, and the call
// did not run.
func isRedirect(err error) bool {
	return redis.HasErrorPrefix(err, "MOVED") || redis.HasErrorPrefix(err, "ASK")
}

// waitSlack is how much later than its timeout WAIT may answer: Redis checks the timeouts of
// blocked clients on its cron, every 1000/hz ms (100 ms at the default hz 10).
const waitSlack = 110 * time.Millisecond

// waitTimeout is WAIT's timeout on node: ReplicaTimeout, cut to what is left of ctx less
// waitSlack (WAIT blocks in Redis: it must not hold the connection after the caller has gone,
// and its answer should reach the caller in time), and to half of the client's ReadTimeout (a
// pipeline is read under ReadTimeout whatever its commands; WAIT must answer first). At least
// 1 ms: WAIT 0 would block for ever.
func (c *Client) waitTimeout(ctx context.Context, node *redis.Client) time.Duration {
	t := c.opts.ReplicaTimeout
	if d, ok := ctx.Deadline(); ok {
		t = min(t, time.Until(d)-waitSlack)
	}
	if rt := node.Options().ReadTimeout; rt > 0 {
		t = min(t, rt/2)
	}
	return max(t, time.Millisecond)
}
