package mcphttp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"

	"github.com/switchboard-run/switchboard/internal/rpccode"
)

// JSON-RPC error codes the middleware answers, from the tree's one list
// (internal/rpccode).
const (
	CodeParseError     = rpccode.ParseError
	CodeInvalidRequest = rpccode.InvalidRequest
	// CodeServerOverloaded is the server error of a request refused by a
	// Budget or a cap, with HTTP 503: nothing ran, and the client may try
	// again.
	CodeServerOverloaded = rpccode.ServerError
)

// RPCError is the error member of a JSON-RPC response.
type RPCError struct {
	Code    int64  `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

func (e *RPCError) Error() string { return fmt.Sprintf("JSON-RPC error %d: %s", e.Code, e.Message) }

// WriteJSONRPCError answers with a JSON-RPC error response. id is the raw id
// of the request it answers; nil or empty means null (the error is about the
// HTTP request as a whole).
func WriteJSONRPCError(w http.ResponseWriter, status int, id json.RawMessage, code int64, message string) {
	writeRPCError(w, status, id, &RPCError{Code: code, Message: message})
}

// WriteJSONRPCErrorData is WriteJSONRPCError with a data member.
func WriteJSONRPCErrorData(w http.ResponseWriter, status int, id json.RawMessage, code int64, message string, data any) {
	writeRPCError(w, status, id, &RPCError{Code: code, Message: message, Data: data})
}

func writeRPCError(w http.ResponseWriter, status int, id json.RawMessage, e *RPCError) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	writeJSON(w, status, struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   *RPCError       `json:"error"`
	}{"2.0", id, e})
}

// WriteJSONError answers with {"error": message}, for endpoints that are not
// JSON-RPC and for rejections that happen before the body is read.
func WriteJSONError(w http.ResponseWriter, status int, message string) {
	writeJSON(w, status, map[string]string{"error": message})
}

// WriteJSON answers with v as JSON.
func WriteJSON(w http.ResponseWriter, status int, v any) { writeJSON(w, status, v) }

func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}
