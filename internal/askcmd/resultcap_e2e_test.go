package askcmd

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/internal/proctest"
	"github.com/switchboard-run/switchboard/internal/studio"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// hugeResult is the size of the result TestE2EHugeResultIsNotHeld's server
// returns: 50 MB, the issue's.
const hugeResult = 50_000_000

// memoryCeiling is how much an agent's peak resident set may grow through
// one delegation whose result is hugeResult bytes: well past the 16 MiB cap
// and go-sdk's buffers for it under the race detector (70 to 113 MiB
// measured), well short of what holding the result and its copies costs
// (1,892 MiB measured with "maxResultBytes" at 1 GiB).
const memoryCeiling = 400 << 20

// After the answer the oracle's resident set must come back within
// rssReturnedWithin to 3 × what it was before, or that plus
// rssReturnedSlack, whichever is larger. Generous on purpose (under the
// race detector it starts at 67 to 73 MiB and measured 96 to 175 MiB right
// after the answer, so the bound is never near what a run measures): it
// catches a result, or its copies, held (hundreds of MiB: 1,892 with the
// cap at 1 GiB), not the last tens of MiB the scavenger returns anyway.
const (
	rssReturnedWithin = 20 * time.Second
	rssReturnedSlack  = 192 << 20
)

// procStatus returns the kB figures of /proc/pid/status for keys.
func procStatus(t *testing.T, pid int, keys ...string) map[string]int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		for _, want := range keys {
			if k == want {
				n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				if err != nil {
					t.Fatalf("/proc/%d/status %s: %q", pid, k, v)
				}
				out[k] = n << 10
			}
		}
	}
	return out
}

// TestE2EHugeResultIsNotHeld: a real sibling server returns a 50 MB tool
// result to an agent process run by a real studio. The agent's pool stops
// reading at the cap (16 MiB, the default), its peak resident set
// (VmHWM, from /proc) grows by less than memoryCeiling, and the model
// reads a typed "Result too large" tool message; the ask is answered,
// and says the delegation failed (exit 4).
func TestE2EHugeResultIsNotHeld(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("needs /proc")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*e2eTimeout)
	defer cancel()
	huge := strings.Repeat("x", hugeResult)
	s := mcp.NewServer(&mcp.Implementation{Name: "big", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "huge", Description: "returns 50 MB", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: huge}}}, nil
	})
	t.Cleanup(func() {
		for ss := range s.Sessions() {
			ss.Close()
		}
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(ts.Close)
	model := newRecordingModel(t, delegation.ToolName("big", "huge"))

	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "agents", "oracle", agentdef.DefinitionFile),
		`{"name": "oracle", "description": "test agent oracle", "instructions": "You are oracle, a test agent.", "max_depth": 4}`)
	writeFile(t, filepath.Join(dir, "agents", "oracle", agentdef.MCPFile), `{"mcpServers": {"big": {"url": "`+ts.URL+`"}}}`)
	logs := &proctest.SyncBuffer{}
	st, err := studio.Start(ctx, &studio.Options{
		Dir: dir, Listen: "127.0.0.1:0", Executable: needBinary(t),
		Env:         []string{"OPENAI_BASE_URL=" + model.URL, "OPENAI_MODEL=scripted"},
		AgentOutput: logs, Logger: slog.New(slog.NewTextHandler(logs, nil)),
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("closing the studio: %v", err)
		}
	})
	if err := st.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	pid := agentInfo(t, st, "oracle").PID
	if pid == 0 {
		t.Fatal("the oracle has no process")
	}
	before := procStatus(t, pid, "VmRSS", "VmHWM")

	ask := startAskEnv(t, ctx, dir, cleanEnv(), "--studio", st.URL(), "--agent", "oracle", "call the huge tool")
	code := ask.wait(t)
	after := procStatus(t, pid, "VmRSS", "VmHWM")
	t.Logf("oracle (pid %d) before: VmRSS %d MiB, VmHWM %d MiB; after a %d-byte result: VmRSS %d MiB, VmHWM %d MiB",
		pid, before["VmRSS"]>>20, before["VmHWM"]>>20, hugeResult, after["VmRSS"]>>20, after["VmHWM"]>>20)
	if code != exitDelegationFailed || !strings.Contains(ask.stdout.String(), "done") {
		t.Fatalf("ask exited %d\nstdout:\n%s\nstderr:\n%s\nlogs:\n%s", code, ask.stdout, ask.stderr, logs)
	}
	if grew := after["VmHWM"] - before["VmHWM"]; grew > memoryCeiling {
		t.Errorf("the oracle's peak resident set grew by %d MiB, past the ceiling of %d MiB", grew>>20, memoryCeiling>>20)
	}
	// The memory is not held after the answer (the pool also calls
	// debug.FreeOSMemory 250 ms after a large one, pool/memory.go). Polled
	// with a deadline, not timed: a loaded machine may run late.
	back := max(3*before["VmRSS"], before["VmRSS"]+rssReturnedSlack)
	rss := after["VmRSS"]
	for deadline := time.Now().Add(rssReturnedWithin); rss > back && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond) // polling /proc: nothing to wait on
		rss = procStatus(t, pid, "VmRSS")["VmRSS"]
	}
	t.Logf("oracle VmRSS after the answer: %d MiB (bound %d MiB)", rss>>20, back>>20)
	if rss > back {
		t.Errorf("the oracle's resident set is %d MiB %v after the answer, past %d MiB (3 × its %d MiB before, or that plus %d MiB): the large answer's memory is held",
			rss>>20, rssReturnedWithin, back>>20, before["VmRSS"]>>20, rssReturnedSlack>>20)
	}

	reqs := model.requests()
	last := reqs[len(reqs)-1]
	if want := "Result too large: over the cap of 16777216 bytes; nothing of it kept."; !strings.Contains(last, want) {
		t.Errorf("the model's last request lacks %q:\n%.2000s", want, last)
	}
	if len(last) > 1<<20 {
		t.Errorf("the model's last request is %d bytes: the result reached it", len(last))
	}
}
