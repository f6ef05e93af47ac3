package studio

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/projecttest"
)

// pwn is a server's text that would run script if it reached the page as
// markup.
const pwn = `<img src=x onerror="window.__pwned=1"><script>window.__pwned=1</script>`

// TestInspectorInBrowser: in headless Chromium, a person opens oracle's
// page, follows the link to the inspector of a third-party HTTP server its
// tools/mcp.json names, sees its tool with the schema, reads a resource
// whose text is markup (shown as text, not run), gets a prompt with an
// argument, and finds both requests in the JSON-RPC history. With
// SWITCHBOARD_UPDATE_SCREENSHOTS set, docs/studio-inspector.png is written.
func TestInspectorInBrowser(t *testing.T) {
	bin := findChromium(t)
	server := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "0"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "lookup", Description: "looks a note up"}, func(context.Context, *mcp.CallToolRequest, struct {
		Topic string `json:"topic" jsonschema:"what to look up"`
	}) (*mcp.CallToolResult, any, error) {
		return nil, nil, nil
	})
	server.AddResource(&mcp.Resource{URI: "notes://markup", Name: "markup", MIMEType: "text/html", Description: "a note " + pwn},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "notes://markup", MIMEType: "text/html", Text: pwn}}}, nil
		})
	server.AddPrompt(&mcp.Prompt{Name: "summarize", Description: "summarizes " + pwn, Arguments: []*mcp.PromptArgument{{Name: "topic", Required: true}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "summarize " + req.Params.Arguments["topic"]}}}}, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	t.Cleanup(hs.Close)

	dir := projecttest.New(t, "oracle", "abacus")
	cfg := `{"mcpServers": {"notes": {"url": "` + hs.URL + `"}}}`
	if err := os.WriteFile(filepath.Join(dir, "agents", "oracle", "tools", "mcp.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startStudio(t, dir, nil)
	b := openBrowser(t, bin, 1280, 1000)

	b.navigate(s.URL() + "/agents/oracle")
	b.waitPage("agent")
	b.click(`#servers a[href="/agents/oracle/servers/notes"]`)
	b.waitFor(`document.body.dataset.page === "inspector" && document.body.dataset.ready === "1"`, "the inspector page")
	if got := b.text(`#tools details.tool[data-tool="lookup"] summary`); got != "lookup looks a note up" {
		t.Errorf("the tool reads %q", got)
	}
	b.click(`button[data-read="notes://markup"]`)
	b.waitFor(`document.querySelector("#read-result pre") !== null`, "the resource's text")
	if got := b.text("#read-result pre"); got != pwn {
		t.Errorf("the resource's text reads %q, want it as text", got)
	}
	b.click(`details.prompt[data-prompt="summarize"] summary`)
	b.typeText(`form.prompt-form[data-prompt="summarize"] input[name="topic"]`, "the week")
	b.click(`form.prompt-form[data-prompt="summarize"] button[type="submit"]`)
	b.waitFor(`document.querySelector(".prompt-result pre") !== null`, "the prompt's message")
	if got := b.text(".prompt-result pre"); got != "summarize the week" {
		t.Errorf("the prompt's message reads %q", got)
	}
	b.waitFor(`[...document.querySelectorAll("#rpc details.rpc b")].map(e => e.innerText).slice(0, 2).join(",") === "prompts/get,resources/read"`, "the get and the read in the JSON-RPC history")
	b.click(`#rpc details.rpc summary`)
	var pwned bool
	var scripts int
	b.eval(`window.__pwned === 1`, &pwned)
	b.eval(`document.querySelectorAll("script").length`, &scripts)
	if pwned || scripts != 1 {
		t.Errorf("the server's markup ran or was added: pwned %v, %d scripts", pwned, scripts)
	}
	png := b.screenshot()
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) || len(png) < 10000 {
		t.Errorf("screenshot: %d bytes", len(png))
	}
	if os.Getenv("SWITCHBOARD_UPDATE_SCREENSHOTS") != "" {
		if err := os.WriteFile(filepath.Join(moduleRoot, "docs", "studio-inspector.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestInspectorSibling: a sibling that oracle's bundled tools/mcp.json
// names through the studio's URL (abacus) is inspected through the
// studio's proxy route: its tools are listed, with the request in the
// JSON-RPC history.
func TestInspectorSibling(t *testing.T) {
	dir := projecttest.New(t, "oracle", "abacus")
	s := startStudio(t, dir, nil)
	resp, err := http.Get(s.URL() + "/api/agents/oracle/servers/abacus")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var d struct {
		Endpoint   string
		Sibling    string
		ToolsError string
		Tools      []struct{ Name string }
		RPC        []struct{ Method string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %v", resp.StatusCode, err)
	}
	var names []string
	for _, tool := range d.Tools {
		names = append(names, tool.Name)
	}
	if d.Endpoint != s.URL()+"/api/agents/abacus/mcp" || d.Sibling != "abacus" || d.ToolsError != "" || !slices.Contains(names, "calculate") || len(d.RPC) != 4 {
		t.Errorf("abacus through the proxy: endpoint %s (sibling %q), tools %v (%s), %d requests", d.Endpoint, d.Sibling, names, d.ToolsError, len(d.RPC))
	}
}
