// Package mcphttptest speaks MCP Streamable HTTP at the level of raw HTTP
// requests, for tests that must see exactly what goes over the wire: which
// status, which Mcp-Session-Id, which body. A go-sdk client hides all three.
package mcphttptest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
)

// ProtocolVersion is the protocol the raw client speaks.
const ProtocolVersion = "2025-11-25"

// Response is one HTTP answer, with its JSON-RPC messages decoded from
// either an application/json or a text/event-stream body.
type Response struct {
	Status    int
	Header    http.Header
	Body      []byte
	SessionID string
	Messages  []map[string]any
}

// Result returns the result member of the last message that has one, or nil.
func (r *Response) Result() map[string]any {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if res, ok := r.Messages[i]["result"].(map[string]any); ok {
			return res
		}
	}
	return nil
}

// Error returns the error member of the last message that has one, or nil.
func (r *Response) Error() map[string]any {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if e, ok := r.Messages[i]["error"].(map[string]any); ok {
			return e
		}
	}
	return nil
}

func (r *Response) String() string {
	return fmt.Sprintf("HTTP %d session=%q body=%s", r.Status, r.SessionID, bytes.TrimSpace(r.Body))
}

// Client sends raw requests to URL.
type Client struct {
	URL    string
	HTTP   *http.Client      // default http.DefaultClient
	Header map[string]string // added to every request
}

// Do sends a request with the given method, session id ("" for none) and
// body (nil for none) and reads the whole answer.
func (c *Client) Do(ctx context.Context, method, sessionID string, body []byte, extra map[string]string) (*Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.URL, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if sessionID != "" {
		req.Header.Set("Mcp-Session-Id", sessionID)
		req.Header.Set("Mcp-Protocol-Version", ProtocolVersion)
	}
	for k, v := range extra {
		req.Header.Set(k, v)
	}
	return c.do(req)
}

// Call POSTs one JSON-RPC request (id non-nil) or notification (id nil).
func (c *Client) Call(ctx context.Context, sessionID string, id any, method string, params any) (*Response, error) {
	msg := map[string]any{"jsonrpc": "2.0", "method": method}
	if id != nil {
		msg["id"] = id
	}
	if params != nil {
		msg["params"] = params
	}
	body, err := json.Marshal(msg)
	if err != nil {
		return nil, err
	}
	return c.Do(ctx, http.MethodPost, sessionID, body, nil)
}

// Initialize POSTs an initialize request; staleID, when not empty, is sent as
// its Mcp-Session-Id (what a careless client does on reconnect).
func (c *Client) Initialize(ctx context.Context, staleID string) (*Response, error) {
	body, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": 1, "method": "initialize",
		"params": map[string]any{
			"protocolVersion": ProtocolVersion,
			"capabilities":    map[string]any{},
			"clientInfo":      map[string]any{"name": "mcphttptest", "version": "0"},
		},
	})
	var extra map[string]string
	if staleID != "" {
		extra = map[string]string{"Mcp-Session-Id": staleID}
	}
	return c.Do(ctx, http.MethodPost, "", body, extra)
}

// Open initializes a session and sends notifications/initialized, returning
// the session id.
func (c *Client) Open(ctx context.Context) (string, error) {
	r, err := c.Initialize(ctx, "")
	if err != nil {
		return "", err
	}
	if r.Status != http.StatusOK || r.SessionID == "" {
		return "", fmt.Errorf("initialize: %v", r)
	}
	n, err := c.Call(ctx, r.SessionID, nil, "notifications/initialized", nil)
	if err != nil {
		return "", err
	}
	if n.Status/100 != 2 {
		return "", fmt.Errorf("notifications/initialized: %v", n)
	}
	return r.SessionID, nil
}

// Delete ends a session.
func (c *Client) Delete(ctx context.Context, sessionID string) (*Response, error) {
	return c.Do(ctx, http.MethodDelete, sessionID, nil, nil)
}

func decode(contentType string, data []byte) []map[string]any {
	mt, _, _ := mime.ParseMediaType(contentType)
	var out []map[string]any
	switch mt {
	case "application/json":
		var m map[string]any
		if json.Unmarshal(data, &m) == nil {
			out = append(out, m)
		}
	case "text/event-stream":
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), "data:")
			if !ok {
				continue
			}
			var m map[string]any
			if json.Unmarshal([]byte(strings.TrimSpace(line)), &m) == nil {
				out = append(out, m)
			}
		}
	}
	return out
}
