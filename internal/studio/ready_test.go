package studio

import (
	"bufio"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/projecttest"
	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/internal/waittest"
	"github.com/switchboard-run/switchboard/pool"
)

// TestReadyz runs a studio with a real agent and one that cannot start:
// /readyz is 503 while the broken one is not running, 200 once it is
// stopped on request (a person took it out), and 503 from the moment the
// studio closes; /healthz is 200 throughout. Neither asks for the token.
func TestReadyz(t *testing.T) {
	dir := projecttest.New(t, "abacus")
	writeAgent(t, dir, "abacus", "broken", func(d map[string]any) { d["tools"] = []string{"nope"} })
	s := startStudio(t, dir, &Options{MinBackoff: time.Minute, Token: "s3cret-token-for-readyz"})
	waitAgent(t, s, "broken", func(a studioapi.AgentInfo) bool { return a.State == studioapi.StateRestarting })
	waitAgent(t, s, "abacus", func(a studioapi.AgentInfo) bool { return a.State == studioapi.StateRunning })

	readyz := func(base string) (int, string) {
		t.Helper()
		code, _, body := get(t, base+"/readyz", nil)
		var r struct{ Status, Reason string }
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatalf("/readyz body %s: %v", body, err)
		}
		return code, r.Status
	}
	if code, status := readyz(s.URL()); code != http.StatusServiceUnavailable || status != readyAgentsDown {
		t.Errorf("/readyz with an agent restarting: %d %q, want 503 %s", code, status, readyAgentsDown)
	}
	if code, _, body := get(t, s.URL()+"/healthz", nil); code != http.StatusOK {
		t.Errorf("/healthz: %d %s, want 200", code, body)
	}
	if code, _, _ := get(t, s.URL()+"/api/agents", nil); code != http.StatusUnauthorized {
		t.Errorf("/api/agents without the token: %d, want 401 (the probes are the only open paths)", code)
	}

	if err := s.Stop("broken", "test"); err != nil {
		t.Fatal(err)
	}
	waitAgent(t, s, "broken", func(a studioapi.AgentInfo) bool { return a.State == studioapi.StateStopped })
	if code, status := readyz(s.URL()); code != http.StatusOK || status != readyOK {
		t.Errorf("/readyz with the broken agent stopped on request: %d %q, want 200 ready", code, status)
	}

	// Closed: the listener is gone, so the studio's own handler answers
	// on a loopback server of the test's.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	if code, status := readyz(hs.URL); code != http.StatusServiceUnavailable || status != readyShuttingDown {
		t.Errorf("/readyz after Close: %d %q, want 503 %s", code, status, readyShuttingDown)
	}
	if code, _, body := get(t, hs.URL+"/healthz", nil); code != http.StatusOK {
		t.Errorf("/healthz after Close: %d %s, want 200 (the process still serves)", code, body)
	}
}

// TestStopGivesTheGrace: an agent stopped on request drains. Its call in
// flight through the proxy runs to its end and its caller gets the result,
// though StopTimeout is a millisecond: the supervisor waits the agent's
// shutdown grace before SIGKILL, and the agent refuses new work
// (/readyz 503) meanwhile.
func TestStopGivesTheGrace(t *testing.T) {
	dir := projecttest.New(t)
	agentDir := filepath.Join(dir, "agents", "holdfast")
	if err := os.MkdirAll(filepath.Join(agentDir, "tools"), 0o755); err != nil {
		t.Fatal(err)
	}
	def := `{"name": "holdfast", "description": "test agent whose tool is held until released", "tools": ["testkit"]}`
	if err := os.WriteFile(filepath.Join(agentDir, "agent.json"), []byte(def), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(agentDir, "tools", "mcp.json"), []byte(`{"mcpServers": {}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startStudio(t, dir, &Options{StopTimeout: time.Millisecond})
	st := s.agents["holdfast"].proc.Status()
	if st.State != studioapi.StateRunning || st.Upstream == nil {
		t.Fatalf("holdfast: %+v, want running", st)
	}
	agentBase := "http://" + st.Upstream.Host

	hold, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	p := pool.New(nil)
	defer p.Close()
	type result struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := p.CallTool(t.Context(), &pool.Server{Name: "holdfast", URL: s.AgentURL("holdfast")}, &mcp.CallToolParams{
			Name: "slow_effect", Arguments: map[string]any{"id": "a", "hold": hold.Addr().String()},
		})
		done <- result{res, err}
	}()
	hold.(*net.TCPListener).SetDeadline(time.Now().Add(30 * time.Second)) // a bound, not a wait
	conn, err := hold.Accept()
	if err != nil {
		t.Fatalf("the held call never reached the tool: %v", err)
	}
	defer conn.Close()
	if line, err := bufio.NewReader(conn).ReadString('\n'); err != nil || strings.TrimSpace(line) != "a" {
		t.Fatalf("held call said %q, %v", line, err)
	}

	if err := s.Stop("holdfast", "test"); err != nil {
		t.Fatal(err)
	}
	waittest.Until(t, 30*time.Second, "the stopped agent's /readyz to answer 503", func() bool {
		code, _, _ := get(t, agentBase+"/readyz", nil)
		return code == http.StatusServiceUnavailable
	})
	if _, err := conn.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if got.err != nil || got.res.IsError || toolText(got.res) != "done a" {
		t.Fatalf("held call through the proxy: %+v, %v; want its result \"done a\"", got.res, got.err)
	}
	waitAgent(t, s, "holdfast", func(a studioapi.AgentInfo) bool { return a.State == studioapi.StateStopped })
	if h := s.agents["holdfast"].proc.History(); len(h) == 0 || h[0].Event != studioapi.EventStopped {
		t.Errorf("history %+v, want the stop on request first (no kill, no exit)", h)
	}
}
