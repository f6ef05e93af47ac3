package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/switchboard-run/switchboard/internal/mcphttp"
	"github.com/switchboard-run/switchboard/internal/rpccode"
)

// A call's stream cut after its headers. ErrorHandler answers a call the
// agent dropped before its response headers with rpccode.OutcomeUnknown and
// the request's id. Once an SSE response has begun (a progress event went
// out) that is too late for a status, but not for one more event: cutBody
// wraps the body of a call's text/event-stream response, and when reading it
// fails (the agent died, the connection was reset: any error but io.EOF,
// including io.ErrUnexpectedEOF from a chunked body cut short) before the
// call's response passed, it ends the stream with one last event holding
// the call's JSON-RPC error, then a clean end. The client gets an answer
// to its own request, typed, instead of a broken stream and an error with
// no id.
//
// Not in every case:
//
//   - A stream that carried an event id is the client's to resume with
//     Last-Event-ID (session era, agent with an event store: the priming
//     event has one); continuity answers that resumption, after the agent's
//     restart, with the same error (continuity_streams.go), and an agent
//     that is still there resumes it with the real answer. An error event
//     here would pre-empt both.
//   - A clean io.EOF is the agent ending the stream on purpose (SSE
//     polling: a priming event, then close, then the client reconnects).
//   - A JSON (application/json) response cut after its headers cannot be
//     repaired: its Content-Length (or its first bytes) went out, and
//     nothing more can be said inside it.
//
// Cheap on the hot path: the body is scanned for SSE event boundaries with
// bytes.IndexByte (a JSON-RPC message is one data line, so a 1 MB result
// holds a handful of newlines), only the first cutHeadBytes of each event
// are kept, in a fixed array, and those are walked for the top-level keys
// that make a response ("result" or "error", no "method") and its id. Once
// the response passed, the body is passed through unscanned.

// cutHeadBytes is how much of each event's start is kept to tell a
// response from a request or a notification: go-sdk writes "event:", "id:"
// and then data starting {"jsonrpc":"2.0","id":…,"result", well inside it.
const cutHeadBytes = 256

// cutEventName is the type given to an event the cut left half-written, so
// that no client decodes it: go-sdk and EventSource hand only "message"
// events on (an SSE event's type may be set by any of its lines, the last
// one winning).
const cutEventName = "switchboard-cut"

// watchCut wraps the body of resp, the agent's answer to req, when it is a
// call's SSE stream; see the top of this file.
func watchCut(resp *http.Response, name func() string, logger *slog.Logger) {
	req := resp.Request
	if req == nil || req.Method != http.MethodPost || resp.StatusCode != http.StatusOK ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return
	}
	m, ok := mcphttp.MessageFrom(req.Context())
	if !ok || m.Method == "" || len(m.ID) == 0 {
		return
	}
	resp.Body = &cutBody{ReadCloser: resp.Body, id: m.ID, method: m.Method, name: name, logger: logger, lineStart: true}
}

// cutBody is a call's SSE body; see the top of this file.
type cutBody struct {
	io.ReadCloser
	id     json.RawMessage
	method string
	name   func() string // the agent's name, asked only when the stream is cut
	logger *slog.Logger

	answered  bool // the response to id passed: nothing more to watch
	resumable bool // an event with an id passed: the client may resume
	inEvent   bool // lines of an event not yet ended by a blank line passed
	lineStart bool // no byte of the current line has passed
	lineColon bool // the current line has its field's colon
	lineBody  bool // the current line has a byte other than '\r'
	head      [cutHeadBytes]byte
	headLen   int
	data      [cutHeadBytes]byte // the data of the event in head, joined

	final []byte // the last event, being read out
	ended bool   // the last event was read out
}

func (b *cutBody) Read(p []byte) (int, error) {
	if b.final != nil {
		n := copy(p, b.final)
		b.final = b.final[n:]
		if len(b.final) == 0 {
			b.final, b.ended = nil, true
		}
		return n, nil
	}
	if b.ended {
		return 0, io.EOF
	}
	n, err := b.ReadCloser.Read(p)
	if !b.answered && n > 0 {
		b.scan(p[:n])
	}
	if err == nil || err == io.EOF || b.answered || b.resumable {
		return n, err
	}
	// Cut. What passed of a half-written event is not decoded by the client
	// (cutEventName); the answer follows.
	b.final = b.lastEvent(err)
	return n, nil
}

// scan follows p's lines and events, keeping each event's head.
func (b *cutBody) scan(p []byte) {
	for len(p) > 0 && !b.answered {
		i := bytes.IndexByte(p, '\n')
		seg := p
		if i >= 0 {
			seg = p[:i+1]
		}
		if len(seg) > 0 && seg[0] != '\n' {
			b.lineStart = false
			if !b.lineColon && bytes.IndexByte(seg, ':') >= 0 {
				b.lineColon = true
			}
			if text := bytes.TrimRight(seg, "\r\n"); len(text) > 0 {
				b.lineBody = true
			}
		}
		if i < 0 {
			b.keep(seg)
			return
		}
		if !b.lineBody {
			// A blank line: the event, if any, is complete.
			if b.inEvent {
				b.event()
			}
			b.inEvent, b.headLen = false, 0
		} else {
			b.keep(seg)
			b.inEvent = true
		}
		b.lineStart, b.lineColon, b.lineBody = true, false, false
		p = p[i+1:]
	}
}

