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
// textbook placeholder such as "" or "null").
const (
	tagAbsent        = 0x00 // cached "does not exist"
	tagValue         = 0x01 // value, expiry is the Redis TTL
	tagLogicalAbsent = 0x02 // + 8-byte expire-at (unix ms)
	tagLogicalValue  = 0x03 // + 8-byte expire-at (unix ms) + value
)

var errCorrupt = errors.New("cache: unrecognised entry encoding")

// entry is a decoded stored entry.
type entry struct {
	absent   bool
	payload  []byte
	expireAt time.Time // zero unless logical expiry
}

func encodeEntry(payload []byte, absent bool, expireAt time.Time) []byte {
	if expireAt.IsZero() {
		if absent {
			return []byte{tagAbsent}
		}
		return append([]byte{tagValue}, payload...)
	}
	tag := byte(tagLogicalValue)
	if absent {
		tag = tagLogicalAbsent
	}
	b := make([]byte, 9, 9+len(payload))
	b[0] = tag
	binary.BigEndian.PutUint64(b[1:], uint64(expireAt.UnixMilli()))
	if !absent {
		b = append(b, payload...)
	}
	return b
}

func decodeEntry(b []byte) (entry, error) {
	if len(b) == 0 {
		return entry{}, errCorrupt
	}
	switch b[0] {
	case tagAbsent:
		if len(b) == 1 {
			return entry{absent: true}, nil
		}
	case tagValue:
		return entry{payload: b[1:]}, nil
	case tagLogicalAbsent, tagLogicalValue:
		if len(b) >= 9 {
			at := time.UnixMilli(int64(binary.BigEndian.Uint64(b[1:9])))
			if b[0] == tagLogicalAbsent {
				return entry{absent: true, expireAt: at}, nil
			}
			return entry{payload: b[9:], expireAt: at}, nil
		}
	}
	return entry{}, errCorrupt
}
