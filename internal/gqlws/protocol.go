package gqlws

import (
	"bytes"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/coder/websocket"
	"github.com/go-json-experiment/json/jsontext"
)

// The subprotocols served. graphql-transport-ws is the protocol of the graphql-ws library
// (https://github.com/enisdenjo/graphql-ws/blob/master/PROTOCOL.md); graphql-ws is the legacy
// protocol of Apollo's subscriptions-transport-ws, also served to a client that names none.
const (
	transportWS = "graphql-transport-ws"
	legacyWS    = "graphql-ws"
)

var subprotocols = []string{transportWS, legacyWS}

// Close codes of graphql-transport-ws (the legacy protocol uses 4400 for every refusal).
const (
	closeBadRequest    websocket.StatusCode = 4400
	closeUnauthorized  websocket.StatusCode = 4401 // subscribe before connection_ack
	closeInitTimeout   websocket.StatusCode = 4408
	closeDuplicateID   websocket.StatusCode = 4409
	closeTooManyInits  websocket.StatusCode = 4429
	closeTryAgainLater websocket.StatusCode = 1013 // the server cannot initialise now (its session store is down): retry
)

// kind is what a message means, whatever its name in the subprotocol.
type kind int

const (
	kindUnknown   kind = iota
	kindInit           // client: connection_init
	kindAck            // server: connection_ack
	kindSubscribe      // client: subscribe (legacy: start)
	kindNext           // server: next (legacy: data)
	kindError          // server: error of one operation
	kindComplete       // both: complete (client legacy: stop)
	kindPing           // both (graphql-transport-ws)
	kindPong           // both (graphql-transport-ws)
	kindKeepAlive      // server, legacy: ka
	kindTerminate      // client, legacy: connection_terminate
	kindConnError      // server, legacy: connection_error
)

// protocol names the messages of one subprotocol.
type protocol struct {
	name   string
	client map[string]kind // messages a client may send
	server map[kind]string // messages the server sends
}

var protocols = map[string]*protocol{
	transportWS: {
		name: transportWS,
		client: map[string]kind{
			"connection_init": kindInit, "subscribe": kindSubscribe, "complete": kindComplete,
			"ping": kindPing, "pong": kindPong,
		},
		server: map[kind]string{
			kindAck: "connection_ack", kindNext: "next", kindError: "error", kindComplete: "complete",
			kindPing: "ping", kindPong: "pong",
		},
	},
	legacyWS: {
		name: legacyWS,
		client: map[string]kind{
			"connection_init": kindInit, "start": kindSubscribe, "stop": kindComplete,
			"connection_terminate": kindTerminate,
		},
		server: map[kind]string{
			kindAck: "connection_ack", kindNext: "data", kindError: "error", kindComplete: "complete",
			kindKeepAlive: "ka", kindConnError: "connection_error",
		},
	},
}

// message is a client message: its kind, the operation's id, and a payload left raw until
// the operation's own goroutine decodes it.
type message struct {
	kind    kind
	id      string
	payload []byte
}

// envelopeDecoders recycles the decoders of parse.
var envelopeDecoders = sync.Pool{New: func() any { return jsontext.NewDecoder(bytes.NewReader(nil)) }}

// parse reads a client message: a JSON object with "type", "id" and "payload" (other members
// are skipped). A message that is not such an object (strict JSON: no duplicate names, valid
// UTF-8), of a type the protocol does not know, or an operation message without an id, is an
// error whose text the close frame carries. It decodes token by token (jsontext) rather than
// by reflection: it runs on the connection's reader goroutine, whose stack every idle
// connection keeps, and encoding/json's depth alone would double it.
func (p *protocol) parse(data []byte) (message, string) {
	const notObject = "Invalid message received: not one JSON object (strict: no duplicate names) with a string type"
	dec := envelopeDecoders.Get().(*jsontext.Decoder)
	defer envelopeDecoders.Put(dec)
	dec.Reset(bytes.NewReader(data))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return message{}, notObject
	}
	var m message
	var typ string
	var haveType, haveID bool
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return message{}, notObject
		}
		name := tok.String() // the token is void after the next read
		switch name {
		case "type", "id":
			v, err := dec.ReadToken()
			if err != nil {
				return message{}, notObject
			}
			if v.Kind() == 'n' && name == "id" {
				continue
			}
			if v.Kind() != '"' {
				return message{}, "Invalid message received: " + name + " is not a string"
			}
			if name == "type" {
				typ, haveType = v.String(), true
			} else {
				m.id, haveID = v.String(), true
			}
		case "payload":
			v, err := dec.ReadValue()
			if err != nil {
				return message{}, notObject
			}
			if v.Kind() != 'n' {
				m.payload = bytes.Clone(v)
			}
		default:
			if err := dec.SkipValue(); err != nil {
				return message{}, notObject
			}
		}
	}
	if _, err := dec.ReadToken(); err != nil || !haveType {
		return message{}, notObject
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return message{}, notObject // more after the object
	}
	k, ok := p.client[typ]
	if !ok {
		// Quoted, then clipped: quoting may make a short type several times longer.
		return message{}, "Invalid message received: unknown type " + clip(strconv.Quote(typ))
	}
	m.kind = k
	if (k == kindSubscribe || k == kindComplete) && (!haveID || m.id == "") {
		return message{}, "Invalid message received: " + typ + " without an id"
	}
	return m, ""
}

// encode writes a server message: {"id":…,"type":…,"payload":…}, the payload already JSON.
func (p *protocol) encode(k kind, id string, payload []byte) []byte {
	b := make([]byte, 0, 32+len(id)+len(payload))
	b = append(b, '{')
	if id != "" {
		b = append(b, `"id":`...)
		b, _ = jsontext.AppendQuote(b, id) // invalid UTF-8 is replaced, never refused
		b = append(b, ',')
	}
	b = append(b, `"type":"`...)
	b = append(b, p.server[k]...)
	b = append(b, '"')
	if len(payload) > 0 {
		b = append(b, `,"payload":`...)
		b = append(b, payload...)
	}
	return append(b, '}')
}

// clip shortens what a client sent before it goes into a close reason (at most 123 bytes).
// The reason must be valid UTF-8 (a browser fails the connection, 1006, on one that is not):
// a character cut short, or invalid to begin with, is dropped.
func clip(s string) string {
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return strings.ToValidUTF8(s, "")
}
