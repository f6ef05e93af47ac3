package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/logging"
	"github.com/switchboard-run/switchboard/internal/peertest"
	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/internal/supervisor"
	"github.com/switchboard-run/switchboard/pool"
	"github.com/switchboard-run/switchboard/pool/mcpconfig"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// defMember is an agent with a definition and nothing else: the inspector
// reads only its tools/mcp.json.
type defMember struct{ def *agentdef.Definition }

func (m defMember) Def() *agentdef.Definition  { return m.def }
func (m defMember) FirstDone() <-chan struct{} { c := make(chan struct{}); close(c); return c }
func (m defMember) Run(ctx context.Context)    { <-ctx.Done() }
func (m defMember) Status() supervisor.Status {
	return supervisor.Status{State: studioapi.StateStopped}
}
func (m defMember) AwaitRunning(context.Context, time.Duration, string) supervisor.Status {
	return m.Status()
}
func (m defMember) History() []studioapi.ControlEvent { return nil }
func (m defMember) Restart(string) error              { return supervisor.ErrNotSupervised }
func (m defMember) Stop(string) error                 { return supervisor.ErrNotSupervised }
func (m defMember) Start(string) error                { return supervisor.ErrNotSupervised }

// hostile is text a server might write to break out of the page.
const hostile = `<script>alert("pwned")</script>`

// inspectorToken is the bearer token the agent's mcp.json sends the
// go-sdk server; it must never reach the page.
const inspectorToken = "inspector-test-token-5e1f"

// hostileServer is a go-sdk MCP server over loopback HTTP with a tool, a
// text resource with markup in it, one that echoes the Authorization it
// was sent, a binary one, and a prompt whose description is markup.
func hostileServer(t *testing.T) *httptest.Server {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "hostile", Version: "0"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "probe", Description: "a tool " + hostile}, func(context.Context, *mcp.CallToolRequest, struct {
		Q string `json:"q"`
	}) (*mcp.CallToolResult, any, error) {
		return nil, nil, nil
	})
	server.AddResource(&mcp.Resource{URI: "test://markup", Name: "markup", MIMEType: "text/html", Description: hostile},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "test://markup", MIMEType: "text/html", Text: hostile}}}, nil
		})
	server.AddResource(&mcp.Resource{URI: "test://auth", Name: "auth", MIMEType: "text/plain"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "test://auth", Text: "you sent " + req.Extra.Header.Get("Authorization")}}}, nil
		})
	server.AddResource(&mcp.Resource{URI: "test://blob", Name: "blob", MIMEType: "image/png"},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "test://blob", MIMEType: "image/png", Blob: bytes.Repeat([]byte{0x89}, 300)}}}, nil
		})
	server.AddPrompt(&mcp.Prompt{Name: "greet", Description: "greets " + hostile, Arguments: []*mcp.PromptArgument{{Name: "who", Required: true}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Description: "for " + req.Params.Arguments["who"], Messages: []*mcp.PromptMessage{
				{Role: "user", Content: &mcp.TextContent{Text: "hello " + req.Params.Arguments["who"]}},
			}}, nil
		})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	t.Cleanup(srv.Close)
	return srv
}

// inspectorRig is a console whose agents name servers in tools/mcp.json,
// served over loopback HTTP as the studio routes it.
type inspectorRig struct {
	c   *Console
	srv *httptest.Server
}

func newInspectorRig(t *testing.T, defs ...*agentdef.Definition) *inspectorRig {
	t.Helper()
	rig := &inspectorRig{}
	procs := map[string]supervisor.Member{}
	var names []string
	for _, d := range defs {
		procs[d.Name] = defMember{d}
		names = append(names, d.Name)
	}
	p := pool.New(&pool.Options{})
	rig.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path := r.URL.EscapedPath()
		if IsPage(path) {
			rig.c.ServePage(w, r)
			return
		}
		if strings.HasPrefix(path, "/static/") {
			rig.c.ServeStatic(w, r)
			return
		}
		if !rig.c.ServeAPI(w, r, path) {
			NotFound(w, path)
		}
	}))
	rig.c = New(&Options{URL: rig.srv.URL, Names: names, Procs: procs, Pool: p,
		Scrub: logging.NewScrubber(nil), Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() {
		rig.srv.Close()
		p.Close()
	})
	return rig
}

