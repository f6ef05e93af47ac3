package delegation_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/switchboard-run/switchboard/pool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// sibling starts a real go-sdk MCP server over loopback HTTP, with the tools
// that add installs, and returns its description for the pool. The server
// is closed when the test ends.
func sibling(t *testing.T, name string, add func(*mcp.Server)) *pool.Server {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: name, Version: "test"}, nil)
	add(s)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return &pool.Server{Name: name, URL: ts.URL}
}

// dropping wraps h so that a tools/call of the named tool reaches the server
// process (its body is read) and then loses its answer: the connection is
// closed without a response.
func dropping(h http.Handler, tool string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if r.Method == http.MethodPost && bytes.Contains(body, []byte(`"tools/call"`)) && bytes.Contains(body, []byte(`"name":"`+tool+`"`)) {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		h.ServeHTTP(w, r)
	})
}

// text is a tool result with one text content.
func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// objectSchema is the smallest valid input schema.
var objectSchema = map[string]any{"type": "object"}

// addRaw adds a tool with a hand-written handler.
func addRaw(s *mcp.Server, name string, h mcp.ToolHandler) {
	s.AddTool(&mcp.Tool{Name: name, Description: name + " tool", InputSchema: objectSchema}, h)
}
