package agentserver

import (
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// TestOversizedArgumentIsNotEchoed: an argument past the tool's schema
// (abacus's expression, at most 1,000 characters) was quoted whole in the
// validation error, 4,000,352 bytes for a 4 MB argument. The error now
// keeps its reason and a bounded glimpse of the value.
func TestOversizedArgumentIsNotEchoed(t *testing.T) {
	_, ts := newTestServer(t, &agentdef.Definition{Name: "abacus", Tools: []string{"abacus"}})
	cs := connect(t, ts.URL, nil)
	expr := "1" + strings.Repeat("+1", 100_000)
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "calculate", Arguments: map[string]any{"expression": expr}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || len(res.Content) != 1 {
		t.Fatalf("result %+v, want one tool error", res)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if len(text) > maxToolErrorText+100 || !strings.Contains(text, "maxLength") || !strings.Contains(text, "more bytes of this error left out") {
		t.Fatalf("a %d-byte argument came back in a %d-byte error: %.300q", len(expr), len(text), text)
	}

	// A call that fails as a JSON-RPC error (an unknown tool) comes back
	// as a typed nil result: the bound leaves it, and the server lives on
	// (it panicked there, and every later request of the session failed).
	if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "no_such_tool", Arguments: map[string]any{}}); err == nil {
		t.Fatal("an unknown tool succeeded")
	}

	// A short error is passed as it is.
	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "calculate", Arguments: map[string]any{"expression": "1/0"}})
	if err != nil {
		t.Fatal(err)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; !res.IsError || strings.Contains(text, "left out") {
		t.Fatalf("1/0: %+v %q, want its own error untouched", res, text)
	}
}

func TestBoundText(t *testing.T) {
	s := strings.Repeat("é", 10) // 2 bytes each
	if got := boundText(s, 5); got != "éé… (16 more bytes of this error left out)" {
		t.Fatalf("boundText = %q", got)
	}
}
