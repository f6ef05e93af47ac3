package agentserver

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/mcphttp"
	"github.com/switchboard-run/switchboard/internal/mcphttp/mcphttptest"
	"github.com/switchboard-run/switchboard/internal/proctest"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// TestSecurity runs the security battery of docs/SECURITY.md against the
// real `switchboard agent serve`, then checks that the process is still the
// one that started and still serves.
func TestSecurity(t *testing.T) {
	p, url := startServe(t, t.TempDir(), "--agent", bundledAgent("abacus"))
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c := &mcphttptest.Client{URL: url, HTTP: &http.Client{Transport: tr}}
	ctx := t.Context()

	t.Run("foreign Origin is 403", func(t *testing.T) { mcphttptest.CheckOrigin(t, ctx, c) })
	t.Run("foreign Host is 403", func(t *testing.T) { mcphttptest.CheckHost(t, ctx, c) })
	t.Run("session with another credential is 404", func(t *testing.T) { mcphttptest.CheckCrossCredential(t, ctx, c) })
	t.Run("session ids are 128-bit random", func(t *testing.T) { mcphttptest.SessionIDs(t, ctx, c, 256) })
	t.Run("oversized body is 413", func(t *testing.T) { mcphttptest.CheckBodyLimit(t, ctx, c, mcphttp.DefaultMaxBodyBytes) })
	t.Run("malformed messages get JSON-RPC errors", func(t *testing.T) { mcphttptest.CheckMalformed(t, ctx, c) })

	if !proctest.Alive(p.Cmd.Process.Pid) {
		t.Fatalf("agent serve died; stderr:\n%s", p.Stderr())
	}
	mcphttptest.CheckReconnect(t, ctx, c, "calculate", map[string]any{"expression": "6*7"}, "42")
}

// TestSecurityToken: an agent server with a token answers 401 with a Bearer
// challenge to a request without it or with another one, before reading the
// body or looking up a session.
func TestSecurityToken(t *testing.T) {
	const token = "correct-horse-battery-staple"
	s, err := New(&agentdef.Definition{Name: "tok"}, &Options{DataDir: t.TempDir(), Token: token})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		s.CloseSessions()
		ts.Close()
		s.Close()
	})
	for _, auth := range []string{"", "Bearer wrong", "Bearer " + token + "x", "Basic " + token, token} {
		c := &mcphttptest.Client{URL: ts.URL, HTTP: ts.Client(), Header: map[string]string{}}
		if auth != "" {
			c.Header["Authorization"] = auth
		}
		r, err := c.Initialize(t.Context(), "")
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != http.StatusUnauthorized || !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Bearer") || r.SessionID != "" {
			t.Errorf("initialize with Authorization %q: %v, want 401 with a Bearer challenge", auth, r)
		}
	}
	c := &mcphttptest.Client{URL: ts.URL, HTTP: ts.Client(), Header: map[string]string{"Authorization": "Bearer " + token}}
	if _, err := c.Open(t.Context()); err != nil {
		t.Errorf("with the token: %v", err)
	}
}

// TestStdioServersOnlyWhenAllowed: an agent whose tools/mcp.json declares a
// stdio server starts it only if its agent.json sets allow_stdio. The stdio
// "server" is a shell that leaves a file behind when it starts; the agent's
// ask tool runs a turn, whose discovery is where sibling servers are
// started.
func TestStdioServersOnlyWhenAllowed(t *testing.T) {
	for _, allow := range []bool{false, true} {
		dir := t.TempDir()
		marker := filepath.Join(dir, "started")
		agent := filepath.Join(dir, "agents", "prober")
		if err := os.MkdirAll(filepath.Join(agent, "tools"), 0o755); err != nil {
			t.Fatal(err)
		}
		def, _ := json.Marshal(map[string]any{
			"name": "prober", "description": "probes stdio servers",
			"model": map[string]any{"name": "builtin"}, "allow_stdio": allow,
		})
		mcpJSON, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
			"local": map[string]any{"command": "/bin/sh", "args": []string{"-c", "echo started > " + marker}},
		}})
		for name, data := range map[string][]byte{"agent.json": def, "tools/mcp.json": mcpJSON} {
			if err := os.WriteFile(filepath.Join(agent, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}

		p, url := startServe(t, dir, "--agent", agent)
		cs := connect(t, url, nil)
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"task": "what is 2 plus 3"}})
		cancel()
		if err != nil {
			t.Fatalf("allow_stdio %v: ask: %v; stderr:\n%s", allow, err, p.Stderr())
		}
		out, _ := json.Marshal(res.StructuredContent)
		_, statErr := os.Stat(marker)
		started := statErr == nil
		if !started && !errors.Is(statErr, fs.ErrNotExist) {
			t.Fatal(statErr)
		}
		switch {
		case !allow && started:
			t.Errorf("allow_stdio false: the stdio server was started; ask: %s", out)
		case !allow && !strings.Contains(string(out), "does not allow stdio servers"):
			t.Errorf("allow_stdio false: ask does not say why the server is unavailable: %s", out)
		case allow && !started:
			t.Errorf("allow_stdio true: the stdio server was never started; ask: %s", out)
		}
		t.Logf("allow_stdio %v: started %v; ask: %.300s", allow, started, out)
	}
}
