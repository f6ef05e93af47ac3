package askcmd

import (
	"context"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/proctest"
)

// TestIsTerminal: /dev/null is a character device and no terminal; nor is a
// pipe, nor a reader that is no file; a pseudo-terminal is one.
func TestIsTerminal(t *testing.T) {
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for name, in := range map[string]io.Reader{"/dev/null": null, "a pipe": r, "a strings.Reader": strings.NewReader("x"), "a nil *os.File": (*os.File)(nil)} {
		if isTerminal(in) {
			t.Errorf("%s is taken for a terminal", name)
		}
	}
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Logf("no pseudo-terminal to check the positive case: %v", err)
		return
	}
	defer ptmx.Close()
	if !isTerminal(ptmx) {
		t.Errorf("a pseudo-terminal (/dev/ptmx) is not taken for a terminal")
	}
}

// TestE2ENobodyAtDevNull: `switchboard ask` as a child process, with
// /dev/null and then a pipe as its stdin, is asked by the agent to confirm
// something: both times it declines (nobody to ask), where it used to take
// /dev/null for a terminal, ask, read EOF and cancel. With no task and
// /dev/null on stdin it says there is no task, not that it is reading one
// from the terminal.
func TestE2ENobodyAtDevNull(t *testing.T) {
	bin := needBinary(t)
	url := fakeStudio(t, "oracle", func(ctx context.Context, req *mcp.CallToolRequest, in askInput) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Delete 3 notes?", RequestedSchema: map[string]any{
			"type": "object", "properties": map[string]any{"confirm": map[string]any{"type": "boolean"}},
		}})
		if err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "the person said " + res.Action}}}, nil, nil
	})
	run := func(stdin *os.File, args ...string) (code int, stdout, stderr string) {
		t.Helper()
		out, errOut := &proctest.SyncBuffer{}, &proctest.SyncBuffer{}
		cmd := exec.CommandContext(t.Context(), bin, append([]string{"ask", "--studio", url}, args...)...)
		cmd.Env = cleanEnv()
		cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, out, errOut
		err := cmd.Run()
		if _, ok := err.(*exec.ExitError); err != nil && !ok {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	pipe := func() *os.File {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		w.Close() // nothing to read: EOF at once
		t.Cleanup(func() { r.Close() })
		return r
	}

	for name, stdin := range map[string]*os.File{"/dev/null": null, "a pipe": pipe()} {
		code, stdout, stderr := run(stdin, "delete the old notes")
		if code != exitOK || stdout != "the person said decline\n" || !strings.Contains(stderr, "· declined (nobody to ask") || strings.Contains(stderr, "cancelled") {
			t.Errorf("stdin %s: exit %d, stdout %q, stderr:\n%s\nwant exit 0 and a decline", name, code, stdout, stderr)
		}
	}
	code, _, stderr := run(null)
	if code != exitUsage || !strings.Contains(stderr, "no task") || strings.Contains(stderr, "terminal") {
		t.Errorf("no task, /dev/null on stdin: exit %d, stderr %q; want %d, \"no task\" and no word of a terminal", code, stderr, exitUsage)
	}
}
