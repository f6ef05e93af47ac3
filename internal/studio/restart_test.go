package studio

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/projecttest"
	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/pool"
)

// TestRequestsDuringRestartLand: a request for an agent that has died is
// neither answered 502 (the connection to the dead process is refused, so
// nothing was sent) nor 503 (the agent is restarting): the studio holds it
// until the new process runs and sends it there, where the studio meets the
// 404 for the old upstream session, re-establishes it and sends the call
// again (proxy/continuity.go). Every call lands exactly once, and the caller's
// pool never sees the restart: no retry, no re-initialization.
//
// Not covered, because nobody can: a request sent in the very instant the
// process dies, which the kernel may still accept into the dying listener's
// backlog and then reset. That looks exactly like a process dying
// mid-request, and is reported as outcome unknown.
func TestRequestsDuringRestartLand(t *testing.T) {
	dir := projecttest.New(t, "abacus")
	s := startStudio(t, dir, &Options{MinBackoff: 300 * time.Millisecond})
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	p := pool.New(&pool.Options{Transport: tr})
	t.Cleanup(func() { p.Close() })
	srv := &pool.Server{Name: "abacus", URL: s.AgentURL("abacus"), ProtocolVersion: pool.Protocol20251125} // the session era: sessions are what the studio re-establishes
	calc := func(ctx context.Context, expr string) (*mcp.CallToolResult, error) {
		return p.CallTool(ctx, srv, &mcp.CallToolParams{Name: "calculate", Arguments: map[string]any{"expression": expr}})
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := calc(ctx, "1+1"); err != nil {
		t.Fatal(err)
	}

	for round, when := range []string{"once the agent is dead", "while the agent restarts"} {
		before := waitAgent(t, s, "abacus", func(a studioapi.AgentInfo) bool { return a.State == studioapi.StateRunning })
		old := s.agents["abacus"].proc.Status().Upstream.Host
		if err := killPID(before.PID); err != nil {
			t.Fatal(err)
		}
		// Dead: its address refuses connections. The supervisor may not
		// have noticed yet; the proxy must cope either way.
		deadline := time.Now().Add(10 * time.Second)
		for {
			c, err := net.Dial("tcp", old)
			if err != nil {
				break
			}
			c.Close()
			if time.Now().After(deadline) {
				t.Fatal("the killed agent still accepts connections")
			}
			time.Sleep(time.Millisecond)
		}
		if when == "while the agent restarts" {
			waitAgent(t, s, "abacus", func(a studioapi.AgentInfo) bool { return a.State != studioapi.StateRunning })
		}
		var info pool.CallInfo
		res, err := calc(pool.WithCallInfo(ctx, &info), "6*7")
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if got := toolText(res); got == "" || res.IsError {
			t.Fatalf("%s: result %+v", when, res)
		}
		if info.Retried {
			t.Errorf("%s: the pool retried the call; the studio should have kept its session: %+v", when, info)
		}
		if a := s.Agents()[0]; a.PID == before.PID || a.Restarts != round+1 {
			t.Fatalf("%s: agent %+v", when, a)
		}
	}
	if _, renewals := s.agents["abacus"].continuity.Kept(); renewals != 2 {
		t.Errorf("the studio re-established %d upstream sessions, want 2", renewals)
	}
	if st := p.Stats(); st.Reinitializations != 0 || st.Retries != 0 {
		t.Fatalf("pool stats: %+v", st)
	}
}
