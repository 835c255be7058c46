package gqlws

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
)

// bufferSize is the size of a connection's read buffer and of its write buffer. net/http
// hands a hijacked connection 4 KB of each, kept for the WebSocket's life; this transport's
// messages are mostly under 200 bytes, and a larger one is read or written past the buffer.
const bufferSize = 512

// smallBuffers is the upgrade's ResponseWriter: its Hijack gives coder/websocket buffers of
// bufferSize instead of net/http's, carrying over any bytes net/http read past the request.
type smallBuffers struct{ http.ResponseWriter }

func (w smallBuffers) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w smallBuffers) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	nc, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nc, brw, err
	}
	pending := brw.Reader.Buffered()
	if pending > bufferSize {
		return nc, brw, nil // a client that sent that much ahead keeps net/http's buffers
	}
	if err := brw.Writer.Flush(); err != nil {
		return nc, brw, err
	}
	var r io.Reader = nc
	if pending > 0 {
		ahead, _ := brw.Reader.Peek(pending)
		r = io.MultiReader(bytes.NewReader(bytes.Clone(ahead)), nc)
	}
	br := bufio.NewReaderSize(r, bufferSize)
	if pending > 0 {
		// Buffered, so that coder/websocket, which takes what the reader holds and then reads
		// the connection, finds them.
		if _, err := br.Peek(pending); err != nil && !errors.Is(err, io.EOF) {
			return nc, brw, nil
		}
	}
	return nc, bufio.NewReadWriter(br, bufio.NewWriterSize(nc, bufferSize)), nil
}
