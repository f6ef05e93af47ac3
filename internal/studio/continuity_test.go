package studio

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/mcphttp/mcphttptest"
	"github.com/switchboard-run/switchboard/internal/projecttest"
	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/pool"
)

// killAndWait SIGKILLs the agent name and waits until its new process runs.
func killAndWait(t *testing.T, s *Studio, name string) {
	t.Helper()
	before := waitAgent(t, s, name, func(a studioapi.AgentInfo) bool { return a.State == studioapi.StateRunning })
	if err := killPID(before.PID); err != nil {
		t.Fatal(err)
	}
	waitAgent(t, s, name, func(a studioapi.AgentInfo) bool {
		return a.State == studioapi.StateRunning && a.PID != before.PID && a.Restarts > before.Restarts
	})
}

// TestSessionSurvivesAgentRestart: a go-sdk client with no recovery of its
// own (a bare ClientSession, not our pool) keeps its session across two
// restarts of the agent behind the studio: the same session id, every call
// after a restart answered (eight at once), and the studio re-established
// one upstream session for it each time.
func TestSessionSurvivesAgentRestart(t *testing.T) {
	s := startStudio(t, projecttest.New(t, "abacus"), nil)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	cl := mcp.NewClient(&mcp.Implementation{Name: "continuity-test", Version: "0"}, nil)
	cs, err := cl.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: s.AgentURL("abacus"), HTTPClient: &http.Client{Transport: tr}},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}) // the session era: continuity keeps sessions
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	id := cs.ID()
	calc := func(expr, want string) {
		t.Helper()
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "calculate", Arguments: map[string]any{"expression": expr}})
		if err != nil {
			t.Errorf("calculate %s on session %s: %v", expr, id, err) // Errorf: also called from goroutines
			return
		}
		if res.IsError || !strings.Contains(toolText(res), want) {
			t.Errorf("calculate %s: %s", expr, toolText(res))
		}
	}
	calc("1+1", "2")
	for round := range 2 {
		killAndWait(t, s, "abacus")
		// Concurrent callers meet the 404 together and share one
		// re-establishment (the renewal count below).
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() { calc("6*7", "42") })
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		if _, err := cs.ListTools(t.Context(), nil); err != nil {
			t.Fatalf("round %d: tools/list after the restart: %v", round, err)
		}
		if cs.ID() != id {
			t.Fatalf("round %d: the session id changed from %s to %s", round, id, cs.ID())
		}
		if kept, renewals := s.agents["abacus"].continuity.Kept(); kept != 1 || renewals != round+1 {
			t.Fatalf("round %d: continuity keeps %d sessions and renewed %d, want 1 and %d", round, kept, renewals, round+1)
		}
	}
}

