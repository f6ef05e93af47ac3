package agentserver

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/mcphttp/mcphttptest"
	"github.com/switchboard-run/switchboard/internal/proctest"
)

const readyTimeout = 30 * time.Second

// startServe runs the real `switchboard agent serve` in dir and returns it
// with its MCP URL, read from its one stdout line.
func startServe(t *testing.T, dir string, args ...string) (*proctest.Process, string) {
	t.Helper()
	p := proctest.StartProcess(t, dir, nil, readyTimeout, "switchboard agent ", switchboardBin, append([]string{"agent", "serve"}, args...)...)
	_, url, ok := strings.Cut(p.Ready, " listening on ")
	if !ok || !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, "/mcp") {
		t.Fatalf("ready line %q", p.Ready)
	}
	return p, url
}

func TestServeReconnectSequence(t *testing.T) {
	dir := t.TempDir()
	p, url := startServe(t, dir, "--agent", bundledAgent("abacus"))
	if !strings.HasPrefix(p.Ready, "abacus listening on ") {
		t.Fatalf("ready line %q, want the agent's name", p.Ready)
	}
	c := &mcphttptest.Client{URL: url}
	mcphttptest.CheckReconnect(t, t.Context(), c, "calculate", map[string]any{"expression": "2+3"}, "5")

	// The default data directory is under the working directory.
	if st, err := os.Stat(filepath.Join(dir, ".switchboard", "data", "abacus")); err != nil || !st.IsDir() {
		t.Errorf("default data dir: %v", err)
	}

	// SIGTERM: a graceful exit, even with a session open.
	if _, err := c.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code, err := p.Wait(15 * time.Second)
	if err != nil || code != 0 {
		t.Fatalf("after SIGTERM: exit %d, %v; stderr:\n%s", code, err, p.Stderr())
	}
}

func TestServeFlags(t *testing.T) {
	run := func(args ...string) (int, string) {
		cmd := exec.Command(switchboardBin, append([]string{"agent", "serve"}, args...)...)
		cmd.Dir = t.TempDir()
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	if code, out := run(); code != 2 || !strings.Contains(out, "--agent") {
		t.Errorf("no --agent: exit %d %q, want 2 and usage", code, out)
	}
	if code, out := run("--agent", bundledAgent("abacus"), "--log-format", "yaml"); code != 2 || !strings.Contains(out, "yaml") {
		t.Errorf("bad --log-format: exit %d %q", code, out)
	}
	t.Setenv(EnvResumableStreams, "yes")
	if code, out := run("--agent", bundledAgent("abacus")); code != 2 || !strings.Contains(out, EnvResumableStreams+`="yes"`) {
		t.Errorf("bad %s: exit %d %q, want 2 naming it", EnvResumableStreams, code, out)
	}
	t.Setenv(EnvResumableStreams, "")

	// An agent.json naming a toolset that does not exist.
	var def map[string]any
	data, err := os.ReadFile(filepath.Join(bundledAgent("abacus"), "agent.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &def); err != nil {
		t.Fatal(err)
	}
	def["tools"] = []string{"abacus", "nope"}
	agentDir := filepath.Join(t.TempDir(), "abacus")
	if err := os.MkdirAll(agentDir, 0o755); err != nil {
		t.Fatal(err)
	}
	data, _ = json.Marshal(def)
	if err := os.WriteFile(filepath.Join(agentDir, "agent.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out := run("--agent", agentDir, "--data-dir", t.TempDir()); code != 1 || !strings.Contains(out, `unknown toolset "nope"`) {
		t.Errorf("unknown toolset: exit %d %q, want 1 naming it", code, out)
	}
}
