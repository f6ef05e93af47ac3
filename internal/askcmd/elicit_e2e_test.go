package askcmd

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/proctest"
	"github.com/switchboard-run/switchboard/internal/projecttest"
	"github.com/switchboard-run/switchboard/pool"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// TestE2EElicitationReachesThePerson: packrat's delete_notes, asked through
// the oracle (builtin model) to delete several notes, asks for
// confirmation; the elicitation crosses the oracle (agent.json "elicit":
// true) to `switchboard ask`, real processes throughout. Answered "y" from
// stdin, the notes go; with nobody to ask (stdin not a terminal), ask
// declines and nothing is deleted; an empty line takes the schema's
// default (false), so nothing is deleted either.
func TestE2EElicitationReachesThePerson(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), e2eTimeout)
	defer cancel()
	dir := projecttest.New(t, "oracle", "packrat", "abacus")
	st := startStudio(t, ctx, dir)
	p := newTestPool(t)
	packrat := &pool.Server{Name: "packrat", URL: st.AgentURL("packrat")}
	call := func(name string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		res, err := p.CallTool(ctx, packrat, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		if res.IsError {
			t.Fatalf("%s: %+v", name, res.Content)
		}
		return res
	}
	store := func(n int) {
		for i := range n {
			call("store_note", map[string]any{"text": "old thing " + string(rune('a'+i)), "tags": []string{"old"}})
		}
	}
	count := func() int {
		t.Helper()
		res := call("list_notes", map[string]any{"tag": "old", "limit": 100})
		m, _ := res.StructuredContent.(map[string]any)
		n, ok := m["count"].(float64)
		if !ok {
			t.Fatalf("list_notes: no count in %+v", res.StructuredContent)
		}
		return int(n)
	}
	store(3)

	const task = "delete_notes tag=old"
	run := func(stdin string, env []string, args ...string) *askProcess {
		t.Helper()
		a := &askProcess{stdout: &proctest.SyncBuffer{}, stderr: &proctest.SyncBuffer{}}
		a.cmd = exec.CommandContext(ctx, needBinary(t), append([]string{"ask", "--studio", st.URL()}, append(args, task)...)...)
		a.cmd.Dir, a.cmd.Env = dir, env
		a.cmd.Stdin = strings.NewReader(stdin)
		a.cmd.Stdout, a.cmd.Stderr = a.stdout, a.stderr
		if err := a.cmd.Run(); err != nil {
			if _, ok := err.(*exec.ExitError); !ok {
				t.Fatal(err)
			}
		}
		return a
	}

	// Nobody to ask: stdin is a pipe, not a terminal.
	a := run("y\n", cleanEnv())
	if got := count(); got != 3 {
		t.Fatalf("after a declined elicitation %d notes tagged old remain, want 3\nstderr:\n%s\nstdout:\n%s", got, a.stderr, a.stdout)
	}
	for _, want := range []string{"declined (nobody to ask", "Delete 3 notes tagged \"old\"?"} {
		if !strings.Contains(a.stderr.String(), want) {
			t.Errorf("declining ask's stderr lacks %q:\n%s", want, a.stderr)
		}
	}
	if !strings.Contains(a.stdout.String(), "Nothing deleted") {
		t.Errorf("declining ask's answer does not say nothing was deleted:\n%s", a.stdout)
	}

	// --no-input declines even when answers are offered.
	a = run("y\n", cleanEnv(), "--no-input", "--answer-elicitations-from-stdin")
	if got := count(); got != 3 || !strings.Contains(a.stderr.String(), "declined (nobody to ask") {
		t.Fatalf("--no-input: %d notes remain, want 3\nstderr:\n%s", got, a.stderr)
	}

	// An empty line takes the default, false: nothing deleted.
	a = run("\n", cleanEnv(EnvElicitStdin+"=1"))
	if got := count(); got != 3 {
		t.Fatalf("after the default answer %d notes remain, want 3\nstderr:\n%s", got, a.stderr)
	}
	if !strings.Contains(a.stderr.String(), "default false") || !strings.Contains(a.stdout.String(), "not confirmed (accept)") {
		t.Errorf("default answer: stderr\n%s\nstdout\n%s", a.stderr, a.stdout)
	}

	// The person says yes: the three notes go, and only they.
	call("store_note", map[string]any{"text": "keep me", "tags": []string{"new"}})
	a = run("y\n", cleanEnv(), "--answer-elicitations-from-stdin")
	if got := count(); got != 0 {
		t.Fatalf("after a confirmed elicitation %d notes tagged old remain, want 0\nstderr:\n%s\nstdout:\n%s", got, a.stderr, a.stdout)
	}
	t.Logf("confirmed ask, stderr:\n%s\nstdout:\n%s", a.stderr, a.stdout)
	if code := a.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("confirmed ask exited %d\nstderr:\n%s", code, a.stderr)
	}
	if !strings.Contains(a.stdout.String(), "Deleted 3 notes tagged \"old\"") {
		t.Errorf("confirmed ask's answer:\n%s", a.stdout)
	}
	res := call("list_notes", map[string]any{})
	if m, _ := res.StructuredContent.(map[string]any); m["count"] != float64(1) {
		t.Errorf("the untagged note did not survive: %+v", res.StructuredContent)
	}
}

