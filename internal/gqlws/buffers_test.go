package gqlws_test

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/surgekit/surge/internal/gqlws"
)

// TestBytesAfterUpgrade: a client that sends its first messages in the same write as the
// upgrade request is served: the bytes net/http read past the request reach the WebSocket
// (the 1 KB buffers carry them over; more than 1 KB ahead keeps net/http's buffers).
func TestBytesAfterUpgrade(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ahead []string // messages sent with the request
		want  []string // the server's answers, in order
	}{
		{"connection_init", []string{`{"type":"connection_init"}`}, []string{`{"type":"connection_ack"}`}},
		{"over 1 KB", []string{
			`{"type":"connection_init"}`,
			`{"type":"subscribe","id":"1","payload":{"query":"{ hello` + strings.Repeat(" ", 1500) + `}"}}`,
		}, []string{
			`{"type":"connection_ack"}`,
			`{"id":"1","type":"next","payload":{"data":{"hello":"world"}}}`,
			`{"id":"1","type":"complete"}`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A short init timeout: lost bytes show as a 4408 close, not a hang.
			f := newFixture(t, gqlws.Options{InitTimeout: time.Second})
			nc, err := net.Dial("tcp", strings.TrimPrefix(f.url, "ws://"))
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			_ = nc.SetDeadline(time.Now().Add(within))
			out := "GET / HTTP/1.1\r\nHost: " + strings.TrimPrefix(f.url, "ws://") + "\r\n" +
				"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n" +
				"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: graphql-transport-ws\r\n\r\n"
			for _, m := range tc.ahead {
				out += string(clientFrame([]byte(m)))
			}
			if _, err := nc.Write([]byte(out)); err != nil { // one write: request and messages
				t.Fatal(err)
			}
			br := bufio.NewReader(nc)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusSwitchingProtocols {
				t.Fatalf("status %s", resp.Status)
			}
			for _, want := range tc.want {
				op, payload := readFrame(t, br)
				if op != 1 || string(payload) != want {
					t.Fatalf("got opcode %d %q, want a text frame %s", op, payload, want)
				}
			}
		})
	}
}

// clientFrame is a masked, final text frame (RFC 6455 5.2), as a client must send.
func clientFrame(payload []byte) []byte {
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

// readFrame reads one unmasked server frame: its opcode and payload.
func readFrame(t *testing.T, r io.Reader) (byte, []byte) {
	t.Helper()
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		t.Fatal(err)
	}
	if h[1]&0x80 != 0 {
		t.Fatal("a masked server frame")
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var l [2]byte
		if _, err := io.ReadFull(r, l[:]); err != nil {
			t.Fatal(err)
		}
		n = uint64(binary.BigEndian.Uint16(l[:]))
	case 127:
		var l [8]byte
		if _, err := io.ReadFull(r, l[:]); err != nil {
			t.Fatal(err)
		}
		n = binary.BigEndian.Uint64(l[:])
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		t.Fatal(err)
	}
	return h[0] & 0x0f, p
}
