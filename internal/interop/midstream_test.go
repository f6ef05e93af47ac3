package interop

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/agents/testkit"
	"github.com/switchboard-run/switchboard/internal/proctest"
	"github.com/switchboard-run/switchboard/internal/projecttest"
	"github.com/switchboard-run/switchboard/internal/rpccode"
	"github.com/switchboard-run/switchboard/internal/studioapi"
)

// TestMidStreamKillThroughStudio: a session-era client (go-sdk v1.8.0,
// pinned 2025-11-25) calls a tool through the real `switchboard up`
// binary, race-built; the tool's answer is an SSE stream in progress (a
// progress notification has reached the client) when the real
// `agent serve` under the studio is SIGKILLed. The client gets the
// studio's typed outcome unknown, JSON-RPC -32060, as the answer to its
// own call (go-sdk hands an answer to the call of the same id, so any
// other id would leave the call waiting); after the agent's restart the
// same session goes on working without re-initializing, and the cut tool
// took effect once.
func TestMidStreamKillThroughStudio(t *testing.T) {
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
	p := proctest.StartProcess(t, dir, nil, 60*time.Second, "switchboard studio listening on ", switchboardBin, "up", "--dir", dir, "--listen", "127.0.0.1:0")
	t.Cleanup(func() {
		p.Signal(syscall.SIGTERM)
		if code, err := p.Wait(30 * time.Second); err != nil || code != 0 {
			t.Errorf("switchboard up after SIGTERM: exit %d, %v\n%s", code, err, p.Stderr())
		}
		if t.Failed() {
			t.Logf("switchboard up stderr:\n%s", p.Stderr())
		}
	})
	base := p.Ready
	agent := func(cond func(studioapi.AgentInfo) bool) studioapi.AgentInfo {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			resp, err := loopback.Get(base + "/api/agents")
			if err == nil {
				var list []studioapi.AgentInfo
				err = json.NewDecoder(resp.Body).Decode(&list)
				resp.Body.Close()
				for _, a := range list {
					if err == nil && a.Name == "holdfast" && cond(a) {
						return a
					}
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("holdfast did not reach the expected state within 60s (last error %v)", err)
			}
			time.Sleep(20 * time.Millisecond) // polling with a deadline
		}
	}
	running := func(a studioapi.AgentInfo) bool { return a.State == studioapi.StateRunning && a.PID != 0 }

	hold, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()

	progress := make(chan string, 16)
	cl := mcp.NewClient(&mcp.Implementation{Name: "midstream", Version: "0"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			select {
			case progress <- req.Params.Message:
			default:
			}
		},
	})
	cs, err := cl.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: base + "/api/agents/holdfast/mcp", HTTPClient: loopback},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	session := cs.ID()
	if session == "" {
		t.Fatal("no session id: not the session era")
	}

	done := make(chan error, 1)
	go func() {
		params := &mcp.CallToolParams{Name: "slow_effect", Arguments: map[string]any{"id": "cut", "hold": hold.Addr().String(), "progress": true}}
		params.SetProgressToken("cut-progress")
		_, err := cs.CallTool(t.Context(), params)
		done <- err
	}()
	if msg := recvWithin(t, progress, "the call's progress notification"); msg != "effect cut" {
		t.Fatalf("progress %q", msg)
	}
	hold.(*net.TCPListener).SetDeadline(time.Now().Add(60 * time.Second)) // a bound, not a wait
	conn, err := hold.Accept()
	if err != nil {
		t.Fatalf("the held call never reached the tool's hold: %v", err)
	}
	defer conn.Close()
	if line, err := bufio.NewReader(conn).ReadString('\n'); err != nil || strings.TrimSpace(line) != "cut" {
		t.Fatalf("held call said %q, %v", line, err)
	}

	killed := agent(running)
	if err := syscall.Kill(killed.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err = recvWithin(t, done, "the cut call's answer")
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != rpccode.OutcomeUnknown {
		t.Fatalf("the call cut mid-stream: %v; want JSON-RPC %d (outcome unknown)", err, rpccode.OutcomeUnknown)
	}
	t.Logf("the cut call's answer: %v", err)
	agent(func(a studioapi.AgentInfo) bool { return running(a) && a.PID != killed.PID })

	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "slow_effect", Arguments: map[string]any{"id": "after"}})
	if err != nil || res.IsError {
		t.Fatalf("a call on the same session after the restart: %v %+v", err, res)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != "done after" {
		t.Fatalf("after the restart: %q", got)
	}
	if cs.ID() != session {
		t.Fatalf("session id changed from %q to %q", session, cs.ID())
	}
	log, err := os.ReadFile(filepath.Join(dir, ".switchboard", "data", "holdfast", testkit.LogFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"start cut", "effect cut", "start after", "effect after"} {
		if n := strings.Count(string(log), line+"\n"); n != 1 {
			t.Errorf("%q logged %d times, want once:\n%s", line, n, log)
		}
	}
}

func recvWithin[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(90 * time.Second):
		t.Fatalf("no %s within 90s", what)
		panic("unreachable")
	}
}
