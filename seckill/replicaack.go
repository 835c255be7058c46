package seckill

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/lua"
)

// Replica-acknowledged admission (Options.ReplicaAcks). Redis replicates asynchronously: an
// order admitted on a master and told to its user is lost if the master dies before a replica
// has it and that replica is promoted. With ReplicaAcks = N, a grab is answered with an order
// (admitted, or already purchased) only once WAIT has reported that N replicas of the master
// that ran it hold it.
//
// WAIT counts the replicas that acknowledged every write of its own connection, so it must
// follow the scripts on their connection. Each pipeline of admission scripts therefore goes to
// one master (on a Cluster, one pipeline per master of the batch: go-redis would send a keyless
// WAIT to a node of its own choosing) and ends with a barrier write and WAIT:
//
//	EVALSHA grab … ; EVALSHA grab … ; SET <sale>:acked 1 PX 60000 ; WAIT N t
//
// The barrier makes the connection's replication offset the master's at that moment, so the
// WAIT also covers what other connections wrote before: the order an ALREADY_PURCHASED answer
// names (admitted by an earlier grab whose own WAIT came short), a grab the script answers
// again for a retry, and a pipeline go-redis re-sent on a fresh connection after a network
// error. A grab whose WAIT comes short is answered ErrReplicationTimeout and its admission
// stands: undoing it would race the consumer, which may be writing the order already, and
// an undo can itself be lost by the failover it guards against. Its user retries and is told
// the order (ALREADY_PURCHASED) once the replicas have it, or, if a failover lost it, is
// admitted afresh; no order told can be lost, and none is told before it is safe.
type replicaAcks struct {
	n       int           // replicas that must acknowledge
	timeout time.Duration // WAIT's bound (a grab's deadline bounds it further)
	rdb     redis.UniversalClient
	keys    keyspace
	m       *metrics
	waits   atomic.Int64 // WAITs sent (tests)
}

// ErrReplicationTimeout answers a grab that would have been told an order (admitted, or
// already purchased) when fewer than Options.ReplicaAcks replicas acknowledged it within
// Options.ReplicaAckTimeout. The order may stand: a retry names it (ErrAlreadyPurchased) once
// the replicas have it, or admits the user afresh if a failover lost it.
var ErrReplicationTimeout = &Refusal{reason: "replication_timeout",
	msg: "seckill: the grab was not confirmed by enough Redis replicas in time; retry (a retry names the order if it was taken)"}

// Bounds of the acknowledgements.
const (
	defaultReplicaAckTimeout = 500 * time.Millisecond
	// ackReplyMargin is left between WAIT's end and a grab's deadline for the reply to come back.
	ackReplyMargin = 5 * time.Millisecond
	// ackedKeyTTL keeps the barrier key, one per voucher (or stock bucket), for a minute
	// after the last batch.
	ackedKeyTTL = time.Minute
)

// newReplicaAcks is nil when the option is off.
func newReplicaAcks(o *Options, rdb redis.UniversalClient, keys keyspace, m *metrics) *replicaAcks {
	if o.ReplicaAcks == 0 {
		return nil
	}
	return &replicaAcks{n: o.ReplicaAcks, timeout: o.ReplicaAckTimeout, rdb: rdb, keys: keys, m: m}
}

// checkReplicaAcks checks the options against the client: WAIT must end before the client's
// read of the pipeline's replies does, or go-redis would cut the read and send the whole
// pipeline again.
func checkReplicaAcks(o *Options, rdb redis.UniversalClient) error {
	if o.ReplicaAcks == 0 {
		return nil
	}
	switch {
	case o.ReplicaAcks < 0:
		return fmt.Errorf("seckill: ReplicaAcks %d must not be negative", o.ReplicaAcks)
	case o.Strategy != StrategyLua:
		return fmt.Errorf("seckill: ReplicaAcks needs StrategyLua (%s admits in the database)", o.Strategy)
	case o.ReplicaAckTimeout < time.Millisecond:
		return fmt.Errorf("seckill: ReplicaAckTimeout %v must be at least 1ms (WAIT 0 would wait for ever)", o.ReplicaAckTimeout)
	}
	if _, ok := rdb.(*redis.Ring); ok {
		return errors.New("seckill: ReplicaAcks needs a single node, Sentinel or Cluster client, not a Ring")
	}
	if rt := readTimeoutOf(rdb); rt > 0 && o.ReplicaAckTimeout > rt/2 {
		return fmt.Errorf("seckill: ReplicaAckTimeout %v must be at most half the Redis client's ReadTimeout (%v)", o.ReplicaAckTimeout, rt)
	}
	return nil
}

