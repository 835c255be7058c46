// Package redisfailover builds go-redis clients that follow a Redis failover within about a
// second of the promotion, on every topology: a single node, a Cluster with or without
// replicas, or a master and replicas watched by Sentinel.
//
// What go-redis v9 does by itself, and what this package adds:
//
//   - Cluster: a ClusterClient reloads its slot map on MOVED, on READONLY and, lazily, once
//     ClusterStateReloadInterval has passed (60 s by default since v9.22). A master that died
//     triggers none of these: its connections are refused, and calls go on dialling it until the
//     next timed reload (go-redis issue #3979). NewClient sets the interval to ReloadInterval, and
//     Follow reloads the slot map (in the background, at most one reload at a time) whenever a
//     node's dial fails or a command, pipeline or pub/sub connection on it meets a network
//     error or a role change (READONLY, MASTERDOWN, CLUSTERDOWN, LOADING).
//   - Sentinel: the failover client asks Sentinel for the master at each dial, drops its
//     command connections to the old master when Sentinel announces the switch, and closes a
//     connection that answers READONLY. Its pub/sub connections stay where they are: after a
//     coordinated failover (SENTINEL FAILOVER) the old master, up and still a master until
//     Sentinel demotes it some 10 s later, hears nothing published on the new one. Follow
//     closes them as soon as the client connects to the new master (switchHook).
//   - Every client: go-redis stops dialling an address after PoolSize failed dials and probes
//     it once a second; Follow hands it a connection that fails instead of a refused dial, so
//     that the next call dials again (refusedHook): the new master, or a node back, is used at
//     once.
//   - Every topology: go-redis dials a refused address 5 times, 100 ms apart, before a call
//     fails; NewClient dials once (DialerRetries 1), so a call on a node that is gone fails at
//     once and is retried on the new topology rather than waiting on the old one.
//
// Use NewClient where you would use redis.NewUniversalClient; a client built otherwise can be
// made to follow with Follow, right after it is built (ClusterStateReloadInterval has to be set
// in its options). The libraries of this module (cache, lock, idgen) take such a client as they
// take any other.
package redisfailover

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// ReloadInterval is how old a Cluster client's slot map may grow, with commands running,
// before one of them has it reloaded when no error asked for a reload sooner. A reload is one
// CLUSTER SLOTS to one node.
const ReloadInterval = time.Second

// NewClient returns the client redis.NewUniversalClient would return for o (a single node for
// one address, a Cluster for several or with IsClusterMode, a Sentinel failover client with
// MasterName, o.Addrs then being the Sentinels), set up to follow failovers: one dial attempt
// unless o says otherwise, and for a Cluster ReloadInterval and Follow. o is not modified.
func NewClient(o *redis.UniversalOptions) redis.UniversalClient {
	opts := *o
	if opts.DialerRetries == 0 {
		opts.DialerRetries = 1
	}
	if opts.MasterName == "" && (len(opts.Addrs) > 1 || opts.IsClusterMode) {
		co := opts.Cluster()
		co.ClusterStateReloadInterval = ReloadInterval
		c := redis.NewClusterClient(co)
		Follow(c)
		return c
	}
	rdb := redis.NewUniversalClient(&opts)
	Follow(rdb)
	return rdb
}

// Follow makes rdb follow failovers, right after it is built. A Cluster client (also one of
// NewFailoverClusterClient) reloads its slot map when one of its nodes fails a dial or a command
// with a network error or a role change; Follow covers the node connections made after it. Every
// client dials again at each call while an address refuses connections (see refusedHook), so
// that it reaches the promoted master as soon as Sentinel names it, or a node as soon as it is
// back.
func Follow(rdb redis.UniversalClient) {
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		h := reloadHook{reload: func() { c.ReloadState(context.Background()) }}
		c.OnNewNode(func(node *redis.Client) {
			// The first hook added wraps the others: reloadHook sees the dial's error before
			// refusedHook turns a refusal into a connection that fails.
			node.AddHook(refusedHook{})
			node.AddHook(h)
		})
	case *redis.Client:
		c.AddHook(refusedHook{})
		c.AddHook(&switchHook{conns: map[*trackedConn]struct{}{}})
	}
}

// switchHook closes a client's connections to an address it no longer dials. A Sentinel client
// resolves the master at each dial; when Sentinel announces a switch, go-redis closes the
// command pools' connections to the old master, not those of pub/sub, and the old master, alive
// after a coordinated failover (SENTINEL FAILOVER), keeps them: subscribers would hear nothing
// of what is published on the new master until Sentinel demotes the old one (about 10 s
// later). The first connection made to another address closes them, and go-redis's pub/sub
// resubscribes on the new master (its confirmation tells the subscriber events may have been
// missed). A client of one address never dials another: it is left as it is.
type switchHook struct {
	mu    sync.Mutex
	last  string // the address of the last connection made
	conns map[*trackedConn]struct{}
}

