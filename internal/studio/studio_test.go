package studio

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/mcphttp/mcphttptest"
	"github.com/switchboard-run/switchboard/internal/proctest"
	"github.com/switchboard-run/switchboard/internal/projecttest"
	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/pool"
)

// startStudio starts an in-process studio over dir on an ephemeral port and
// waits for its agents' first start.
func startStudio(t *testing.T, dir string, opts *Options) *Studio {
	t.Helper()
	var o Options
	if opts != nil {
		o = *opts
	}
	o.Dir = dir
	if o.Listen == "" {
		o.Listen = "127.0.0.1:0"
	}
	o.Executable = switchboardBin
	out := &syncBuf{}
	o.AgentOutput = out
	s, err := Start(t.Context(), &o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("agents' output:\n%s", out.String())
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	s.WaitReady(ctx)
	return s
}

func get(t *testing.T, url string, hdr map[string]string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, body
}

func listAgents(t *testing.T, base string, hdr map[string]string) map[string]studioapi.AgentInfo {
	t.Helper()
	code, _, body := get(t, base+"/api/agents", hdr)
	if code != http.StatusOK {
		t.Fatalf("GET /api/agents: %d %s", code, body)
	}
	var list []studioapi.AgentInfo
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatalf("GET /api/agents: %v: %s", err, body)
	}
	m := map[string]studioapi.AgentInfo{}
	for _, a := range list {
		m[a.Name] = a
	}
	return m
}

// TestStudioInProcess covers the studio as a library: routing, the agent
// list, the proxy with a go-sdk client, and a restart after a crash, which
// a pool through the proxy recovers from on its next call.
func TestStudioInProcess(t *testing.T) {
	dir := projecttest.New(t, "abacus", "packrat")
	s := startStudio(t, dir, nil)
	base := s.URL()

	t.Run("healthz", func(t *testing.T) {
		if code, _, body := get(t, base+"/healthz", nil); code != http.StatusOK || strings.TrimSpace(string(body)) != "ok" {
			t.Fatalf("/healthz: %d %q", code, body)
		}
	})

	t.Run("agents list", func(t *testing.T) {
		agents := listAgents(t, base, nil)
		for _, name := range []string{"abacus", "packrat"} {
			a, ok := agents[name]
			if !ok || a.State != studioapi.StateRunning || a.PID == 0 || a.URL != base+"/api/agents/"+name+"/mcp" || a.Description == "" {
				t.Fatalf("agent %s: %+v", name, a)
			}
			if !contains(a.Tools, "ask") {
				t.Errorf("agent %s tools %v (error %q), want ask among them", name, a.Tools, a.ToolsError)
			}
		}
		if !contains(agents["abacus"].Tools, "calculate") || !contains(agents["packrat"].Tools, "store_note") {
			t.Errorf("tools: abacus %v, packrat %v", agents["abacus"].Tools, agents["packrat"].Tools)
		}
	})

	t.Run("go-sdk client through the proxy", func(t *testing.T) {
		c := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, nil)
		cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: s.AgentURL("abacus")}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		tools, err := cs.ListTools(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tl := range tools.Tools {
			names = append(names, tl.Name)
		}
		if !contains(names, "calculate") {
			t.Fatalf("tools %v", names)
		}
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "calculate", Arguments: map[string]any{"expression": "6*7"}})
		if err != nil {
			t.Fatal(err)
		}
		if res.IsError || !strings.Contains(toolText(res), "42") {
			t.Fatalf("calculate 6*7: %s", toolText(res))
		}
	})

	t.Run("reconnect sequence through the proxy", func(t *testing.T) {
		c := &mcphttptest.Client{URL: s.AgentURL("abacus")}
		mcphttptest.CheckReconnect(t, t.Context(), c, "calculate", map[string]any{"expression": "2+3"}, "5")
	})

	t.Run("routing", func(t *testing.T) {
		for _, path := range []string{
			"/api/agents/abacus/../packrat/mcp",
			"/api/agents/aba%2Fcus/mcp",
			"/api/agents/%2e%2e/mcp",
			"/api/agents/abacus%2Fmcp",
			"/api/agents/abacus/mcp/extra",
			"/api/agents/abacus/mcp/",
			"/api/agents/abacus/nope",
			"/api/agents//mcp",
			"/api/agents/./mcp",
			"/api/nope",
			"/nope",
			"/static/index.html", // the page's template is not a static file
			"/static/../page/studio.js",
		} {
			code, _, body := get(t, base+path, nil)
			if code != http.StatusNotFound {
				t.Errorf("GET %s: %d %s, want 404", path, code, body)
			}
		}
		code, _, body := get(t, base+"/api/agents/nosuch/mcp", nil)
		var resp struct {
			Error struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if code != http.StatusNotFound || json.Unmarshal(body, &resp) != nil ||
			!strings.Contains(resp.Error.Message, `unknown agent "nosuch"`) || !strings.Contains(resp.Error.Message, "abacus, packrat") {
			t.Fatalf("unknown agent: %d %s, want 404 with a JSON-RPC error naming it and the known agents", code, body)
		}
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPut, s.AgentURL("abacus"), nil)
		resp2, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp2.Body.Close()
		if resp2.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("PUT: %d, want 405", resp2.StatusCode)
		}
	})

	t.Run("restart after a crash", func(t *testing.T) {
		// A pool session through the proxy, opened before the crash.
		p := pool.New(nil)
		defer p.Close()
		srv := &pool.Server{Name: "abacus", URL: s.AgentURL("abacus")}
		calc := func(expr, want string) {
			t.Helper()
			res, err := p.CallTool(t.Context(), srv, &mcp.CallToolParams{Name: "calculate", Arguments: map[string]any{"expression": expr}})
			if err != nil {
				t.Fatalf("calculate %s: %v", expr, err)
			}
			if res.IsError || !strings.Contains(toolText(res), want) {
				t.Fatalf("calculate %s: %s", expr, toolText(res))
			}
		}
		calc("1+1", "2")

		before := listAgents(t, base, nil)["abacus"]
		if err := killPID(before.PID); err != nil {
			t.Fatal(err)
		}
		after := waitAgent(t, s, "abacus", func(a studioapi.AgentInfo) bool {
			return a.State == studioapi.StateRunning && a.PID != before.PID && a.Restarts > before.Restarts
		})
		if proctest.Alive(before.PID) {
			t.Errorf("the killed process %d is still alive", before.PID)
		}
		if after.LastExit == "" || after.LastError != "" {
			t.Errorf("after a crash and a restart: %+v; want the exit kept as last_exit, no current last_error", after)
		}
		// The upstream session died with the old process; the studio
		// re-establishes it for the pool, whose next call succeeds on the
		// session it has.
		calc("2+2", "4")
		if st := p.Stats(); st.Reinitializations != 0 {
			t.Errorf("pool stats %+v: the studio should have kept the session", st)
		}
		c := &mcphttptest.Client{URL: s.AgentURL("abacus")}
		mcphttptest.CheckReconnect(t, t.Context(), c, "calculate", map[string]any{"expression": "3+4"}, "7")
	})
}