// readTimeoutOf is the client's read timeout (its options hold go-redis's default when none
// was set), or 0 if it has none or is not known.
func readTimeoutOf(rdb redis.UniversalClient) time.Duration {
	switch c := rdb.(type) {
	case *redis.Client:
		return max(c.Options().ReadTimeout, 0)
	case *redis.ClusterClient:
		return max(c.Options().ReadTimeout, 0)
	}
	return 0
}

// ackNode sends a pipeline to one master, on one connection.
type ackNode interface {
	Pipeline() redis.Pipeliner
	redis.Scripter
}

// node is the client of the master holding a sale's keys (a voucher or a stock bucket).
func (r *replicaAcks) node(ctx context.Context, voucherID int) (ackNode, error) {
	c, ok := r.rdb.(*redis.ClusterClient)
	if !ok {
		return r.rdb, nil
	}
	return c.MasterForKey(ctx, r.keys.sale(voucherID).Stock)
}

// ackedKey is the barrier key of a sale, in its hash slot.
func (r *replicaAcks) ackedKey(voucherID int) string {
	return strings.TrimSuffix(r.keys.sale(voucherID).Meta, "meta") + "acked"
}

// waitFor is WAIT's bound for callers that wait until `until` (zero: no deadline).
func (r *replicaAcks) waitFor(until time.Time) time.Duration {
	d := r.timeout
	if !until.IsZero() {
		d = min(d, time.Until(until)-ackReplyMargin)
	}
	return max(d, time.Millisecond) // WAIT 0 waits for ever
}

// queue adds the barrier and WAIT to a pipeline bound for the master of voucherID's keys.
func (r *replicaAcks) queue(ctx context.Context, pipe redis.Pipeliner, voucherID int, wait time.Duration) *redis.Cmd {
	pipe.Set(ctx, r.ackedKey(voucherID), 1, ackedKeyTTL)
	r.waits.Add(1)
	return pipe.Do(ctx, "wait", r.n, wait.Milliseconds())
}

// result is nil if WAIT reported enough replicas, else ErrReplicationTimeout (counted).
func (r *replicaAcks) result(wait *redis.Cmd) error {
	n, err := wait.Int64()
	if err == nil && n >= int64(r.n) {
		return nil
	}
	r.m.unacked.Inc()
	if err != nil {
		return fmt.Errorf("%w: WAIT: %v", ErrReplicationTimeout, err)
	}
	return fmt.Errorf("%w: %d of %d replicas acknowledged", ErrReplicationTimeout, n, r.n)
}

// grabs runs admission-script calls, one pipeline per master with the barrier and WAIT at
// its end, and fills in each call's replies and error and whether its master's replicas
// acknowledged them (ackErr). until bounds the wait (zero: the option's bound alone).
func (r *replicaAcks) grabs(ctx context.Context, calls []*scriptCall, now, until time.Time) {
	var nodes []ackNode
	byNode := map[ackNode][]*scriptCall{}
	for _, c := range calls {
		n, err := r.node(ctx, c.voucher)
		if err != nil {
			c.err = err
			continue
		}
		if byNode[n] == nil {
			nodes = append(nodes, n)
		}
		byNode[n] = append(byNode[n], c)
	}
	wait := r.waitFor(until)
	if len(nodes) == 1 { // a single node, or every voucher of the batch on one master
		r.grabsOn(ctx, nodes[0], byNode[nodes[0]], now, wait)
		return
	}
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Go(func() { r.grabsOn(ctx, n, byNode[n], now, wait) })
	}
	wg.Wait()
}

// grabOne runs one grab in a call of its own, acknowledged as a batch is.
func (r *replicaAcks) grabOne(ctx context.Context, voucherID int, now time.Time, req lua.GrabRequest) (lua.GrabReply, error) {
	c := &scriptCall{voucher: voucherID, keys: r.keys.script(voucherID), reqs: []lua.GrabRequest{req}}
	r.grabs(ctx, []*scriptCall{c}, now, deadlineOf(ctx))
	return c.reply(0)
}

