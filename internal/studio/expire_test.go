package studio

import (
	"bufio"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/agentserver"
	"github.com/switchboard-run/switchboard/internal/projecttest"
	"github.com/switchboard-run/switchboard/internal/studioapi"
)

// agentSessions scrapes the sessions gauge of agent name's process.
func agentSessions(t *testing.T, c *apiClient, s *Studio, name string) int {
	t.Helper()
	st := s.agents[name].proc.Status()
	if st.Upstream == nil {
		t.Fatalf("agent %s has no address", name)
	}
	req, err := http.NewRequestWithContext(t.Context(), "GET", "http://"+st.Upstream.Host+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, agentserver.MetricSessions+"{") {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		return int(v)
	}
	t.Fatalf("agent %s's /metrics (%d) has no %s", name, resp.StatusCode, agentserver.MetricSessions)
	return 0
}

// TestExpiredBindingClosesTheAgentSession: when the studio's proxy forgets
// a session for being idle past its TTL, it closes the session at the
// agent too (a DELETE the client never sent), and drops its continuity
// record. The agent's own idle timeout is its default, 30 minutes, so an
// agent that holds no session a moment later was told.
func TestExpiredBindingClosesTheAgentSession(t *testing.T) {
	// The proxy's clock is the test's: the session expires when the test
	// moves the clock past the TTL, not when a loaded machine is slow.
	const ttl = time.Hour
	var ahead atomic.Int64 // how far the proxy's clock is ahead of time.Now
	now := func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	s := startStudio(t, projecttest.New(t, "abacus"), &Options{SessionIdleTTL: ttl, Now: now})
	c := newAPIClient(t, s, "")
	waitAgent(t, s, "abacus", func(a studioapi.AgentInfo) bool { return a.State == studioapi.StateRunning })
	if n := agentSessions(t, c, s, "abacus"); n != 0 {
		t.Fatalf("the agent has %d sessions before any client", n)
	}

	mcpHdr := map[string]string{"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`
	req, _ := http.NewRequestWithContext(t.Context(), "POST", s.AgentURL("abacus"), strings.NewReader(init))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range mcpHdr {
		req.Header.Set(k, v)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	// Read the initialize result before sending initialized, as a client
	// does: the session id is in the headers, which go-sdk may send before
	// it has run initialize, and an initialized that overtakes it ends the
	// session ("initialized before initialize").
	_, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("reading the initialize result: %v", err)
	}
	session := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || session == "" {
		t.Fatalf("initialize: %d, session %q", resp.StatusCode, session)
	}
	mcpHdr["Mcp-Session-Id"] = session
	if code, b := c.do("POST", "/api/agents/abacus/mcp", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, mcpHdr); code != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", code, b)
	}
	if n := agentSessions(t, c, s, "abacus"); n != 1 {
		t.Fatalf("the agent has %d sessions with one client session open, want 1", n)
	}
	if kept, _ := s.agents["abacus"].continuity.Kept(); kept != 1 {
		t.Fatalf("continuity keeps %d sessions, want 1", kept)
	}

	// The client goes quiet past the TTL, then comes back: the binding is
	// gone.
	ahead.Store(int64(2 * ttl))
	ping := `{"jsonrpc":"2.0","id":2,"method":"ping"}`
	if code, b := c.do("POST", "/api/agents/abacus/mcp", ping, mcpHdr); code != http.StatusNotFound {
		t.Fatalf("a request on the expired session: %d %s, want 404", code, b)
	}
	if kept, _ := s.agents["abacus"].continuity.Kept(); kept != 0 {
		t.Errorf("continuity keeps %d sessions after the binding expired, want 0", kept)
	}
	deadline := time.Now().Add(10 * time.Second)
	for agentSessions(t, c, s, "abacus") != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the agent still holds the session the studio forgot")
		}
		time.Sleep(20 * time.Millisecond) // polling with a deadline
	}
}
