package cache

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"time"
)

// Codec turns values into bytes and back. JSON is the default.
type Codec interface {
	Marshal(v any) ([]byte, error)
	Unmarshal(data []byte, v any) error
}

// JSON is the default codec.
type JSON struct{}

func (JSON) Marshal(v any) ([]byte, error)      { return json.Marshal(v) }
func (JSON) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

// Stored entries start with a tag byte, so the "absent" marker can never collide with an
// encoded value, whatever the codec produces (even an empty encoding or the bytes of a
// textbook placeholder such as "" or "null"). Values written with Options.Version set carry
// it, so that a reader of another version takes them for misses.
const (
	tagAbsent         = 0x00 // cached "does not exist"
	tagValue          = 0x01 // value, expiry is the Redis TTL
	tagLogicalAbsent  = 0x02 // + 8-byte expire-at (unix ms)
	tagLogicalValue   = 0x03 // + 8-byte expire-at (unix ms) + value
	tagVersioned      = 0x04 // + 4-byte version + value
	tagLogicalVersion = 0x05 // + 8-byte expire-at (unix ms) + 4-byte version + value
)

var errCorrupt = errors.New("cache: unrecognised entry encoding")

// entry is a decoded stored entry.
type entry struct {
	absent   bool
	payload  []byte
	expireAt time.Time // zero unless logical expiry
	version  uint32
}

func encodeEntry(payload []byte, absent bool, expireAt time.Time, version uint32) []byte {
	logical := !expireAt.IsZero()
	var tag byte
	switch {
	case absent && logical:
		tag = tagLogicalAbsent
	case absent:
		return []byte{tagAbsent}
	case logical && version != 0:
		tag = tagLogicalVersion
	case logical:
		tag = tagLogicalValue
	case version != 0:
		tag = tagVersioned
	default:
		tag = tagValue
	}
	b := make([]byte, 1, 13+len(payload))
	b[0] = tag
	if logical {
		b = binary.BigEndian.AppendUint64(b, uint64(expireAt.UnixMilli()))
	}
	if absent {
		return b
	}
	if version != 0 {
		b = binary.BigEndian.AppendUint32(b, version)
	}
	return append(b, payload...)
}

func decodeEntry(b []byte) (entry, error) {
	if len(b) == 0 {
		return entry{}, errCorrupt
	}
	tag, rest := b[0], b[1:]
	var e entry
	switch tag {
	case tagAbsent:
		if len(rest) == 0 {
			return entry{absent: true}, nil
		}
		return entry{}, errCorrupt
	case tagLogicalAbsent, tagLogicalValue, tagLogicalVersion:
		if len(rest) < 8 {
			return entry{}, errCorrupt
		}
		e.expireAt = time.UnixMilli(int64(binary.BigEndian.Uint64(rest)))
		rest = rest[8:]
	case tagValue, tagVersioned:
	default:
		return entry{}, errCorrupt
	}
	switch tag {
	case tagLogicalAbsent:
		e.absent = true
		return e, nil
	case tagVersioned, tagLogicalVersion:
		if len(rest) < 4 {
			return entry{}, errCorrupt
		}
		e.version = binary.BigEndian.Uint32(rest)
		rest = rest[4:]
	}
	e.payload = rest
	return e, nil
}
