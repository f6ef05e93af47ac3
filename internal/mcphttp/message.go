package mcphttp

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// message is what the middleware needs to know of a POST body.
type message struct {
	method string          // "" for a response or when unknown
	id     json.RawMessage // the raw id, when the body had a usable one
}

// classify checks that body is one JSON-RPC 2.0 message. go-sdk answers the
// failures below with text/plain 400s; a client deserves a JSON-RPC error it
// can show. Batches were removed from MCP in 2025-06-18 and no current client
// sends them, so a batch is refused rather than half supported.
func classify(body []byte) (message, *RPCError) {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '[' {
		if !json.Valid(trimmed) {
			return message{}, &RPCError{Code: CodeParseError, Message: "Parse error: the body is not valid JSON"}
		}
		return message{}, &RPCError{Code: CodeInvalidRequest, Message: "Invalid Request: JSON-RPC batches are not supported (MCP removed them in 2025-06-18); send one message per POST"}
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		if !json.Valid(body) {
			return message{}, &RPCError{Code: CodeParseError, Message: fmt.Sprintf("Parse error: the body is not valid JSON: %v", err)}
		}
		return message{}, &RPCError{Code: CodeInvalidRequest, Message: "Invalid Request: the body must be a JSON-RPC message object"}
	}
	var m message
	if id, ok := raw["id"]; ok && validID(id) {
		m.id = id
	}
	var version string
	if err := json.Unmarshal(raw["jsonrpc"], &version); err != nil || version != "2.0" {
		return m, &RPCError{Code: CodeInvalidRequest, Message: fmt.Sprintf(`Invalid Request: "jsonrpc" must be "2.0", got %s`, orMissing(raw["jsonrpc"]))}
	}
	if method, ok := raw["method"]; ok {
		if err := json.Unmarshal(method, &m.method); err != nil {
			return m, &RPCError{Code: CodeInvalidRequest, Message: fmt.Sprintf(`Invalid Request: "method" must be a string, got %s`, method)}
		}
	}
	return m, nil
}

// validID reports whether id may be echoed in a response: a string or a
// number (JSON-RPC 2.0, section 4).
func validID(id json.RawMessage) bool {
	var v any
	if json.Unmarshal(id, &v) != nil {
		return false
	}
	switch v.(type) {
	case string, float64:
		return true
	}
	return false
}

func orMissing(v json.RawMessage) string {
	if v == nil {
		return "nothing"
	}
	if len(v) > 64 {
		return string(v[:64]) + "…"
	}
	return string(v)
}
