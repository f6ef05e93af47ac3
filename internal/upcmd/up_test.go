package upcmd

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/mcphttp/mcphttptest"
	"github.com/switchboard-run/switchboard/internal/proctest"
	"github.com/switchboard-run/switchboard/internal/projecttest"
	"github.com/switchboard-run/switchboard/internal/studioapi"
)

// upReady is the ready line's prefix, before the URL.
var upReady = strings.TrimSuffix(ReadyFormat, "%s\n")

func startUp(t *testing.T, dir string, env []string) (*proctest.Process, string) {
	t.Helper()
	p := proctest.StartProcess(t, dir, env, 60*time.Second, upReady, switchboardBin, "up", "--dir", dir, "--listen", "127.0.0.1:0")
	if !strings.HasPrefix(p.Ready, "http://127.0.0.1:") {
		t.Fatalf("ready line %q", p.Ready)
	}
	return p, p.Ready
}

// TestUp runs the real `switchboard up`: the reconnect sequence and a go-sdk
// client through its proxy, then SIGTERM, which must stop every agent.
func TestUp(t *testing.T) {
	dir := projecttest.New(t, "abacus", "packrat")
	p, base := startUp(t, dir, nil)

	agents := listAgents(t, base, nil)
	var pids []int
	for _, name := range []string{"abacus", "packrat"} {
		a := agents[name]
		if a.State != studioapi.StateRunning || !proctest.Alive(a.PID) {
			t.Fatalf("agent %s after the ready line: %+v", name, a)
		}
		pids = append(pids, a.PID)
	}

	c := &mcphttptest.Client{URL: base + "/api/agents/abacus/mcp"}
	mcphttptest.CheckReconnect(t, t.Context(), c, "calculate", map[string]any{"expression": "2+3"}, "5")

	cl := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, nil)
	cs, err := cl.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: base + "/api/agents/packrat/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "store_note", Arguments: map[string]any{"text": "the proxy works"}})
	if err != nil || res.IsError {
		t.Fatalf("store_note: %v %+v", err, res)
	}
	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "search_notes", Arguments: map[string]any{"query": "proxy"}})
	if err != nil || res.IsError || !strings.Contains(toolText(res), "the proxy works") {
		t.Fatalf("search_notes: %v %s", err, toolText(res))
	}
	cs.Close()

	// A session left open, with its standalone SSE stream (GET) held by the
	// proxy, must not hold up the shutdown below.
	open, err := cl.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: base + "/api/agents/abacus/mcp", MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if _, err := open.ListTools(t.Context(), nil); err != nil {
		t.Fatal(err)
	}

	// Agents' logs reach the studio's stderr, prefixed by name.
	if !strings.Contains(p.Stderr(), "abacus  | ") || !strings.Contains(p.Stderr(), "packrat | ") {
		t.Errorf("studio stderr does not relay the agents' logs by name:\n%s", p.Stderr())
	}

	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code, err := p.Wait(30 * time.Second)
	if err != nil || code != 0 {
		t.Fatalf("after SIGTERM: exit %d, %v\n%s", code, err, p.Stderr())
	}
	for _, pid := range pids {
		if proctest.Alive(pid) {
			t.Errorf("agent process %d outlived the studio", pid)
		}
	}
}

// TestUpKilledLeavesNoOrphans: a studio killed outright (no chance to stop
// its children) still leaves none behind, thanks to Pdeathsig.
func TestUpKilledLeavesNoOrphans(t *testing.T) {
	dir := projecttest.New(t, "abacus")
	p, base := startUp(t, dir, nil)
	pid := listAgents(t, base, nil)["abacus"].PID
	if pid == 0 {
		t.Fatal("no agent pid")
	}
	if err := p.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for proctest.Alive(pid) {
		select {
		case <-tick.C:
		case <-deadline.C:
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("agent %d outlived its killed studio", pid)
		}
	}
}

func TestUpRefusesExposureWithoutToken(t *testing.T) {
	dir := projecttest.New(t)
	cmd := exec.Command(switchboardBin, "up", "--dir", dir, "--listen", "0.0.0.0:0")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, studioapi.EnvToken+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "without a bearer token") || !strings.Contains(string(out), studioapi.EnvToken) {
		t.Fatalf("up --listen 0.0.0.0:0 without %s: %v\n%s\nwant exit 1 and a clear refusal", studioapi.EnvToken, err, out)
	}
}

func listAgents(t *testing.T, base string, hdr map[string]string) map[string]studioapi.AgentInfo {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/api/agents", nil)
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
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/agents: %d %s", resp.StatusCode, body)
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

func toolText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// TestUpHelp: the usage reads as a sentence (it began "studioapi.Run the
// studio", a rename's leftover), goes to stdout and exits 0.
func TestUpHelp(t *testing.T) {
	var stdout, stderr strings.Builder
	if code := Main(t.Context(), []string{"--help"}, strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Fatalf("up --help exited %d: %s", code, stderr.String())
	}
	out := stdout.String() + stderr.String()
	if !strings.Contains(out, "usage: switchboard up [flags]\n\nRun the studio: every agent") || strings.Contains(out, "studioapi.") {
		t.Fatalf("up --help:\n%s", out)
	}
}
