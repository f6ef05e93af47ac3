package mcphttp

import (
	"bytes"
	"encoding/json"
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

// parseMessage checks that body is one JSON-RPC 2.0 message and returns what
// the servers need of it, in one pass (scan.go): linear in the body, never a
// decoded tree, and the members it returns are sub-slices of body. go-sdk
// answers the failures below with text/plain 400s; a client deserves a
// JSON-RPC error it can show. Batches were removed from MCP in 2025-06-18
// and no current client sends them, so a batch is refused rather than half
// supported.
func parseMessage(body []byte) (Message, *RPCError) { return ParseMessage(body) }

// ParseMessage is the parse ReadRequest does, for observers and fuzzing:
// what the servers read of one JSON-RPC message, or the JSON-RPC error the
// body gets.
func ParseMessage(body []byte) (Message, *RPCError) {
	if len(body) <= smallBody && !json.Valid(body) {
		// Small enough to validate in full, for the exact error.
		var v any
		err := json.Unmarshal(body, &v)
		return Message{}, &RPCError{Code: CodeParseError, Message: fmt.Sprintf("Parse error: the body is not valid JSON: %v", err)}
	}
	var m Message
	var jsonrpc, id, method []byte
	meta := &visit{member: func(k string, v []byte) {
		if m.Meta == nil {
			m.Meta = make(map[string]json.RawMessage)
		}
		m.Meta[k] = v
	}}
	params := &visit{
		member: func(k string, v []byte) {
			switch k {
			case "name":
				var name string
				if v[0] == '"' && json.Unmarshal(v, &name) == nil {
					m.Tool = name
				}
			case "arguments":
				m.Arguments = v
			}
		},
		child: func(k string) *visit {
			if k == "_meta" {
				return meta
			}
			return nil
		},
	}
	top := &visit{
		member: func(k string, v []byte) {
			switch k {
			case "jsonrpc":
				jsonrpc = v
			case "id":
				id = v
			case "method":
				method = v
			}
		},
		child: func(k string) *visit {
			if k == "params" {
				return params
			}
			return nil
		},
	}
	isObject, err := scanObject(body, top)
	if err != nil {
		return Message{}, &RPCError{Code: CodeParseError, Message: fmt.Sprintf("Parse error: the body is not valid JSON: %v", err)}
	}
	if !isObject {
		if t := bytes.TrimLeft(body, " \t\r\n"); len(t) > 0 && t[0] == '[' {
			return Message{}, &RPCError{Code: CodeInvalidRequest, Message: "Invalid Request: JSON-RPC batches are not supported (MCP removed them in 2025-06-18); send one message per POST"}
		}
		return Message{}, &RPCError{Code: CodeInvalidRequest, Message: "Invalid Request: the body must be a JSON-RPC message object"}
	}
	if id != nil && validID(id) {
		m.ID = id
	}
	var version string
	if err := json.Unmarshal(jsonrpc, &version); err != nil || version != "2.0" {
		return m, &RPCError{Code: CodeInvalidRequest, Message: fmt.Sprintf(`Invalid Request: "jsonrpc" must be "2.0", got %s`, orMissing(jsonrpc))}
	}
	if method != nil {
		if err := json.Unmarshal(method, &m.Method); err != nil {
			return m, &RPCError{Code: CodeInvalidRequest, Message: fmt.Sprintf(`Invalid Request: "method" must be a string, got %s`, orMissing(method))}
		}
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