// grabsOn sends calls of one master in one pipeline, the barrier and WAIT last; once more
// where a MOVED reply sends them.
func (r *replicaAcks) grabsOn(ctx context.Context, node ackNode, calls []*scriptCall, now time.Time, wait time.Duration) {
	ackErr := r.sendOn(ctx, node, calls, now, wait)
	if to := r.redirected(ctx, calls); to != nil {
		ackErr = r.sendOn(ctx, to, calls, now, wait)
	}
	for _, c := range calls {
		c.ackErr = ackErr
	}
}

// sendOn sends calls to one master and fills in their replies and errors; it returns whether
// the master's replicas acknowledged them.
func (r *replicaAcks) sendOn(ctx context.Context, node ackNode, calls []*scriptCall, now time.Time, wait time.Duration) error {
	pipe := node.Pipeline()
	for _, c := range calls {
		c.sent = lua.QueueGrab(ctx, pipe, c.keys, now, c.reqs)
	}
	ack := r.queue(ctx, pipe, calls[0].voucher, wait)
	_, _ = pipe.Exec(ctx) // errors are in each command
	rerun := false
	for _, c := range calls {
		// A master without the script ran nothing of the call: it runs again now, after the
		// WAIT, which then needs another.
		rerun = rerun || c.sent.NoScript()
		c.replies, c.err = c.sent.Replies(ctx, node)
	}
	if rerun {
		return r.confirmOn(ctx, node, calls[0].voucher, wait)
	}
	return r.result(ack)
}

// redirected handles calls a Cluster's master failed. They went to the master's own client,
// not through the Cluster client, which would have followed a MOVED reply and read the slot
// map again after a failure: it is told to read it now. If every call was MOVED to one
// address (a failover or a resharding the slot map does not show yet), their scripts ran
// nothing, and redirected returns that master's client for a second try.
func (r *replicaAcks) redirected(ctx context.Context, calls []*scriptCall) ackNode {
	cc, ok := r.rdb.(*redis.ClusterClient)
	if !ok {
		return nil
	}
	to, failed, allMoved := "", false, true
	for _, c := range calls {
		if c.err == nil {
			allMoved = false
			continue
		}
		failed = true
		addr, moved := redis.IsMovedError(c.err)
		if !moved || (to != "" && addr != to) {
			allMoved = false
		}
		to = addr
	}
	if !failed {
		return nil
	}
	cc.ReloadState(ctx)
	if !allMoved {
		return nil
	}
	var mu sync.Mutex
	var found *redis.Client
	_ = cc.ForEachShard(ctx, func(_ context.Context, n *redis.Client) error {
		if n.Options().Addr == to {
			mu.Lock()
			found = n
			mu.Unlock()
		}
		return nil
	})
	if found == nil {
		return nil
	}
	return found
}

// confirm waits until the replicas of the masters of the given sales (vouchers or stock
// buckets) hold everything written to those masters before now: for answers made of several
// calls (a borrow between stock buckets) or naming an order another call wrote.
func (r *replicaAcks) confirm(ctx context.Context, until time.Time, sales ...int) error {
	var nodes []ackNode
	saleOf := map[ackNode]int{}
	for _, v := range sales {
		n, err := r.node(ctx, v)
		if err != nil {
			return err
		}
		if _, ok := saleOf[n]; !ok {
			nodes = append(nodes, n)
			saleOf[n] = v
		}
	}
	wait := r.waitFor(until)
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() { errs[i] = r.confirmOn(ctx, n, saleOf[n], wait) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// confirmOn sends the barrier and WAIT alone to one master.
func (r *replicaAcks) confirmOn(ctx context.Context, node ackNode, voucherID int, wait time.Duration) error {
	pipe := node.Pipeline()
	ack := r.queue(ctx, pipe, voucherID, wait)
	_, _ = pipe.Exec(ctx)
	return r.result(ack)
}

// tellsOrder reports whether an answer tells its user an order id.
func tellsOrder(o lua.GrabOutcome) bool {
	return o == lua.GrabAdmitted || o == lua.GrabAlreadyBuyer
}

// deadlineOf is ctx's deadline, or zero.
func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}
