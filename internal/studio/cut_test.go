package studio

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/agents/testkit"
	"github.com/switchboard-run/switchboard/internal/mcphttp"
	"github.com/switchboard-run/switchboard/internal/projecttest"
	"github.com/switchboard-run/switchboard/internal/rpccode"
	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/pool"
)

// holdfastProject is a project whose one agent, holdfast, has testkit's
// slow_effect: a call holds until the test releases it.
func holdfastProject(t *testing.T) string {
	t.Helper()
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
	return dir
}

// acceptHeld waits for the held call's connection to hold and reads its id.
func acceptHeld(t *testing.T, hold net.Listener, id string) net.Conn {
	t.Helper()
	hold.(*net.TCPListener).SetDeadline(time.Now().Add(60 * time.Second)) // a bound, not a wait
	conn, err := hold.Accept()
	if err != nil {
		t.Fatalf("the held call never reached the tool: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	if line, err := bufio.NewReader(conn).ReadString('\n'); err != nil || strings.TrimSpace(line) != id {
		t.Fatalf("held call said %q, %v; want %q", line, err, id)
	}
	return conn
}

// TestCutCallIsTypedOutcomeUnknown: a sessionless (2026-07-28) call through
// the studio whose agent is SIGKILLed while its tool runs is answered, as
// in the session era, with the studio's typed outcome unknown: JSON-RPC
// -32060 with the request's own id (in a 200, so that a client hands it to
// the call that sent it), not a 502 with -32000 and a null id. Our pool,
// a real client in that era, reads it as outcome_unknown and sends the
// call again with its key; the agent's next process answers from its
// ledger that the first run was interrupted, and the tool is not run again.
func TestCutCallIsTypedOutcomeUnknown(t *testing.T) {
	dir := holdfastProject(t)
	s := startStudio(t, dir, nil)
	hold, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	kill := func() {
		t.Helper()
		before := waitAgent(t, s, "holdfast", func(a studioapi.AgentInfo) bool { return a.State == studioapi.StateRunning })
		if err := killPID(before.PID); err != nil {
			t.Fatal(err)
		}
		waitAgent(t, s, "holdfast", func(a studioapi.AgentInfo) bool {
			return a.State == studioapi.StateRunning && a.PID != before.PID
		})
	}

	// A raw sessionless request, as @openai/agents sends one.
	body := `{"jsonrpc":"2.0","id":"call-41","method":"tools/call","params":{"name":"slow_effect","arguments":{"id":"raw","hold":"` + hold.Addr().String() + `"},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	type raw struct {
		status int
		body   string
		err    error
	}
	answered := make(chan raw, 1)
	go func() {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, s.AgentURL("holdfast"), strings.NewReader(body))
		if err != nil {
			answered <- raw{err: err}
			return
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(mcphttp.ProtocolVersionHeader, mcphttp.EraVersion)
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "slow_effect")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answered <- raw{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		answered <- raw{resp.StatusCode, string(b), err}
	}()
	acceptHeld(t, hold, "raw")
	kill()
	got := <-answered
	if got.err != nil {
		t.Fatal(got.err)
	}
	var msg struct {
		ID    any `json:"id"`
		Error *struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	data := got.body
	if _, d, ok := strings.Cut(got.body, "data: "); ok {
		data, _, _ = strings.Cut(d, "\n")
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(data)), &msg); err != nil || msg.Error == nil {
		t.Fatalf("the cut call's answer: %d %.300s (%v), want a JSON-RPC error", got.status, got.body, err)
	}
	t.Logf("the cut call's answer: %d %s", got.status, got.body)
	if got.status != http.StatusOK || msg.ID != "call-41" || msg.Error.Code != rpccode.OutcomeUnknown || !strings.Contains(msg.Error.Message, "outcome is unknown") {
		t.Fatalf("the cut call's answer: %d, id %v, error %+v; want 200, the request's id \"call-41\" and code %d", got.status, msg.ID, msg.Error, rpccode.OutcomeUnknown)
	}

	// Our pool, unpinned: it speaks 2026-07-28 with our agents.
	p := pool.New(nil)
	defer p.Close()
	srv := &pool.Server{Name: "holdfast", URL: s.AgentURL("holdfast")}
	done := make(chan error, 1)
	go func() {
		_, err := p.CallTool(t.Context(), srv, &mcp.CallToolParams{Name: "slow_effect", Arguments: map[string]any{"id": "pooled", "hold": hold.Addr().String()}})
		done <- err
	}()
	acceptHeld(t, hold, "pooled")
	if st := p.Stats(); st.Protocols[pool.Protocol20260728] != 1 {
		t.Fatalf("pool sessions by protocol %v, want one of 2026-07-28", st.Protocols)
	}
	kill()
	err = <-done
	var pe *pool.Error
	if !errors.As(err, &pe) || pe.Kind != pool.KindInterrupted || !errors.Is(err, pool.ErrOutcomeUnknown) {
		t.Fatalf("pool call cut by the kill: %v; want it sent again with its key and answered interrupted (an outcome unknown)", err)
	}
	if st := p.Stats(); st.KeyedRetries < 1 {
		t.Fatalf("stats %+v: want the cut call sent again with its key", st)
	}
	log, err := os.ReadFile(filepath.Join(dir, ".switchboard", "data", "holdfast", testkit.LogFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"raw", "pooled"} {
		if n := strings.Count(string(log), "effect "+id+"\n"); n != 1 {
			t.Errorf("%s took effect %d times, want once:\n%s", id, n, log)
		}
	}
}