// TestContinuityKeepsTheCredentialBinding: after a restart, the session
// alice created still answers only to alice: bob, or no credential, get
// the 404 of a session that does not exist, and their attempts do not
// spoil it for alice. The answer carries alice's session id, never the
// upstream one. Her DELETE ends the session for good.
func TestContinuityKeepsTheCredentialBinding(t *testing.T) {
	s := startStudio(t, projecttest.New(t, "abacus"), nil)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr}
	alice := &mcphttptest.Client{URL: s.AgentURL("abacus"), HTTP: hc, Header: map[string]string{"Authorization": "Bearer alice"}}
	bob := &mcphttptest.Client{URL: s.AgentURL("abacus"), HTTP: hc, Header: map[string]string{"Authorization": "Bearer bob"}}
	anon := &mcphttptest.Client{URL: s.AgentURL("abacus"), HTTP: hc}
	ctx := t.Context()
	sid, err := alice.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	killAndWait(t, s, "abacus")

	for who, c := range map[string]*mcphttptest.Client{"bob": bob, "no credential": anon} {
		r, err := c.Call(ctx, sid, 2, "tools/list", nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != http.StatusNotFound || r.Result() != nil {
			t.Errorf("alice's session presented by %s after the restart: %v, want 404", who, r)
		}
	}
	if _, renewals := s.agents["abacus"].continuity.Kept(); renewals != 0 {
		t.Errorf("another credential's request re-established alice's session (%d renewals)", renewals)
	}
	r, err := alice.Call(ctx, sid, 3, "tools/call", map[string]any{"name": "calculate", "arguments": map[string]any{"expression": "2+3"}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != http.StatusOK || !strings.Contains(mcphttptest.ResultText(r.Result()), "5") {
		t.Fatalf("alice's call after the restart: %v", r)
	}
	if got := r.Header.Get("Mcp-Session-Id"); got != "" && got != sid {
		t.Errorf("the answer names session %q, want alice's %q (the upstream id must not leak)", got, sid)
	}
	if r, err := alice.Delete(ctx, sid); err != nil || r.Status/100 != 2 {
		t.Fatalf("DELETE: %v %v", r, err)
	}
	if r, err := alice.Call(ctx, sid, 4, "tools/list", nil); err != nil || r.Status != http.StatusNotFound {
		t.Errorf("alice's session after her DELETE: %v %v, want 404", r, err)
	}
	if kept, _ := s.agents["abacus"].continuity.Kept(); kept != 0 {
		t.Errorf("continuity still keeps %d sessions after the DELETE", kept)
	}
}

// TestDeleteAfterRestart: a client ending its session after the agent
// restarted is told it is ended (the upstream session died with the old
// process), and the id is gone.
func TestDeleteAfterRestart(t *testing.T) {
	s := startStudio(t, projecttest.New(t, "abacus"), nil)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c := &mcphttptest.Client{URL: s.AgentURL("abacus"), HTTP: &http.Client{Transport: tr}}
	sid, err := c.Open(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	killAndWait(t, s, "abacus")
	if r, err := c.Delete(t.Context(), sid); err != nil || r.Status/100 != 2 {
		t.Fatalf("DELETE after the restart: %v %v, want 2xx", r, err)
	}
	if r, err := c.Call(t.Context(), sid, 2, "tools/list", nil); err != nil || r.Status != http.StatusNotFound {
		t.Errorf("the session after its DELETE: %v %v, want 404", r, err)
	}
}

// TestStreamLostInRestart: a call's stream that the agent's death cut
// cannot be resumed (its events died with the process). The resumption is
// answered with that call's JSON-RPC error, outcome unknown, instead of a
// fresh stream that would leave the client waiting for a response that
// never comes; an unknown stream gets 400. The session stays: the next
// call lands.
func TestStreamLostInRestart(t *testing.T) {
	// The agents keep events for resumption (agentserver.EnvResumableStreams;
	// they inherit the studio's environment).
	t.Setenv("SWITCHBOARD_RESUMABLE_STREAMS", "1")
	s := startStudio(t, projecttest.New(t, "abacus"), nil)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c := &mcphttptest.Client{URL: s.AgentURL("abacus"), HTTP: &http.Client{Transport: tr}}
	ctx := t.Context()
	sid, err := c.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// call runs calculate as request id and returns its stream's first
	// event id.
	call := func(id int, expr string) string {
		t.Helper()
		r, err := c.Call(ctx, sid, id, "tools/call", map[string]any{"name": "calculate", "arguments": map[string]any{"expression": expr}})
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(r.Body), "\n") {
			if v, ok := strings.CutPrefix(line, "id: "); ok && r.Status == http.StatusOK {
				return v
			}
		}
		t.Fatalf("call %d: no event id in its stream (is the agent's event store on?): %v", id, r)
		return ""
	}
	resume := func(eventID string, wantID int) {
		t.Helper()
		lost, err := c.Do(ctx, http.MethodGet, sid, nil, map[string]string{"Last-Event-ID": eventID})
		if err != nil {
			t.Fatal(err)
		}
		if e := lost.Error(); lost.Status != http.StatusOK || len(lost.Messages) != 1 || lost.Messages[0]["id"] != float64(wantID) || e == nil || e["code"] != float64(pool.CodeOutcomeUnknown) {
			t.Fatalf("resuming %s after the restart: %v, want call %d's error %d", eventID, lost, wantID, pool.CodeOutcomeUnknown)
		}
	}
	first, second := call(7, "1+1"), call(9, "2+2")
	killAndWait(t, s, "abacus")

	// Met by the new process's 404.
	resume(first, 7)
	// The next call re-establishes the session...
	if got := call(8, "2+3"); got == "" {
		t.Fatal("no stream")
	}
	// ...after which a stream of the old session is known to be lost
	// without asking the new process (whose event store never had it).
	resume(second, 9)
	unknown, err := c.Do(ctx, http.MethodGet, sid, nil, map[string]string{"Last-Event-ID": "NOSUCHSTREAM_1"})
	if err != nil {
		t.Fatal(err)
	}
	if unknown.Status != http.StatusBadRequest {
		t.Errorf("resuming an unknown stream: %v, want 400", unknown)
	}
	if _, renewals := s.agents["abacus"].continuity.Kept(); renewals != 1 {
		t.Errorf("%d renewals, want 1", renewals)
	}
}