func mcpJSON(t *testing.T, servers map[string]any) *mcpconfig.Config {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"servers": servers})
	cfg, err := mcpconfig.Parse(filepath.Join(t.TempDir(), "mcp.json"), b, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func (rig *inspectorRig) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(rig.srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (rig *inspectorRig) post(t *testing.T, path string, body any, origin string) (int, string) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, rig.srv.URL+path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", origin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// TestInspectorGoSDKServer: the page and the API of an HTTP server an
// agent's mcp.json names list its tools with their schemas, resources and
// prompts, read a text and a binary resource and get a prompt; nothing
// the server wrote reaches the page as markup, the mcp.json credential is
// shown nowhere, and the JSON-RPC history holds the requests, newest first.
func TestInspectorGoSDKServer(t *testing.T) {
	noLeaks(t)
	hs := hostileServer(t)
	def := &agentdef.Definition{Name: "a", MCP: mcpJSON(t, map[string]any{
		"hostile": map[string]any{"type": "http", "url": hs.URL + "?key=" + inspectorToken, "headers": map[string]string{"Authorization": "Bearer " + inspectorToken}},
	})}
	rig := newInspectorRig(t, def)

	code, body := rig.get(t, "/api/agents/a/servers")
	var list []InspectServer
	if err := json.Unmarshal([]byte(body), &list); code != http.StatusOK || err != nil || len(list) != 1 || list[0].Name != "hostile" || list[0].Endpoint != hs.URL {
		t.Fatalf("server list: %d %s (%v)", code, body, err)
	}

	code, page := rig.get(t, "/agents/a/servers/hostile")
	if code != http.StatusOK {
		t.Fatalf("page: %d %s", code, page)
	}
	for _, want := range []string{`data-tool="probe"`, `&#34;q&#34;`, `data-resource="test://markup"`, `data-prompt="greet"`, `&lt;script&gt;alert(&#34;pwned&#34;)&lt;/script&gt;`, "<b>tools/list</b>", "<b>prompts/list</b>"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s:\n%s", want, between(page, "<h2>Resources", "</table>"))
		}
	}
	if strings.Contains(page, hostile) || strings.Count(page, "<script") != 1 {
		t.Errorf("server-supplied markup reached the page as markup:\n%s", page)
	}
	if strings.Contains(page, inspectorToken) {
		t.Errorf("the page shows the mcp.json token")
	}

	code, body = rig.post(t, "/api/agents/a/servers/hostile/read", map[string]string{"uri": "test://markup"}, rig.srv.URL)
	var a InspectAnswer
	if err := json.Unmarshal([]byte(body), &a); code != http.StatusOK || err != nil || len(a.Contents) != 1 || a.Contents[0].Text != hostile || a.Contents[0].Kind != "text" {
		t.Fatalf("read markup: %d %s", code, body)
	}
	code, body = rig.post(t, "/api/agents/a/servers/hostile/read", map[string]string{"uri": "test://blob"}, rig.srv.URL)
	if a = (InspectAnswer{}); json.Unmarshal([]byte(body), &a) != nil || code != http.StatusOK || len(a.Contents) != 1 || a.Contents[0].Kind != "blob" || a.Contents[0].Size != 300 || a.Contents[0].MIMEType != "image/png" || a.Contents[0].Text != "" {
		t.Fatalf("read blob: %d %s", code, body)
	}
	code, body = rig.post(t, "/api/agents/a/servers/hostile/read", map[string]string{"uri": "test://auth"}, rig.srv.URL)
	if code != http.StatusOK || strings.Contains(body, inspectorToken) || !strings.Contains(body, logging.Redacted) {
		t.Fatalf("read auth: the echoed token must be redacted: %d %s", code, body)
	}
	code, body = rig.post(t, "/api/agents/a/servers/hostile/prompt", map[string]any{"name": "greet", "arguments": map[string]string{"who": "ada"}}, rig.srv.URL)
	if a = (InspectAnswer{}); json.Unmarshal([]byte(body), &a) != nil || code != http.StatusOK || a.Description != "for ada" || len(a.Contents) != 1 || a.Contents[0].Text != "hello ada" || a.Contents[0].Role != "user" {
		t.Fatalf("prompt: %d %s", code, body)
	}

	code, body = rig.get(t, "/api/agents/a/servers/hostile/rpc")
	var rpc []RPCEntry
	if err := json.Unmarshal([]byte(body), &rpc); code != http.StatusOK || err != nil || len(rpc) != 8 {
		t.Fatalf("rpc: %d %d entries (%v) %s", code, len(rpc), err, body)
	}
	if rpc[0].Method != "prompts/get" || !strings.Contains(string(rpc[0].Request), `"who":"ada"`) || !strings.Contains(string(rpc[0].Response), "hello ada") {
		t.Errorf("newest rpc entry: %+v", rpc[0])
	}
	if strings.Contains(body, inspectorToken) {
		t.Errorf("the rpc history shows the token: %s", body)
	}
	_, page = rig.get(t, "/agents/a/servers/hostile")
	if !strings.Contains(page, "<b>resources/read</b>") || strings.Contains(page, hostile) || strings.Contains(page, inspectorToken) {
		t.Errorf("the page's history after a read: missing, or unescaped, or with the token")
	}
}

// TestInspectorChecks: reads and gets are actions (POST, JSON, same
// origin); an unknown server or agent is named; a stdio server of an
// agent that does not allow stdio is not started; the agent page links
// each server.
func TestInspectorChecks(t *testing.T) {
	noLeaks(t)
	hs := hostileServer(t)
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	a := &agentdef.Definition{Name: "a", MCP: mcpJSON(t, map[string]any{
		"hostile": map[string]any{"type": "http", "url": hs.URL},
		"gone":    map[string]any{"type": "http", "url": gone.URL + "/mcp?key=" + inspectorToken},
	})}
	b := &agentdef.Definition{Name: "b", MCP: mcpJSON(t, map[string]any{"local": map[string]any{"command": "/bin/false", "args": []string{"--x"}}})}
	rig := newInspectorRig(t, a, b)

	if code, body := rig.post(t, "/api/agents/a/servers/hostile/read", map[string]string{"uri": "test://markup"}, "http://evil.example"); code != http.StatusForbidden {
		t.Errorf("a read from another origin: %d %s", code, body)
	}
	if code, _ := rig.get(t, "/api/agents/a/servers/hostile/read"); code != http.StatusMethodNotAllowed {
		t.Errorf("a read by GET: %d", code)
	}
	if code, body := rig.post(t, "/api/agents/a/servers/hostile/read", map[string]string{}, rig.srv.URL); code != http.StatusBadRequest || !strings.Contains(body, `\"uri\"`) {
		t.Errorf("a read without a uri: %d %s", code, body)
	}
	if code, body := rig.post(t, "/api/agents/a/servers/hostile/prompt", map[string]any{"name": "greet", "arguments": map[string]int{"who": 1}}, rig.srv.URL); code != http.StatusBadRequest {
		t.Errorf("a prompt with a number argument: %d %s", code, body)
	}
	if code, body := rig.get(t, "/api/agents/a/servers/nope"); code != http.StatusNotFound || !strings.Contains(body, "hostile") {
		t.Errorf("an unknown server: %d %s", code, body)
	}
	if _, err := rig.c.inspect("a", "nope"); !errors.Is(err, ErrNoServer) {
		t.Errorf("inspect of an unknown server: %v, want ErrNoServer", err)
	}
	if code, _ := rig.get(t, "/agents/zz/servers/hostile"); code != http.StatusNotFound {
		t.Errorf("an unknown agent's inspector page: %d", code)
	}
	if code, _ := rig.get(t, "/agents/a/servers/nope"); code != http.StatusNotFound {
		t.Errorf("an unknown server's page: %d", code)
	}

	// A server that is down: the error is shown, the key in its URL is not.
	if code, body := rig.get(t, "/api/agents/a/servers/gone"); code != http.StatusOK || !strings.Contains(body, `"toolsError"`) || strings.Contains(body, inspectorToken) {
		t.Errorf("a server that is down: %d %s", code, body)
	} else {
		t.Logf("a server that is down: %s", between(body, `"toolsError":`, `,"resources"`))
	}

	code, body := rig.get(t, "/api/agents/b/servers/local")
	var d Inspection
	if err := json.Unmarshal([]byte(body), &d); code != http.StatusOK || err != nil || !errors.Is(b.CheckServer(b.MCP.Servers[0]), agentdef.ErrStdioNotAllowed) || d.Refused == "" || d.ToolsError == "" {
		t.Fatalf("a stdio server without allow_stdio: %d %s", code, body)
	}
	if code, body := rig.post(t, "/api/agents/b/servers/local/read", map[string]string{"uri": "x://y"}, rig.srv.URL); code != http.StatusForbidden {
		t.Errorf("a read of a refused server: %d %s", code, body)
	}

	var page bytes.Buffer
	if err := pageTemplate.ExecuteTemplate(&page, "agent", agentPage{AgentDetail: studioapi.AgentDetail{AgentInfo: studioapi.AgentInfo{Name: "a"}}, Servers: rig.c.InspectServers("a")}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page.String(), `href="/agents/a/servers/hostile"`) {
		t.Errorf("the agent page does not link the inspector:\n%s", page.String())
	}
	if code, _ := rig.get(t, "/static/inspector.js"); code != http.StatusOK {
		t.Errorf("inspector.js: %d", code)
	}
}

// TestInspectorEverythingStdio: a real third-party server,
// @modelcontextprotocol/server-everything, started over stdio by the
// studio's pool from an agent's mcp.json: its resources are listed and one
// read, its prompts listed and one got with an argument.
func TestInspectorEverythingStdio(t *testing.T) {
	noLeaks(t)
	node := peertest.Node(t)
	mod := peertest.Module(t, "../../pool/testdata/peers", "@modelcontextprotocol/server-everything")
	def := &agentdef.Definition{Name: "a", AllowStdio: true, MCP: mcpJSON(t, map[string]any{
		"everything": map[string]any{"command": node, "args": []string{filepath.Join(mod, "dist", "index.js"), "stdio"}},
	})}
	rig := newInspectorRig(t, def)
	code, body := rig.get(t, "/api/agents/a/servers/everything")
	var d Inspection
	if err := json.Unmarshal([]byte(body), &d); code != http.StatusOK || err != nil {
		t.Fatalf("inspect: %d %v %s", code, err, body)
	}
	if d.ToolsError != "" || d.ResourcesError != "" || d.PromptsError != "" || len(d.Tools) == 0 || len(d.Resources) == 0 || len(d.Prompts) == 0 {
		t.Fatalf("everything's listings: %d tools (%s), %d resources (%s), %d prompts (%s)", len(d.Tools), d.ToolsError, len(d.Resources), d.ResourcesError, len(d.Prompts), d.PromptsError)
	}
	code, body = rig.post(t, "/api/agents/a/servers/everything/read", map[string]string{"uri": d.Resources[0].URI}, rig.srv.URL)
	var read, a InspectAnswer
	if err := json.Unmarshal([]byte(body), &read); code != http.StatusOK || err != nil || len(read.Contents) == 0 || read.Contents[0].Size == 0 {
		t.Fatalf("read %s: %d %s", d.Resources[0].URI, code, body)
	}
	// The prompt with the most arguments, each given a value.
	p := d.Prompts[0]
	for _, q := range d.Prompts {
		if len(q.Arguments) > len(p.Arguments) {
			p = q
		}
	}
	args := map[string]string{}
	for _, arg := range p.Arguments {
		args[arg.Name] = "1"
	}
	code, body = rig.post(t, "/api/agents/a/servers/everything/prompt", map[string]any{"name": p.Name, "arguments": args}, rig.srv.URL)
	if json.Unmarshal([]byte(body), &a) != nil || code != http.StatusOK || len(a.Contents) == 0 {
		t.Fatalf("prompt %s %v: %d %s", p.Name, args, code, body)
	}
	t.Logf("server-everything: %d tools, %d resources, %d templates, %d prompts; read %s (%s %d bytes); got %s", len(d.Tools), len(d.Resources), len(d.Templates), len(d.Prompts), d.Resources[0].URI, read.Contents[0].Kind, read.Contents[0].Size, p.Name)
}
