package idgen

import (
	"errors"
	"time"
)

// The id layout: bit 63 is 0 (ids are positive int64s), bits 62..32 hold seconds since the
// epoch, bits 31..0 a sequence number from the day's Redis counter.
const (
	// Epoch is the default zero of the seconds field, 2022-01-01T00:00:00Z in Unix seconds.
	// WithEpoch changes it; every generator of a prefix must use the same epoch.
	Epoch int64 = 1640995200

	// MaxSeconds is the largest seconds field (31 bits): about 68 years after the epoch.
	MaxSeconds = 1<<31 - 1
	// MaxSequence is the largest sequence number (32 bits), so at most 2^32-1 ids per prefix and
	// UTC day (about 49,700 per second sustained over a day, across all processes).
	MaxSequence = 1<<32 - 1

	seqBits = 32
	daySecs = 24 * 60 * 60

	// MinGenerated is the smallest id IsGenerated accepts: a seconds field of 2^16, about
	// 18 hours after the epoch. Every id of the default epoch issued since
	// 2022-01-01T18:12:16Z lies above it; ids that count rows from 1, even in ranges of 2^32
	// per table (ent's global ids) for up to 65536 tables, lie below it.
	MinGenerated int64 = 1 << (seqBits + 16)
)

// IsGenerated reports whether id lies where a generator's ids do (at least MinGenerated),
// which tells them apart from small database ids in one id space (the API's node ids). An id
// of a generator whose clock is within 18 hours of its epoch (WithEpoch) lies below it.
func IsGenerated(id int64) bool { return id >= MinGenerated }

// Errors. Redis failures are returned wrapped, as themselves.
var (
	// ErrSequenceExhausted means the day's sequence has passed MaxSequence. Ids for that day are
	// refused rather than wrapped around into duplicates; the next UTC day starts a new sequence.
	ErrSequenceExhausted = errors.New("idgen: daily sequence exhausted")
	// ErrClockBeforeEpoch means the clock reads a time before the epoch.
	ErrClockBeforeEpoch = errors.New("idgen: clock is before the epoch")
	// ErrTimeOverflow means the clock is MaxSeconds or more past the epoch: the seconds no longer
	// fit in 31 bits.
	ErrTimeOverflow = errors.New("idgen: time overflows the 31-bit seconds field")
	// ErrDayExpired means the clock names a UTC day whose Redis key may already have expired
	// (by Redis's clock the day ended more than the retention ago). Counting it again would
	// restart its sequence at 1, so nothing is issued: the local clock is far behind Redis's.
	ErrDayExpired = errors.New("idgen: the clock's day has outlived its key's retention (clock far behind Redis)")
	// ErrInvalidPrefix means the prefix is empty or holds spaces, control characters or braces.
	ErrInvalidPrefix = errors.New("idgen: prefix must be non-empty, without spaces, control characters or braces")
	// ErrClosed is returned by Next after Close.
	ErrClosed = errors.New("idgen: generator closed")
)

// Compose builds the id of second t (truncated to the second) and sequence number seq, with
// the default Epoch. It is the inverse of Decompose.
func Compose(t time.Time, seq uint32) (int64, error) {
	return compose(Epoch, t, seq)
}

// Decompose splits an id made with the default Epoch into its second (UTC) and its sequence
// number.
func Decompose(id int64) (t time.Time, seq uint32) {
	return decompose(Epoch, id)
}

func compose(epoch int64, t time.Time, seq uint32) (int64, error) {
	s := t.Unix() - epoch
	switch {
	case s < 0:
		return 0, ErrClockBeforeEpoch
	case s > MaxSeconds:
		return 0, ErrTimeOverflow
	}
	return s<<seqBits | int64(seq), nil
}

func decompose(epoch int64, id int64) (time.Time, uint32) {
	return time.Unix(epoch+id>>seqBits, 0).UTC(), uint32(id)
}