func (b *cutBody) keep(seg []byte) {
	b.headLen += copy(b.head[b.headLen:], seg)
}

// event looks at a complete event's head.
func (b *cutBody) event() {
	data := b.data[:]
	dataLen := 0
	for rest := b.head[:b.headLen]; len(rest) > 0; {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		field, value, _ := bytes.Cut(bytes.TrimRight(line, "\r"), []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "id":
			if len(value) > 0 {
				b.resumable = true
			}
		case "data":
			if dataLen > 0 {
				dataLen += copy(data[dataLen:], "\n")
			}
			dataLen += copy(data[dataLen:], value)
		}
	}
	if answers(data[:dataLen], b.id) {
		b.answered = true
	}
}

// lastEvent is the SSE that ends a cut stream: the end of what the cut left
// half-written, then the call's error.
func (b *cutBody) lastEvent(cause error) []byte {
	var out []byte
	if !b.lineStart {
		if !b.lineColon {
			out = append(out, ':') // a field name cut short: an empty field, ignored
		}
		out = append(out, '\n')
	}
	if b.inEvent || !b.lineStart {
		out = append(out, "event: "+cutEventName+"\n\n"...)
	}
	name := b.name()
	// ReverseProxy's own line for this ("read error during body copy") no
	// longer comes: the body ended cleanly, as far as it knows.
	b.logger.Info("proxy: a call's stream was cut after it began; answered outcome unknown", "agent", name, "method", b.method, "err", cause)
	msg, err := json.Marshal(struct {
		JSONRPC string            `json:"jsonrpc"`
		ID      json.RawMessage   `json:"id"`
		Error   *mcphttp.RPCError `json:"error"`
	}{"2.0", b.id, &mcphttp.RPCError{
		Code:    rpccode.OutcomeUnknown,
		Message: fmt.Sprintf("agent %s cut its answer to %s after it began: %v; it may have run, and its outcome is unknown", name, b.method, cause),
		Data:    map[string]any{"agent": name, "outcomeUnknown": true},
	}})
	if err != nil {
		// The id was checked as JSON by the middleware; nothing else can fail.
		panic(fmt.Sprintf("proxy: encoding a cut call's error: %v", err))
	}
	out = append(out, "event: message\ndata: "...)
	out = append(out, msg...)
	return append(out, '\n', '\n')
}

// answers reports whether data, the start of an SSE event's data, is a
// JSON-RPC response to the request with id: an object whose top-level keys
// reach "result" or "error" before any "method", with that id when the id
// came first. A response whose id comes after its result (no encoder we
// know does that) counts as the answer: a POST's stream answers only the
// request it carried, and a duplicate answer is worse than none. Only the
// keys before the answer are walked, never the result itself; a start that
// ends before it can tell is not a response.
func answers(data []byte, id json.RawMessage) bool {
	d := skipSpace(data)
	if len(d) == 0 || d[0] != '{' {
		return false
	}
	d = d[1:]
	var got []byte
	for {
		key, rest, ok := cutString(skipSpace(d))
		if !ok {
			return false
		}
		d = skipSpace(rest)
		if len(d) == 0 || d[0] != ':' {
			return false
		}
		d = skipSpace(d[1:])
		switch string(key) {
		case "result", "error":
			return got == nil || sameID(got, id)
		case "method":
			return false
		}
		val, rest, ok := cutValue(d)
		if !ok {
			return false
		}
		if string(key) == "id" {
			got = val
		}
		d = skipSpace(rest)
		if len(d) == 0 || d[0] != ',' {
			return false
		}
		d = d[1:]
	}
}

// sameID reports whether two raw JSON-RPC ids are the same id: the same
// bytes, or, rarely, the same value written otherwise (1.0 and 1, an
// escaped string).
func sameID(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	switch va.(type) {
	case string, float64:
		return va == vb
	}
	return false
}

func skipSpace(d []byte) []byte {
	for len(d) > 0 && (d[0] == ' ' || d[0] == '\t' || d[0] == '\n' || d[0] == '\r') {
		d = d[1:]
	}
	return d
}

// cutString cuts the JSON string at the start of d: its raw contents
// (escapes left as they are) and what follows it.
func cutString(d []byte) (s, rest []byte, ok bool) {
	if len(d) == 0 || d[0] != '"' {
		return nil, nil, false
	}
	for i := 1; i < len(d); i++ {
		switch d[i] {
		case '\\':
			i++
		case '"':
			return d[1:i], d[i+1:], true
		}
	}
	return nil, nil, false
}

// cutValue cuts the JSON value at the start of d, by counting brackets
// outside strings; ok is false if d ends first.
func cutValue(d []byte) (v, rest []byte, ok bool) {
	if len(d) == 0 {
		return nil, nil, false
	}
	switch d[0] {
	case '"':
		_, rest, ok := cutString(d)
		if !ok {
			return nil, nil, false
		}
		return d[:len(d)-len(rest)], rest, true
	case '{', '[':
		depth := 0
		for i := 0; i < len(d); i++ {
			switch d[i] {
			case '"':
				_, rest, ok := cutString(d[i:])
				if !ok {
					return nil, nil, false
				}
				i = len(d) - len(rest) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return d[:i+1], d[i+1:], true
				}
			}
		}
		return nil, nil, false
	}
	for i := 0; i < len(d); i++ {
		switch d[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return d[:i], d[i:], true
		}
	}
	return nil, nil, false
}
