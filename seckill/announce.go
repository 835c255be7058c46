package seckill

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/surgekit/surge/internal/wait"
)

// Announcements: a process that admits orders but runs no consumer (SURGE_SECKILL_CONSUMER=
// false: API servers in front of dedicated order workers) tells the consumers of the other
// processes which streams got new orders, so that they read them at once instead of when
// their sweep comes round (up to live/SweepRate seconds with many live sales).
//
// One Redis pub/sub channel per deployment, <namespace>:<prefix>:admitted. The announcer
// collects the streams (voucher or stock-bucket references) it admitted orders into and
// publishes them in one message, "<publisher> <ref> <ref> …", at most every announceGap: a
// burst costs one PUBLISH per gap, not one per grab, and nothing is sent while nothing is
// admitted. Every consumer subscribes and signals the streams a message names to its readers.
// A process that runs its own consumer announces nothing: it signals its readers in process.
//
// Pub/sub is at most once. What a lost message (Redis failing, a subscriber reconnecting)
// leaves behind, the sweep still finds; and a (re)subscription sweeps every live voucher at
// once, so that what was published while nobody listened waits no sweep round. On a Cluster
// a plain PUBLISH reaches the subscribers of every node, whichever node each is connected to.

// announceGap is the least time between two announcements of a process; announceMaxRefs
// bounds the streams one message names (more go in the next).
const (
	announceGap     = 5 * time.Millisecond
	announceMaxRefs = 4096
)

// announcer publishes the streams this process admitted orders into while it runs no
// consumer. A nil *announcer announces nothing.
type announcer struct {
	rdb     redis.UniversalClient
	channel string
	id      string // this process's: its consumer ignores its own messages
	m       *metrics
	log     *slog.Logger
	// consuming reports whether this process runs a consumer (which persists what it admits).
	consuming func() bool

	mu      sync.Mutex
	pending map[int]struct{}
	wake    chan struct{}
}

func newAnnouncer(rdb redis.UniversalClient, channel string, consuming func() bool, m *metrics, log *slog.Logger) *announcer {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return &announcer{rdb: rdb, channel: channel, id: hex.EncodeToString(b), consuming: consuming, m: m, log: log,
		pending: map[int]struct{}{}, wake: make(chan struct{}, 1)}
}

// admitted notes that stream ref got new orders: a lock and a map insert, no Redis command.
func (a *announcer) admitted(ref int) {
	if a == nil || a.consuming() {
		return
	}
	a.mu.Lock()
	a.pending[ref] = struct{}{}
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// run publishes what admitted noted, at most every announceGap, until life ends.
func (a *announcer) run(life context.Context) {
	var logged time.Time
	for {
		select {
		case <-life.Done():
			return
		case <-a.wake:
		}
		for msg := a.next(); msg != ""; msg = a.next() {
			ctx, cancel := context.WithTimeout(life, publishTimeout)
			err := a.rdb.Publish(ctx, a.channel, msg).Err()
			cancel()
			if err != nil && life.Err() == nil {
				// Lost: the sweep finds those orders (more slowly).
				a.m.background.WithLabelValues(opAnnounce).Inc()
				if time.Since(logged) > 30*time.Second {
					logged = time.Now()
					a.log.Warn("announcing new orders to the consumers of other processes (the sweep finds them later)", "err", err)
				}
			}
			if !wait.Sleep(life, announceGap) {
				return
			}
		}
	}
}

// next is the message for what is pending (up to announceMaxRefs streams), "" if nothing is.
func (a *announcer) next() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.pending) == 0 {
		return ""
	}
	b := make([]byte, 0, len(a.id)+12*min(len(a.pending), announceMaxRefs))
	b = append(b, a.id...)
	n := 0
	for ref := range a.pending {
		if n == announceMaxRefs {
			break
		}
		b = strconv.AppendInt(append(b, ' '), int64(ref), 10)
		delete(a.pending, ref)
		n++
	}
	return string(b)
}

// parseAnnouncement reads a message: its publisher and the stream references it names
// (anything unreadable is skipped: the sweep covers it).
func parseAnnouncement(payload string) (publisher string, refs []int) {
	f := strings.Fields(payload)
	if len(f) == 0 {
		return "", nil
	}
	refs = make([]int, 0, len(f)-1)
	for _, s := range f[1:] {
		if ref, err := strconv.Atoi(s); err == nil && ref != 0 {
			refs = append(refs, ref)
		}
	}
	return f[0], refs
}

// listenPause bounds the pause after a failed receive, doubling from redisPollMin;
// listenIdle is how long the subscription may stay silent before it is checked with a PING
// (a connection can die without a word).
const (
	listenPause = time.Second
	listenIdle  = 30 * time.Second
)

// listen signals to the readers the streams other processes announce, until ctx ends. Each
// (re)subscription asks the sweeper for a sweep of every live voucher: what was announced
// while this consumer did not listen is not lost for long.
func (c *consumer) listen(ctx context.Context, sw *sweeper) {
	ps := c.rdb.Subscribe(ctx, c.announce.channel)
	stop := context.AfterFunc(ctx, func() { _ = ps.Close() }) // Receive returns at once
	defer func() { stop(); _ = ps.Close() }()
	pause := redisPollMin
	for {
		msg, err := ps.ReceiveTimeout(ctx, listenIdle)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			if isTimeout(err) {
				_ = ps.Ping(ctx) // a dead connection fails here, and the next receive reconnects
				continue
			}
			if !wait.Sleep(ctx, pause) {
				return
			}
			pause = min(2*pause, listenPause)
			continue
		}
		pause = redisPollMin
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				sw.sweepAll()
			}
		case *redis.Message:
			publisher, refs := parseAnnouncement(m.Payload)
			if publisher == c.announce.id {
				continue // this process's own: its readers were signalled in process
			}
			for _, ref := range refs {
				c.ready.signal(ref, 0)
			}
		}
	}
}

// isTimeout reports whether err is a receive's timeout (nothing was said meanwhile).
func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}
