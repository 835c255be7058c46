package gqlws

import (
	"encoding/json"
	"strconv"
	"strings"

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

// envelope is a client message: its type, the operation's id, and a payload left raw until
// the operation's own goroutine decodes it.
type envelope struct {
	Type    string          `json:"type"`
	ID      *string         `json:"id"`
	Payload json.RawMessage `json:"payload"`
}

// message is an envelope read and checked.
type message struct {
	kind    kind
	id      string
	payload json.RawMessage
}

// parse reads a client message. A message that is not a JSON object of a known type, or an
// operation message without an id, is an error whose text the close frame carries.
func (p *protocol) parse(data []byte) (message, string) {
	var e envelope
	if err := json.Unmarshal(data, &e); err != nil {
		return message{}, "Invalid message received: not a JSON object"
	}
	k, ok := p.client[e.Type]
	if !ok {
		// Quoted, then clipped: quoting may make a short type several times longer.
		return message{}, "Invalid message received: unknown type " + clip(strconv.Quote(e.Type))
	}
	m := message{kind: k, payload: e.Payload}
	if e.ID != nil {
		m.id = *e.ID
	}
	if (k == kindSubscribe || k == kindComplete) && m.id == "" {
		return message{}, "Invalid message received: " + e.Type + " without an id"
	}
	if len(m.payload) == 4 && string(m.payload) == "null" {
		m.payload = nil
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