// waitAgent polls the studio until agent name satisfies ok (bounded).
func waitAgent(t *testing.T, s *Studio, name string, ok func(studioapi.AgentInfo) bool) studioapi.AgentInfo {
	t.Helper()
	deadline := time.NewTimer(90 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, a := range s.Agents() {
			if a.Name == name && ok(a) {
				return a
			}
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("agent %s never reached the expected state: %+v", name, s.Agents())
		}
	}
}

func TestAgentDown(t *testing.T) {
	dir := projecttest.New(t)
	// An agent whose server refuses to start: it names a toolset that does
	// not exist, so every start exits 1.
	writeAgent(t, dir, "abacus", "broken", func(d map[string]any) { d["tools"] = []string{"nope"} })
	s := startStudio(t, dir, &Options{MinBackoff: time.Minute})

	a := waitAgent(t, s, "broken", func(a studioapi.AgentInfo) bool { return a.State == studioapi.StateRestarting })
	if !strings.Contains(a.LastError, "exited before it was ready") || !strings.Contains(a.LastError, "nope") {
		t.Errorf("last error %q, want the exit and the agent's own complaint", a.LastError)
	}
	code, hdr, body := get(t, s.AgentURL("broken"), nil)
	if code != http.StatusServiceUnavailable {
		t.Fatalf("down agent: %d %s, want 503", code, body)
	}
	if ra := hdr.Get("Retry-After"); ra == "" || ra == "0" {
		t.Errorf("Retry-After %q", ra)
	}
	if !strings.Contains(string(body), "agent broken is restarting") || !strings.Contains(string(body), `"jsonrpc":"2.0"`) {
		t.Errorf("503 body %s", body)
	}
	if err := s.WaitReady(t.Context()); err == nil || !strings.Contains(err.Error(), "broken") {
		t.Errorf("WaitReady: %v, want an error naming the broken agent", err)
	}
}

func TestExposure(t *testing.T) {
	dir := projecttest.New(t)
	for _, listen := range []string{"0.0.0.0:0", ":0", "[::]:0", "example.com:0"} {
		_, err := Start(t.Context(), &Options{Dir: dir, Listen: listen, Executable: switchboardBin})
		if !errors.Is(err, ErrTokenRequired) || !strings.Contains(err.Error(), studioapi.EnvToken) {
			t.Errorf("Listen %s without a token: %v, want ErrTokenRequired naming %s", listen, err, studioapi.EnvToken)
		}
	}

	s := startStudio(t, dir, &Options{Listen: "0.0.0.0:0", Token: "s3cret"})
	if !strings.HasPrefix(s.URL(), "http://127.0.0.1:") {
		t.Errorf("URL %s, want the loopback address of the wildcard listener", s.URL())
	}
	if code, hdr, _ := get(t, s.URL()+"/api/agents", nil); code != http.StatusUnauthorized || !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("/api/agents without the token: %d, want 401 with a Bearer challenge", code)
	}
	if code, _, _ := get(t, s.URL()+"/api/agents/x/mcp", map[string]string{"Authorization": "Bearer wrong"}); code != http.StatusUnauthorized {
		t.Errorf("/api/agents/x/mcp with a wrong token: %d, want 401", code)
	}
	if code, _, body := get(t, s.URL()+"/api/agents", map[string]string{"Authorization": "Bearer s3cret"}); code != http.StatusOK {
		t.Errorf("/api/agents with the token: %d %s", code, body)
	}
	if code, _, _ := get(t, s.URL()+"/healthz", nil); code != http.StatusOK {
		t.Errorf("/healthz needs no token: %d", code)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func toolText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

type syncBuf = proctest.SyncBuffer