// TestE2EElicitationNeedsAnAgentThatSaysSo: with "elicit": false in the
// oracle's agent.json (the default) its pool offers no elicitation, so
// packrat's question never reaches the person, who stands ready to say
// yes, and nothing is deleted.
func TestE2EElicitationNeedsAnAgentThatSaysSo(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), e2eTimeout)
	defer cancel()
	dir := projecttest.New(t, "oracle", "packrat", "abacus")
	def := filepath.Join(dir, "agents", "oracle", agentdef.DefinitionFile)
	b, err := os.ReadFile(def)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"elicit": true`)) {
		t.Fatalf("the bundled oracle does not say \"elicit\": true:\n%s", b)
	}
	writeFile(t, def, string(bytes.Replace(b, []byte(`"elicit": true`), []byte(`"elicit": false`), 1)))
	st := startStudio(t, ctx, dir)
	p := newTestPool(t)
	packrat := &pool.Server{Name: "packrat", URL: st.AgentURL("packrat")}
	for range 2 {
		if _, err := p.CallTool(ctx, packrat, &mcp.CallToolParams{Name: "store_note", Arguments: map[string]any{"text": "x", "tags": []string{"old"}}}); err != nil {
			t.Fatal(err)
		}
	}
	// The person would say yes, if asked.
	a := &askProcess{stdout: &proctest.SyncBuffer{}, stderr: &proctest.SyncBuffer{}}
	a.cmd = exec.CommandContext(ctx, needBinary(t), "ask", "--studio", st.URL(), "--answer-elicitations-from-stdin", "delete_notes tag=old")
	a.cmd.Dir, a.cmd.Env, a.cmd.Stdin = dir, cleanEnv(), strings.NewReader("y\n")
	a.cmd.Stdout, a.cmd.Stderr = a.stdout, a.stderr
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	a.wait(t)
	res, err := p.CallTool(ctx, packrat, &mcp.CallToolParams{Name: "list_notes", Arguments: map[string]any{"tag": "old"}})
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := res.StructuredContent.(map[string]any); m["count"] != float64(2) {
		t.Fatalf("notes tagged old: %+v, want 2 left\nstderr:\n%s", res.StructuredContent, a.stderr)
	}
	if !strings.Contains(a.stdout.String(), "cannot be asked") || strings.Contains(a.stderr.String(), "Delete 2 notes") {
		t.Errorf("stdout:\n%s\nstderr:\n%s", a.stdout, a.stderr)
	}
}
