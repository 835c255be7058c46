package lua

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

// replyCase is a reply fed to a wrapper's parser, and what it must read (nil: malformed).
type replyCase struct {
	reply any
	want  any
}

// checkReplies feeds each crafted reply to s's parser: a reply the script never gives must be
// ErrMalformedReply, never an outcome (an unchecked read turned it into a zero value before).
func checkReplies[T any](t *testing.T, s script[T], cases []replyCase) {
	t.Helper()
	for _, c := range cases {
		got, err := s.read(c.reply, nil)
		if c.want == nil {
			if !errors.Is(err, ErrMalformedReply) {
				t.Errorf("%s: reply %#v read as %+v, %v; want ErrMalformedReply", s.name, c.reply, got, err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: reply %#v read as %+v, %v; want %+v", s.name, c.reply, got, err, c.want)
		}
	}
	boom := errors.New("connection refused")
	if _, err := s.read(nil, boom); !errors.Is(err, boom) {
		t.Errorf("%s: a call error became %v", s.name, err)
	}
}

// Malformed replies shared by every 1/0 script.
var flagCases = []replyCase{
	{int64(1), true}, {int64(0), false},
	{int64(2), nil}, {int64(-1), nil}, {"1", nil}, {[]any{int64(1)}, nil}, {nil, nil},
}

func TestCacheReplies(t *testing.T) {
	checkReplies(t, cacheLease, []replyCase{
		{[]any{int64(1), "v"}, LeaseReply{Outcome: LeaseCached, Value: "v"}},
		{[]any{int64(2), ""}, LeaseReply{Outcome: LeaseTaken}},
		{[]any{int64(3), int64(250)}, LeaseReply{Outcome: LeaseHeld, Wait: 250 * time.Millisecond}},
		{[]any{int64(4), ""}, nil},
		{[]any{"1", "v"}, nil},
		{[]any{int64(1), int64(7)}, nil},
		{[]any{int64(3), "250"}, nil},
		{[]any{int64(1)}, nil},
		{int64(1), nil},
	})
	checkReplies(t, cacheFill, flagCases)
	checkReplies(t, cacheRelease, flagCases)
	checkReplies(t, cacheDrop, flagCases)
	checkReplies(t, cacheSet, []replyCase{{int64(1), struct{}{}}, {int64(0), nil}, {"OK", nil}})
}

func TestBloomReplies(t *testing.T) {
	shared := []replyCase{
		{[]any{int64(0)}, BloomReply{Status: BloomNotBuilt}},
		{[]any{int64(-1), "64", "3"}, BloomReply{Status: BloomLiveMismatch, M: "64", K: "3"}},
		{[]any{int64(-1), int64(64), int64(3)}, nil},
		{[]any{int64(-1)}, nil},
		{[]any{int64(0), int64(1)}, nil},
		{[]any{int64(7)}, nil},
		{[]any{"1"}, nil},
		{[]any{}, nil},
		{int64(1), nil},
	}
	checkReplies(t, bloomTest, append([]replyCase{
		{[]any{int64(1), int64(1), int64(0)}, BloomReply{Status: BloomDone, Present: []bool{true, false}}},
		{[]any{int64(1), int64(2)}, nil},
		{[]any{int64(1), "1"}, nil},
	}, shared...))
	checkReplies(t, bloomAdd, append([]replyCase{
		{[]any{int64(1)}, BloomReply{Status: BloomDone, Present: []bool{}}},
		{[]any{int64(-2), "64", "3"}, BloomReply{Status: BloomRebuildMismatch, M: "64", K: "3"}},
		{[]any{int64(1), int64(1)}, nil},
	}, shared...))
	for _, s := range []script[bool]{bloomRebuildBegin, bloomRebuildAdd, bloomRebuildCommit, bloomRebuildAbort} {
		checkReplies(t, s, flagCases)
	}
}

func TestLockReplies(t *testing.T) {
	checkReplies(t, lockObtain, []replyCase{
		{[]any{int64(1), int64(42)}, Grant{Taken: true, Fence: 42, Holds: 1}},
		{[]any{int64(0), int64(900)}, Grant{RetryIn: 900 * time.Millisecond}},
		{[]any{int64(0), int64(-1)}, Grant{RetryIn: -time.Millisecond}},
		{[]any{int64(1), int64(0)}, nil}, // no fence drawn
		{[]any{int64(2), int64(42)}, nil},
		{[]any{"1", int64(42)}, nil},
		{[]any{int64(1)}, nil},
		{[]any{int64(1), int64(42), int64(1)}, nil},
	})
	checkReplies(t, lockReentrantObtain, []replyCase{
		{[]any{int64(1), int64(42), int64(2)}, Grant{Taken: true, Fence: 42, Holds: 2}},
		{[]any{int64(0), int64(900), int64(0)}, Grant{RetryIn: 900 * time.Millisecond}},
		{[]any{int64(1), int64(42), int64(0)}, nil},
		{[]any{int64(1), int64(42)}, nil},
	})
	checkReplies(t, lockRelease, flagCases)
	checkReplies(t, lockExtend, flagCases)
	checkReplies(t, lockReentrantExtend, flagCases)
	checkReplies(t, lockReentrantRelease, []replyCase{
		{int64(0), HoldRelease{Found: true}},
		{int64(2), HoldRelease{Found: true, Left: 2}},
		{int64(-1), HoldRelease{}},
		{int64(-2), nil}, {"0", nil},
	})
	checkReplies(t, lockFenceFloor, []replyCase{{int64(9), int64(9)}, {"9", nil}, {nil, nil}})
}

func TestLoginReplies(t *testing.T) {
	checkReplies(t, loginSendCode, []replyCase{
		{[]any{int64(1), int64(60000)}, SendReply{Stored: true, Cooldown: time.Minute}},
		{[]any{int64(-1), int64(1000)}, SendReply{Cooldown: time.Second}},
		{[]any{int64(0), int64(1000)}, nil},
		{[]any{int64(1)}, nil},
		{[]any{int64(1), "60000"}, nil},
	})
	checkReplies(t, loginVerifyCode, []replyCase{
		{int64(1), CodeRight}, {int64(0), CodeWrong}, {int64(-1), CodeMissing},
		{int64(-2), CodeLocked}, {int64(-3), CodeForeign}, {int64(-4), CodeCapped},
		{int64(-5), nil}, {int64(2), nil}, {"1", nil},
	})
	checkReplies(t, rateWindow, []replyCase{
		{[]any{int64(1), int64(0)}, RateReply{Allowed: true}},
		{[]any{int64(0), int64(500)}, RateReply{RetryIn: 500 * time.Millisecond}},
		{[]any{int64(2), int64(0)}, nil},
		{[]any{int64(1)}, nil},
	})
}

func TestIDReplies(t *testing.T) {
	checkReplies(t, idgenNext, []replyCase{
		{[]any{int64(42), int64(1700000000), int64(0)}, IDReservation{Last: 42, Since: 1700000000}},
		{[]any{int64(42), int64(1700000000), int64(1)}, IDReservation{Last: 42, Since: 1700000000, Fenced: true}},
		{[]any{int64(-1), int64(0), int64(0)}, IDReservation{Expired: true}},
		{[]any{int64(42), int64(1700000000), int64(2)}, nil},
		{[]any{int64(42), int64(0), int64(0)}, nil},
		{[]any{int64(-2), int64(1700000000), int64(0)}, nil},
		{[]any{int64(42), "1700000000", int64(0)}, nil},
		{[]any{int64(42), int64(1700000000)}, nil},
	})
}
