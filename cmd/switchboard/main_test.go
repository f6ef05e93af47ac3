package main

import (
	"bytes"
	"errors"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/switchboard-run/switchboard/internal/testbin"
)

// TestHelpEverywhere runs the built binary: --help on every command and
// subcommand prints its usage on stdout, nothing on stderr, and exits 0;
// version prints one line. A usage error exits 2.
func TestHelpEverywhere(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary: skipped with -short")
	}
	// The binary every package of this test run shares (with -race when
	// the tests run under it).
	bin, err := testbin.Switchboard()
	if err != nil {
		t.Fatal(err)
	}
	runBin := func(args ...string) (code int, stdout, stderr string) {
		cmd := exec.CommandContext(t.Context(), bin, args...)
		cmd.Dir = t.TempDir() // no agents/, no tools/mcp.json: help must not need them
		cmd.Stdin = strings.NewReader("")
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee):
			code = ee.ExitCode()
		default:
			t.Fatal(err)
		}
		return code, o.String(), e.String()
	}
	for _, args := range [][]string{
		{"--help"}, {"help"}, {"-h"}, {"help", "--help"}, {"help", "-h"},
		{"ask", "--help"}, {"ask", "-h"}, {"up", "--help"}, {"client", "--help"}, {"status", "--help"}, {"runs", "--help"}, {"login", "--help"}, {"logout", "--help"},
		{"agent", "--help"}, {"agent", "serve", "--help"}, {"version", "--help"},
		{"help", "ask"}, {"help", "agent"}, {"ask", "--json", "--help", "a task"},
	} {
		code, stdout, stderr := runBin(args...)
		if code != 0 || !strings.Contains(stdout, "usage: switchboard") || stderr != "" {
			t.Errorf("switchboard %s: exit %d, stdout %q, stderr %q; want the usage on stdout and 0", strings.Join(args, " "), code, stdout, stderr)
		}
	}
	if code, stdout, _ := runBin("version"); code != 0 || !strings.HasPrefix(stdout, "switchboard ") || strings.Count(stdout, "\n") != 1 {
		t.Errorf("version: exit %d, %q", code, stdout)
	} else if !regexp.MustCompile(`^switchboard \S+ \(([0-9a-f]{40}(\+dirty)?|no commit recorded in this build)\) go`).MatchString(stdout) {
		// Built with -buildvcs=false (as .ci/run builds) it printed no
		// commit and did not say so.
		t.Errorf("version %q names neither the commit nor that none was recorded", stdout)
	}
	for _, args := range [][]string{{}, {"nosuch"}, {"agent"}, {"agent", "run"}, {"up", "--nosuch"}, {"ask", "--timeout", "soon", "x"}, {"version", "x"}} {
		if code, _, stderr := runBin(args...); code != 2 || stderr == "" {
			t.Errorf("switchboard %s: exit %d, stderr %q; want a usage error, 2", strings.Join(args, " "), code, stderr)
		}
	}
	// No task and an empty stdin: a usage error that says so.
	if code, _, stderr := runBin("ask"); code != 2 || !strings.Contains(stderr, "no task") {
		t.Errorf("ask with no task: exit %d, stderr %q", code, stderr)
	}
}
