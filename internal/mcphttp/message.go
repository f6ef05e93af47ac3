package mcphttp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Message is what the servers need to know of a POST body. It is parsed
// once, by [ReadRequest], and travels in the request's context: the studio's
// observer and the middleware read the same one.
type Message struct {
	// Method is the JSON-RPC method; "" for a response, or when unknown.
	Method string
	// ID is the raw id, when the body had a usable one (a string or a
	// number).
	ID json.RawMessage
	// Tool, Arguments and Meta are the params of a request whose params
	// are an object (a tools/call's name, arguments and _meta). Values of
	// the wrong type are left empty: go-sdk has the last word on them.
	Tool      string
	Arguments json.RawMessage
	Meta      map[string]json.RawMessage
}

// wireMessage is the shape of a message as parsed. Every member the check
// needs to report on is raw, so that a value of the wrong type is a clear
// error here rather than a failed decode.
type wireMessage struct {
	JSONRPC json.RawMessage `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  json.RawMessage `json:"method"`
	Params  *wireParams     `json:"params"`
}

type wireParams struct {
	Name      json.RawMessage            `json:"name"`
	Arguments json.RawMessage            `json:"arguments"`
	Meta      map[string]json.RawMessage `json:"_meta"`
}

// parseMessage checks that body is one JSON-RPC 2.0 message and returns what
// the servers need of it, in one pass over the body (one Unmarshal into a
// struct of raw members: linear in the body, never a generic tree). go-sdk
// answers the failures below with text/plain 400s; a client deserves a
// JSON-RPC error it can show. Batches were removed from MCP in 2025-06-18
// and no current client sends them, so a batch is refused rather than half
// supported.
func parseMessage(body []byte) (Message, *RPCError) {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '[' {
		if !json.Valid(trimmed) {
			return Message{}, &RPCError{Code: CodeParseError, Message: "Parse error: the body is not valid JSON"}
		}
		return Message{}, &RPCError{Code: CodeInvalidRequest, Message: "Invalid Request: JSON-RPC batches are not supported (MCP removed them in 2025-06-18); send one message per POST"}
	}
	var raw wireMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) || !json.Valid(body) {
			return Message{}, &RPCError{Code: CodeParseError, Message: fmt.Sprintf("Parse error: the body is not valid JSON: %v", err)}
		}
		// A type error inside params (an array, a _meta that is not an
		// object) leaves those members empty and the rest decoded; one at
		// the top means the body is not an object at all.
		var te *json.UnmarshalTypeError
		if !errors.As(err, &te) || te.Field == "" {
			return Message{}, &RPCError{Code: CodeInvalidRequest, Message: "Invalid Request: the body must be a JSON-RPC message object"}
		}
	}
	var m Message
	if raw.ID != nil && validID(raw.ID) {
		m.ID = raw.ID
	}
	var version string
	if err := json.Unmarshal(raw.JSONRPC, &version); err != nil || version != "2.0" {
		return m, &RPCError{Code: CodeInvalidRequest, Message: fmt.Sprintf(`Invalid Request: "jsonrpc" must be "2.0", got %s`, orMissing(raw.JSONRPC))}
	}
	if raw.Method != nil {
		if err := json.Unmarshal(raw.Method, &m.Method); err != nil {
			return m, &RPCError{Code: CodeInvalidRequest, Message: fmt.Sprintf(`Invalid Request: "method" must be a string, got %s`, orMissing(raw.Method))}
		}
	}
	if p := raw.Params; p != nil {
		var name string
		if json.Unmarshal(p.Name, &name) == nil {
			m.Tool = name
		}
		m.Arguments, m.Meta = p.Arguments, p.Meta
	}
	return m, nil
}

// validID reports whether id may be echoed in a response: a string or a
// number (JSON-RPC 2.0, section 4).
func validID(id json.RawMessage) bool {
	t := bytes.TrimSpace(id)
	if len(t) == 0 || len(t) > maxIDBytes {
		return false
	}
	switch c := t[0]; {
	case c == '"':
		var s string
		return json.Unmarshal(t, &s) == nil
	case c == '-' || c >= '0' && c <= '9':
		var f float64
		return json.Unmarshal(t, &f) == nil
	}
	return false
}

// maxIDBytes bounds an id the servers echo: an id is a handle, not a
// payload, and echoing a megabyte in every error would be the client's
// amplifier.
const maxIDBytes = 256

func orMissing(v json.RawMessage) string {
	if v == nil {
		return "nothing"
	}
	if len(v) > 64 {
		return string(v[:64]) + "…"
	}
	return string(v)
}
