package studio

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/mcphttp"
	"github.com/switchboard-run/switchboard/internal/mcphttp/mcphttptest"
	"github.com/switchboard-run/switchboard/internal/projecttest"
	"github.com/switchboard-run/switchboard/internal/studioapi"
)

// TestSecurity runs the security battery of docs/SECURITY.md against a
// running studio and the real agent process behind /api/agents/abacus/mcp,
// then checks that the agent never restarted: no input took it down.
func TestSecurity(t *testing.T) {
	s := startStudio(t, projecttest.New(t, "abacus"), nil)
	before := waitAgent(t, s, "abacus", func(a studioapi.AgentInfo) bool { return a.State == studioapi.StateRunning })
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c := &mcphttptest.Client{URL: s.AgentURL("abacus"), HTTP: &http.Client{Transport: tr}}
	ctx := t.Context()

	t.Run("foreign Origin is 403", func(t *testing.T) { mcphttptest.CheckOrigin(t, ctx, c) })
	t.Run("foreign Host is 403", func(t *testing.T) { mcphttptest.CheckHost(t, ctx, c) })
	t.Run("session with another credential is 404", func(t *testing.T) { mcphttptest.CheckCrossCredential(t, ctx, c) })
	t.Run("session ids are 128-bit random", func(t *testing.T) { mcphttptest.SessionIDs(t, ctx, c, 256) })
	t.Run("oversized body is 413", func(t *testing.T) { mcphttptest.CheckBodyLimit(t, ctx, c, mcphttp.DefaultMaxBodyBytes) })
	t.Run("malformed messages get JSON-RPC errors", func(t *testing.T) { mcphttptest.CheckMalformed(t, ctx, c) })
	t.Run("path escapes are 404", func(t *testing.T) { checkPathEscapes(t, s) })

	after := s.Agents()[0]
	if after.PID != before.PID || after.Restarts != before.Restarts || after.State != studioapi.StateRunning {
		t.Errorf("the agent did not survive the battery: before %+v, after %+v", before, after)
	}
}

// checkPathEscapes sends, byte for byte over TCP, request targets that try
// to reach an agent's MCP endpoint by another spelling of its path. The
// exact path is served; every other spelling is a 404 from the studio's
// router, and nothing reaches the agent.
func checkPathEscapes(t *testing.T, s *Studio) {
	u, err := url.Parse(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	send := func(target string) (int, string) {
		t.Helper()
		conn, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
			target, u.Host, len(body), body)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("POST %s: %v", target, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Mcp-Session-Id") + string(b)
	}
	if code, got := send("/api/agents/abacus/mcp"); code != http.StatusOK || !strings.Contains(got, "protocolVersion") {
		t.Fatalf("the agent's own endpoint: %d %.200s", code, got)
	}
	for _, target := range []string{
		"/api/agents/abacus/../abacus/mcp",
		"/api/agents/x/../abacus/mcp",
		"/api/agents/abacus/%2e%2e/abacus/mcp",
		"/api/agents/%2e%2e/agents/abacus/mcp",
		"/api/agents/abacus%2Fmcp",
		"/api/agents/abacus%2fmcp",
		"/api/agents/abacus%252Fmcp",
		"/api/agents/..%2Fagents%2Fabacus/mcp",
		"/api%2Fagents%2Fabacus%2Fmcp",
		"//api/agents/abacus/mcp",
		"/api//agents/abacus/mcp",
		"/api/agents//abacus/mcp",
		"/api/agents/abacus//mcp",
		"/api/agents/abacus/mcp/",
		"/api/agents/abacus/mcp/..",
		"/api/agents/abacus/mcp/x",
		"/api/agents/./abacus/mcp",
		"/api/agents/abacus/./mcp",
		"/api/agents/ABACUS/mcp",
		"/api/agents/%61bacus/mcp",
		"/api/agents/abacus%00/mcp",
		"/api/agents/abacus;x/mcp",
		"/api/agents/abacus%5Cmcp",
		"/api/agents/abacus\\mcp",
		"/api/agents/mcp",
		"/api/agents/abacus/MCP",
		"/API/agents/abacus/mcp",
	} {
		code, got := send(target)
		t.Logf("POST %s: %d", target, code)
		if code != http.StatusNotFound || strings.Contains(got, "protocolVersion") {
			t.Errorf("POST %s: %d %.200s, want 404 and nothing from the agent", target, code, got)
		}
	}
	// /api/agents/<name> is the agent page's data: GET only.
	if code, got := send("/api/agents/abacus"); code != http.StatusMethodNotAllowed || strings.Contains(got, "protocolVersion") {
		t.Errorf("POST /api/agents/abacus: %d %.200s, want 405 and nothing from the agent", code, got)
	}
}

// TestSecurityToken: with a token, every endpoint but /healthz wants it: no
// token or a wrong one is 401 with a Bearer challenge, before anything is
// routed; the right one is served.
func TestSecurityToken(t *testing.T) {
	const token = "correct-horse-battery-staple"
	s := startStudio(t, projecttest.New(t, "abacus"), &Options{Token: token})
	waitAgent(t, s, "abacus", func(a studioapi.AgentInfo) bool { return a.State == studioapi.StateRunning })
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr}
	do := func(method, path, auth string, body string) (int, http.Header) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, s.URL()+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, resp.Header
	}
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`
	for _, ep := range []struct{ method, path, body string }{
		{"POST", "/api/agents/abacus/mcp", initialize},
		{"GET", "/api/agents", ""},
		{"GET", "/api/overview", ""},
		{"GET", "/api/delegations", ""},
		{"GET", "/api/auth", ""},
		{"GET", "/metrics", ""},
		{"GET", "/", ""},
	} {
		for _, auth := range []string{"", "Bearer wrong", "Bearer " + token + "x", "Basic " + token, token} {
			code, hdr := do(ep.method, ep.path, auth, ep.body)
			if code != http.StatusUnauthorized || !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s %s with Authorization %q: %d, want 401 with a Bearer challenge", ep.method, ep.path, auth, code)
			}
		}
		if code, _ := do(ep.method, ep.path, "Bearer "+token, ep.body); code != http.StatusOK {
			t.Errorf("%s %s with the token: %d, want 200", ep.method, ep.path, code)
		}
	}
	if code, _ := do("GET", "/healthz", "", ""); code != http.StatusOK {
		t.Errorf("/healthz without a token: %d, want 200", code)
	}
}
