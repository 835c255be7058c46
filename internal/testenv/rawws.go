package testenv

import (
	"encoding/binary"
	"errors"
	"io"
)

// Raw WebSocket (RFC 6455) for tests that need a client keeping nothing but its socket, or
// bytes sent where a client library would not put them.

// UpgradeRequest is an HTTP/1.1 WebSocket upgrade request for path (starting with "/") on
// host, asking for subprotocol.
func UpgradeRequest(host, path, subprotocol string) string {
	return "GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\n" +
		"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: " + subprotocol + "\r\n\r\n"
}

// ClientFrame is a masked, final text frame (RFC 6455 5.2), as a client must send.
func ClientFrame(payload []byte) []byte {
	b := []byte{0x81} // FIN, text
	switch n := len(payload); {
	case n < 126:
		b = append(b, 0x80|byte(n))
	case n <= 0xffff:
		b = append(b, 0x80|126)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b = append(b, 0x80|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	key := [4]byte{0x12, 0x34, 0x56, 0x78}
	b = append(b, key[:]...)
	for i, c := range payload {
		b = append(b, c^key[i%4])
	}
	return b
}

// ReadServerFrame reads one server frame, which is never masked: its opcode and payload.
func ReadServerFrame(r io.Reader) (byte, []byte, error) {
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	if h[1]&0x80 != 0 {
		return 0, nil, errors.New("a masked server frame")
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var l [2]byte
		if _, err := io.ReadFull(r, l[:]); err != nil {
			return 0, nil, err
		}
		n = uint64(binary.BigEndian.Uint16(l[:]))
	case 127:
		var l [8]byte
		if _, err := io.ReadFull(r, l[:]); err != nil {
			return 0, nil, err
		}
		n = binary.BigEndian.Uint64(l[:])
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return 0, nil, err
	}
	return h[0] & 0x0f, p, nil
}