func (h *switchHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err != nil {
			return conn, err
		}
		tc := &trackedConn{Conn: conn, h: h, remote: conn.RemoteAddr().String()}
		var out net.Conn = tc
		if sc, ok := conn.(syscall.Conn); ok {
			out = trackedSyscallConn{tc, sc}
		}
		h.mu.Lock()
		var stale []*trackedConn
		if h.last != "" && tc.remote != h.last {
			for c := range h.conns {
				if c.remote != tc.remote {
					stale = append(stale, c)
					delete(h.conns, c)
				}
			}
		}
		h.last = tc.remote
		h.conns[tc] = struct{}{}
		h.mu.Unlock()
		for _, c := range stale {
			_ = c.Conn.Close() // its reader fails and reconnects, to the new address
		}
		return out, nil
	}
}

func (*switchHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (*switchHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// trackedConn is a connection switchHook knows of until it is closed.
type trackedConn struct {
	net.Conn
	h      *switchHook
	remote string
}

func (c *trackedConn) Close() error {
	c.h.mu.Lock()
	delete(c.h.conns, c)
	c.h.mu.Unlock()
	return c.Conn.Close()
}

// trackedSyscallConn is a trackedConn over a socket: go-redis checks an idle connection's
// socket before use (syscall.Conn), as it does unwrapped ones.
type trackedSyscallConn struct {
	*trackedConn
	sc syscall.Conn
}

func (c trackedSyscallConn) SyscallConn() (syscall.RawConn, error) { return c.sc.SyscallConn() }

// refusedHook hands go-redis's pool, for a dial the server refused, a connection that fails its
// first read or write with the dial's error instead of the error itself. The call fails (and is
// retried) as it would, but the pool does not count a failed dial: after PoolSize of those it
// would stop dialling and return the last error until a probe once a second got through, up to
// a second after Sentinel names the promoted master (or a restarted Redis answers). A refused
// dial costs no time and holds nothing; timeouts and other errors are left to the pool.
type refusedHook struct{}

func (refusedHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err != nil && errors.Is(err, syscall.ECONNREFUSED) {
			remote := addr
			var op *net.OpError
			if errors.As(err, &op) && op.Addr != nil {
				remote = op.Addr.String()
			}
			return refusedConn{err: &refusedError{err}, remote: stringAddr(remote)}, nil
		}
		return conn, err
	}
}

func (refusedHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (refusedHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// refusedConn is a connection that was refused: every read and write fails with that error.
type refusedConn struct {
	err    error
	remote stringAddr
}

func (c refusedConn) Read([]byte) (int, error)         { return 0, c.err }
func (c refusedConn) Write([]byte) (int, error)        { return 0, c.err }
func (c refusedConn) Close() error                     { return nil }
func (c refusedConn) LocalAddr() net.Addr              { return stringAddr("") }
func (c refusedConn) RemoteAddr() net.Addr             { return c.remote }
func (c refusedConn) SetDeadline(time.Time) error      { return nil }
func (c refusedConn) SetReadDeadline(time.Time) error  { return nil }
func (c refusedConn) SetWriteDeadline(time.Time) error { return nil }

type stringAddr string

func (a stringAddr) Network() string { return "tcp" }
func (a stringAddr) String() string  { return string(a) }

// refusedError is the refused dial's error, wrapped once: go-redis unwraps a connection's
// set-up error once before it returns it, and the caller (and its retries) must still see the
// dial's *net.OpError.
type refusedError struct{ err error }

func (e *refusedError) Error() string { return e.err.Error() }
func (e *refusedError) Unwrap() error { return e.err }

// reloadHook has a Cluster client reload its slot map after an error of one of its nodes that
// says the topology may have changed.
type reloadHook struct{ reload func() }

func (h reloadHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err != nil && !callerLeft(err) {
			h.reload()
		}
		return conn, err
	}
}

func (h reloadHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if TopologyError(err) {
			h.reload()
		}
		return err
	}
}

func (h reloadHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if TopologyError(err) {
			h.reload()
			return err
		}
		for _, cmd := range cmds {
			if TopologyError(cmd.Err()) {
				h.reload()
				break
			}
		}
		return err
	}
}

// TopologyError reports whether err says that the node answering, or failing to, may no longer
// be where its data lives: a network error (refused, reset, closed, timed out) or a reply of a
// node changing role (READONLY, MASTERDOWN, CLUSTERDOWN, LOADING). A caller's own cancellation
// and ordinary replies (redis.Nil, errors of a command) are not.
func TopologyError(err error) bool {
	if err == nil || errors.Is(err, redis.Nil) || callerLeft(err) {
		return false
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		msg := rerr.Error()
		for _, p := range []string{"READONLY", "MASTERDOWN", "CLUSTERDOWN", "LOADING"} {
			if strings.HasPrefix(msg, p) {
				return true
			}
		}
		return false
	}
	var nerr net.Error
	return errors.As(err, &nerr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE)
}

// callerLeft reports whether err is the caller's context ending. A deadline met while dialling
// or reading is not: it comes as a network timeout ("i/o timeout"), which is not
// context.DeadlineExceeded.
func callerLeft(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
