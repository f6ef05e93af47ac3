package agents

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestToolsetsOverHTTP serves every registered toolset the way an agent
// server does (Lookup, then the Toolset on a fresh mcp.Server, behind a
// Streamable HTTP handler) and calls a tool of each through a real client.
func TestToolsetsOverHTTP(t *testing.T) {
	wantTools := map[string][]string{
		"abacus":  {"calculate", "convert_units", "date_math"},
		"packrat": {"delete_note", "delete_notes", "get_note", "list_notes", "search_notes", "store_note"},
		"testkit": {"slow_effect"},
		"conformance": {"json_schema_2020_12_tool", "test_audio_content", "test_elicitation", "test_elicitation_sep1034_defaults", "test_elicitation_sep1330_enums",
			"test_embedded_resource", "test_error_handling", "test_image_content", "test_multiple_content_types", "test_reconnection", "test_sampling",
			"test_simple_text", "test_tool_with_logging", "test_tool_with_progress", "test_update_resource"},
	}
	probe := map[string]*mcp.CallToolParams{
		"abacus":      {Name: "calculate", Arguments: map[string]any{"expression": "6 * 7"}},
		"packrat":     {Name: "store_note", Arguments: map[string]any{"text": "hello"}},
		"testkit":     {Name: "slow_effect", Arguments: map[string]any{"id": "x"}},
		"conformance": {Name: "test_simple_text", Arguments: map[string]any{}},
	}
	if got := Names(); !slices.Equal(got, []string{"abacus", "conformance", "packrat", "testkit"}) {
		t.Fatalf("Names() = %v", got)
	}
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			toolset, ok := Lookup(name)
			if !ok {
				t.Fatalf("Lookup(%q) failed", name)
			}
			server := mcp.NewServer(&mcp.Implementation{Name: name, Version: "test"}, nil)
			closer, err := toolset(server, Env{DataDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			if closer != nil {
				t.Cleanup(func() {
					if err := closer.Close(); err != nil {
						t.Errorf("close %s: %v", name, err)
					}
				})
			}
			hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
			t.Cleanup(hs.Close)
			transport := &http.Transport{}
			t.Cleanup(transport.CloseIdleConnections)

			cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "test"}, nil).Connect(ctx,
				&mcp.StreamableClientTransport{Endpoint: hs.URL, HTTPClient: &http.Client{Transport: transport}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cs.Close() })

			res, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tool := range res.Tools {
				names = append(names, tool.Name)
			}
			slices.Sort(names)
			if !slices.Equal(names, wantTools[name]) {
				t.Errorf("tools = %v, want %v", names, wantTools[name])
			}
			out, err := cs.CallTool(ctx, probe[name])
			if err != nil || out.IsError {
				t.Fatalf("%s: err=%v result=%+v", probe[name].Name, err, out)
			}
		})
	}
	if _, ok := Lookup("nonesuch"); ok {
		t.Error(`Lookup("nonesuch") succeeded`)
	}
}

// TestMergeHandlers: the named toolsets' server-wide handlers together,
// and one method served by two toolsets refused, naming both.
func TestMergeHandlers(t *testing.T) {
	h, err := MergeHandlers([]string{"packrat", "abacus"})
	if err != nil || h.Complete != nil || h.Subscribe != nil || h.Unsubscribe != nil {
		t.Errorf("packrat and abacus: %+v, %v; want no handlers", h, err)
	}
	h, err = MergeHandlers([]string{"packrat", "conformance"})
	if err != nil || h.Complete == nil || h.Subscribe == nil || h.Unsubscribe == nil {
		t.Errorf("packrat and conformance: %+v, %v; want completion and subscriptions", h, err)
	}
	if _, err := MergeHandlers([]string{"conformance", "conformance"}); err == nil || !strings.Contains(err.Error(), `"conformance" and "conformance"`) {
		t.Errorf("the same methods from two toolsets: %v, want an error naming both", err)
	}
}
