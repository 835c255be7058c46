package gqlws_test

import (
	"bufio"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/surgekit/surge/internal/gqlws"
	"github.com/surgekit/surge/internal/testenv"
)

// TestBytesAfterUpgrade: a client that sends its first messages in the same write as the
// upgrade request is served: the bytes net/http read past the request reach the WebSocket
// (the 512-byte buffers carry them over; more than that ahead keeps net/http's buffers).
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
			out := testenv.UpgradeRequest(strings.TrimPrefix(f.url, "ws://"), "/", transportWS)
			for _, m := range tc.ahead {
				out += string(testenv.ClientFrame([]byte(m)))
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
				op, payload, err := testenv.ReadServerFrame(br)
				if err != nil {
					t.Fatal(err)
				}
				if op != 1 || string(payload) != want {
					t.Fatalf("got opcode %d %q, want a text frame %s", op, payload, want)
				}
			}
		})
	}
}
