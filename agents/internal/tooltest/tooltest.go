// Package tooltest connects a test client to a bundled agent's tools and
// calls them, for the tests of the toolsets under agents/.
package tooltest

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Connect connects a client to server through in-memory transports. end
// closes the client's session and waits for the server's; it may be called
// more than once and also runs at cleanup.
func Connect(t testing.TB, server *mcp.Server) (cs *mcp.ClientSession, end func()) {
	t.Helper()
	return ConnectWith(t, server, nil)
}

// ConnectWith is Connect with the client's options (an elicitation
// handler, for example).
func ConnectWith(t testing.TB, server *mcp.Server, opts *mcp.ClientOptions) (cs *mcp.ClientSession, end func()) {
	t.Helper()
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err = mcp.NewClient(&mcp.Implementation{Name: "test", Version: "test"}, opts).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	end = sync.OnceFunc(func() {
		cs.Close()
		ss.Wait()
	})
	t.Cleanup(end)
	return cs, end
}

// Call calls a tool, fails the test on a protocol error, and decodes the
// structured content into out (if non-nil and the call succeeded).
func Call(t testing.TB, cs *mcp.ClientSession, name string, args map[string]any, out any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s(%v): protocol error: %v", name, args, err)
	}
	if out != nil && !res.IsError {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: decode structured content %s: %v", name, b, err)
		}
	}
	return res
}
