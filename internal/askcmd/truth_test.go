package askcmd

// End-to-end tests of what ask says: an agent answering with its own
// tools, and the exit code, stderr and --json of a task that could not be
// done in full. Real processes throughout, as in e2e_test.go, with the
// builtin model.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sashabaranov/go-openai"

	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/internal/mcptest"
	"github.com/switchboard-run/switchboard/internal/peertest"
	"github.com/switchboard-run/switchboard/internal/proctest"
	"github.com/switchboard-run/switchboard/internal/projecttest"
	"github.com/switchboard-run/switchboard/internal/studio"
	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/pool"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// askOutput is the --json object as a script reads it.
type askOutput struct {
	askJSON
	Status      string   `json:"status"`
	ExitCode    int      `json:"exit_code"`
	Reason      string   `json:"reason"`
	Unavailable []string `json:"unavailable"`
	RunID       string   `json:"run_id"`
}

func decodeAsk(t *testing.T, a *askProcess) askOutput {
	t.Helper()
	var out askOutput
	if err := json.Unmarshal([]byte(a.stdout.String()), &out); err != nil {
		t.Fatalf("ask --json printed %q: %v\nstderr:\n%s", a.stdout, err, a.stderr)
	}
	return out
}

// TestE2EAgentAnswersWithItsOwnTools: abacus and packrat are asked
// directly; their models are offered their own native tools, so they do
// the work instead of saying they have no tools.
func TestE2EAgentAnswersWithItsOwnTools(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), e2eTimeout)
	defer cancel()
	dir := projecttest.New(t, "oracle", "packrat", "abacus")
	st := startStudio(t, ctx, dir)

	ask := startAsk(t, ctx, dir, "--studio", st.URL(), "--agent", "abacus", "--json", "what is 17% of 2340")
	if code := ask.wait(t); code != exitOK {
		t.Fatalf("ask exited %d\nstderr:\n%s", code, ask.stderr)
	}
	out := decodeAsk(t, ask)
	if !strings.Contains(out.Answer, "397.8") || out.Status != "answered" {
		t.Errorf("abacus answered %+v, want 397.8", out)
	}
	if len(out.Delegations) != 1 || out.Delegations[0].Agent != "abacus" || out.Delegations[0].Tool != "calculate" ||
		out.Delegations[0].Outcome != delegation.OutcomeOK {
		t.Errorf("delegations %+v, want abacus.calculate ok", out.Delegations)
	}

	ask = startAsk(t, ctx, dir, "--studio", st.URL(), "--agent", "packrat", "remember that the launch moved to Friday, then tell me what you know about the launch")
	if code := ask.wait(t); code != exitOK {
		t.Fatalf("ask exited %d\nstderr:\n%s", code, ask.stderr)
	}
	if got := ask.stdout.String(); !strings.Contains(got, "Friday") {
		t.Errorf("packrat answered %q", got)
	}
	for _, line := range []string{"✓ packrat.store_note", "✓ packrat.search_notes"} {
		if !strings.Contains(ask.stderr.String(), line) {
			t.Errorf("stderr lacks %q:\n%s", line, ask.stderr)
		}
	}

	// An agent the studio does not have: a usage error listing the ones
	// it has.
	ask = startAsk(t, ctx, dir, "--studio", st.URL(), "--agent", "nosuch", "hello")
	if code := ask.wait(t); code != exitUsage || !strings.Contains(ask.stderr.String(), `unknown agent "nosuch"`) ||
		!strings.Contains(ask.stderr.String(), "has abacus, oracle, packrat") {
		t.Errorf("--agent nosuch: exit %d, stderr %q", code, ask.stderr)
	}
}

// TestE2EUnavailableSiblingIsNamed: the oracle's abacus is on a port
// nobody listens on. A task that needs it exits 5 and names abacus and the
// reason on stderr and in --json; the studio records the call as failed.
func TestE2EUnavailableSiblingIsNamed(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), e2eTimeout)
	defer cancel()
	dir := projecttest.New(t, "oracle", "packrat", "abacus")
	writeFile(t, filepath.Join(dir, "agents", "oracle", agentdef.MCPFile), `{"mcpServers": {
		"packrat": {"url": "${SWITCHBOARD_STUDIO_URL:-http://127.0.0.1:1}/api/agents/packrat/mcp"},
		"abacus": {"url": "http://127.0.0.1:1/mcp"}}}`)
	st := startStudio(t, ctx, dir)

	ask := startAsk(t, ctx, dir, "--studio", st.URL(), "--json", "what is 2+2")
	if code := ask.wait(t); code != exitUnavailable {
		t.Fatalf("ask exited %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitUnavailable, ask.stdout, ask.stderr)
	}
	out := decodeAsk(t, ask)
	if out.Status != "unavailable" || out.ExitCode != exitUnavailable || len(out.Unavailable) != 1 ||
		!strings.Contains(out.Unavailable[0], `"abacus"`) || !strings.Contains(out.Unavailable[0], "connection refused") {
		t.Errorf("--json %+v: want abacus named unavailable with the reason", out)
	}
	if !strings.Contains(ask.stderr.String(), `unavailable: agent "abacus"`) {
		t.Errorf("stderr does not name abacus:\n%s", ask.stderr)
	}

	// Text mode: the same exit code, the answer on stdout, the reason on
	// stderr.
	ask = startAsk(t, ctx, dir, "--studio", st.URL(), "what is 2+2")
	if code := ask.wait(t); code != exitUnavailable {
		t.Fatalf("ask exited %d, want %d\nstderr:\n%s", code, exitUnavailable, ask.stderr)
	}
	if !strings.Contains(ask.stderr.String(), `abacus`) || ask.stdout.String() == "" {
		t.Errorf("stdout %q, stderr %q", ask.stdout, ask.stderr)
	}

	// status shows the ask as unavailable (the page's word), not ok and
	// not the wire's tool_error.
	status := exec.CommandContext(ctx, needBinary(t), "status", "--studio", st.URL())
	status.Env = cleanEnv()
	text, err := status.CombinedOutput()
	if err != nil {
		t.Fatalf("status: %v\n%s", err, text)
	}
	var askLines []string
	for _, l := range strings.Split(string(text), "\n") {
		if strings.Contains(l, "→ oracle.ask") {
			askLines = append(askLines, l)
		}
	}
	if len(askLines) != 2 || !strings.Contains(askLines[0], "unavailable") || !strings.Contains(askLines[1], "unavailable") {
		t.Errorf("status lists the asks as %q, want both unavailable:\n%s", askLines, text)
	}
}

// TestE2EStalledModelEndpoint: the agents' model endpoint accepts requests
// and never answers. With a model deadline, ask exits 1 with an error that
// names the endpoint, the step and the deadline; with ask --timeout
// shorter than it, ask exits 124.
func TestE2EStalledModelEndpoint(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), e2eTimeout)
	defer cancel()
	release := make(chan struct{})
	stalled := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer stalled.Close()
	defer close(release)
	dir := t.TempDir()
	agentWithModel(t, dir, "alpha", 4, `{}`)

	st := startStudio(t, ctx, dir, "OPENAI_BASE_URL="+stalled.URL+"/v1", "OPENAI_MODEL=stalled", "SWITCHBOARD_MODEL_TIMEOUT=300ms")
	ask := startAsk(t, ctx, dir, "--studio", st.URL(), "--agent", "alpha", "--json", "anything")
	if code := ask.wait(t); code != exitFailed {
		t.Fatalf("ask exited %d, want %d\nstderr:\n%s", code, exitFailed, ask.stderr)
	}
	out := decodeAsk(t, ask)
	for _, want := range []string{"model request timed out", stalled.URL + "/v1", "step 1", "300ms"} {
		if !strings.Contains(out.Error, want) || !strings.Contains(ask.stderr.String(), want) {
			t.Errorf("error %q (stderr %q) does not say %q", out.Error, ask.stderr, want)
		}
	}

	ask = startAsk(t, ctx, dir, "--studio", st.URL(), "--agent", "alpha", "--timeout", "100ms", "anything")
	if code := ask.wait(t); code != exitTimeout {
		t.Fatalf("ask --timeout exited %d, want %d\nstderr:\n%s", code, exitTimeout, ask.stderr)
	}
	if !strings.Contains(ask.stderr.String(), "no answer within --timeout 100ms") {
		t.Errorf("stderr %q", ask.stderr)
	}
}

// memoryServer is the entry point of @modelcontextprotocol/server-memory
// as testdata/npm/package.json pins it. The test that needs it is skipped
// when it is not installed, unless $CI is set: there it must be (`npm ci
// --prefix internal/askcmd/testdata/npm`).
func memoryServer(t *testing.T) string {
	t.Helper()
	peertest.Node(t) // the agent runs the script with the node on PATH
	return filepath.Join(peertest.Module(t, filepath.Join("testdata", "npm"), "@modelcontextprotocol/server-memory"), "dist", "index.js")
}

// TestE2EBuiltinWithAThirdPartyServer: an agent whose only sibling is
// @modelcontextprotocol/server-memory over stdio, which nobody here wrote.
// The builtin model plans from that server's tools alone: it stores an
// entity and finds it again, naming the tool behind each line; and it
// refuses a step that fits three of the server's tools, naming them.
func TestE2EBuiltinWithAThirdPartyServer(t *testing.T) {
	script := memoryServer(t)
	ctx, cancel := context.WithTimeout(t.Context(), e2eTimeout)
	defer cancel()
	dir := t.TempDir()
	servers, _ := json.Marshal(map[string]any{"memory": map[string]any{
		"command": "node", "args": []string{script},
		"env": map[string]string{"MEMORY_FILE_PATH": filepath.Join(dir, "memory.jsonl")},
	}})
	writeFile(t, filepath.Join(dir, "agents", "memo", agentdef.DefinitionFile),
		`{"name": "memo", "description": "keeps a knowledge graph", "model": {"name": "builtin"}, "allow_stdio": true}`)
	writeFile(t, filepath.Join(dir, "agents", "memo", agentdef.MCPFile), `{"mcpServers": `+string(servers)+`}`)
	st := startStudio(t, ctx, dir)

	task := `create_entities {"entities":[{"name":"launch","entityType":"event","observations":["moved to Friday"]}]}, then tell me what you know about the launch`
	ask := startAsk(t, ctx, dir, "--studio", st.URL(), "--agent", "memo", "--json", task)
	if code := ask.wait(t); code != exitOK {
		t.Fatalf("ask exited %d\nstdout:\n%s\nstderr:\n%s", code, ask.stdout, ask.stderr)
	}
	out := decodeAsk(t, ask)
	lines := strings.Split(out.Answer, "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "memory.create_entities: ") ||
		!strings.HasPrefix(lines[1], "memory.search_nodes: ") || !strings.Contains(lines[1], "moved to Friday") {
		t.Errorf("answer %q: want one line per tool, the search finding the entity", out.Answer)
	}
	if len(out.Delegations) != 2 || out.Delegations[1].Tool != "search_nodes" || out.Delegations[1].Outcome != delegation.OutcomeOK {
		t.Errorf("delegations %+v", out.Delegations)
	}
	// The studio's run has both calls to the stdio server, which its proxy
	// never saw, with the server named, and its page draws them.
	run := studioRun(t, st.URL(), out.RunID)
	if run.Delegations != 2 || run.Failures != 0 || len(run.Hops) != 1 || len(run.Hops[0].Calls) != 2 ||
		run.Hops[0].Calls[0].Server != "memory" || run.Hops[0].Calls[0].Tool != "create_entities" || run.Hops[0].Calls[0].Proxied {
		t.Errorf("the studio's run %s: %d delegations, %d failures, hops %+v", out.RunID, run.Delegations, run.Failures, run.Hops)
	}
	if page := getPage(t, st.URL()+"/runs/"+out.RunID); !strings.Contains(page, `<span class="span-name">memory.search_nodes</span> <span class="badge tone-ok">ok</span>`) {
		t.Errorf("the run page does not draw memory.search_nodes")
	}

	ask = startAsk(t, ctx, dir, "--studio", st.URL(), "--agent", "memo", "--json", "delete launch")
	if code := ask.wait(t); code != exitNotAnswered {
		t.Fatalf("ask exited %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitNotAnswered, ask.stdout, ask.stderr)
	}
	out = decodeAsk(t, ask)
	for _, want := range []string{"ambiguous", "memory.delete_entities", "memory.delete_observations", "memory.delete_relations"} {
		if !strings.Contains(out.Answer, want) || !strings.Contains(out.Reason, want) {
			t.Errorf("answer %q, reason %q: want %q", out.Answer, out.Reason, want)
		}
	}
	if len(out.Delegations) != 0 {
		t.Errorf("an ambiguous step made delegations: %+v", out.Delegations)
	}
	// The builtin's refusal is badged as what it is, not as a failure.
	if run := studioRun(t, st.URL(), out.RunID); run.Badge != "not answered" || run.Tone != "notanswered" || run.Failures != 0 {
		t.Errorf("the refused run is badged %s/%s with %d failures, want not answered/notanswered and none", run.Badge, run.Tone, run.Failures)
	}
}

// studioRun is GET /api/runs/<id> of the studio at base.
func studioRun(t *testing.T, base, id string) studioapi.Run {
	t.Helper()
	var run studioapi.Run
	if err := json.Unmarshal([]byte(getPage(t, base+"/api/runs/"+id)), &run); err != nil {
		t.Fatalf("run %s: %v", id, err)
	}
	return run
}

// getPage GETs url, which must answer 200.
func getPage(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v: %s", url, resp.Status, err, b)
	}
	return string(b)
}

// TestE2ETraceExportFailureIsOneLine: with a collector that refuses, and
// one that never answers, ask still answers and exits 0, and says once, in
// its own words, that traces were not exported: no raw library lines.
func TestE2ETraceExportFailureIsOneLine(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), e2eTimeout)
	defer cancel()
	dir := projecttest.New(t, "oracle", "packrat", "abacus")
	st := startStudio(t, ctx, dir)
	release := make(chan struct{})
	stalled := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer stalled.Close()
	defer close(release)
	for _, endpoint := range []string{"http://127.0.0.1:1", stalled.URL} {
		ask := startAskEnv(t, ctx, dir, cleanEnv("OTEL_EXPORTER_OTLP_ENDPOINT="+endpoint), "--studio", st.URL(), "what is 2+2")
		if code := ask.wait(t); code != exitOK {
			t.Fatalf("collector %s: ask exited %d\nstderr:\n%s", endpoint, code, ask.stderr)
		}
		stderr := ask.stderr.String()
		if n := strings.Count(stderr, "switchboard ask: traces not exported"); n != 1 {
			t.Errorf("collector %s: %d lines saying traces were not exported, want 1:\n%s", endpoint, n, stderr)
		}
		for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
			// ask's own lines: its errors, notes, delegations and the
			// usage line after the answer (usage.go).
			if !strings.HasPrefix(l, "switchboard ask: ") && !strings.HasPrefix(l, "· ") && !strings.Contains(l, "abacus.calculate") && !strings.HasPrefix(l, "tokens: ") {
				t.Errorf("collector %s: a line not in ask's own words: %q", endpoint, l)
			}
		}
	}
}

// TestE2EHeldCallIsShown: packrat is killed between the oracle's two
// delegations and the studio waits 2 s before restarting it, holding the
// second delegation meanwhile. ask says, while it waits, that packrat is
// restarting and that the studio holds the call; then the call recovers.
func TestE2EHeldCallIsShown(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), e2eTimeout)
	defer cancel()
	dir := projecttest.New(t, "oracle", "packrat", "abacus")
	store := call("call_store", "packrat__store_note", `{"text":"The demo is on Monday."}`)
	search := call("call_search", "packrat__search_notes", `{"query":"demo"}`)
	var st *studio.Studio
	model := newScriptedModel(t, map[string][]turnStep{"oracle": {
		{reply: openai.ChatCompletionMessage{ToolCalls: []openai.ToolCall{store}}},
		{
			before: func(*http.Request) {
				old := agentInfo(t, st, "packrat")
				if err := syscall.Kill(old.PID, syscall.SIGKILL); err != nil {
					t.Error(err)
				}
				tick := time.NewTicker(10 * time.Millisecond)
				defer tick.Stop()
				for agentInfo(t, st, "packrat").State == studioapi.StateRunning {
					select {
					case <-tick.C:
					case <-ctx.Done():
						return
					}
				}
			},
			reply: openai.ChatCompletionMessage{ToolCalls: []openai.ToolCall{search}},
		},
		{reply: openai.ChatCompletionMessage{Content: "The demo is on Monday."}},
	}})
	logs := &proctest.SyncBuffer{}
	var err error
	st, err = studio.Start(ctx, &studio.Options{
		Dir: dir, Listen: "127.0.0.1:0", Executable: needBinary(t), AgentOutput: logs,
		Env:        []string{"OPENAI_BASE_URL=" + model.URL, "OPENAI_MODEL=scripted"},
		MinBackoff: 2 * time.Second, MaxBackoff: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("closing the studio: %v", err)
		}
		if t.Failed() {
			t.Logf("agent logs:\n%s", logs)
		}
	})
	if err := st.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}

	ask := startAsk(t, ctx, dir, "--studio", st.URL(), "remember that the demo is on Monday, then tell me about the demo")
	if code := ask.wait(t); code != exitOK {
		t.Fatalf("ask exited %d\nstderr:\n%s", code, ask.stderr)
	}
	stderr := ask.stderr.String()
	for _, want := range []string{"· packrat is restarting (retry in", "failure 1 of 8; it exited: exited: signal: killed", "the studio holds calls to it until it listens", "✓ packrat.search_notes"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if i, j := strings.Index(stderr, "packrat is restarting"), strings.Index(stderr, "✓ packrat.search_notes"); i > j {
		t.Errorf("the wait was reported after the call finished:\n%s", stderr)
	}
}

// TestE2EMisconfiguredSiblings: a stdio sibling for an agent without
// allow_stdio, and an agent whose tools/mcp.json is gone, each exit 5
// naming the reason; a task on stdin ("ask -") works like one in argv.
func TestE2EMisconfiguredSiblings(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), e2eTimeout)
	defer cancel()
	dir := projecttest.New(t, "oracle", "packrat", "abacus")
	writeFile(t, filepath.Join(dir, "agents", "oracle", agentdef.MCPFile), `{"mcpServers": {
		"abacus": {"command": "switchboard-no-such-command"}}}`)
	if err := os.Remove(filepath.Join(dir, "agents", "packrat", agentdef.MCPFile)); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "agents", "bare", agentdef.DefinitionFile), `{"name": "bare", "description": "no tools at all"}`)
	st := startStudio(t, ctx, dir)

	for _, c := range []struct{ agent, want string }{
		{"oracle", `agent "abacus"`},
		{"bare", `agent "bare" has no tools: ` + filepath.Join(dir, "agents", "bare", "tools", "mcp.json")},
	} {
		ask := startAsk(t, ctx, dir, "--studio", st.URL(), "--agent", c.agent, "--json", "what is 2+2")
		if code := ask.wait(t); code != exitUnavailable {
			t.Fatalf("%s: ask exited %d, want %d\nstdout:\n%s\nstderr:\n%s", c.agent, code, exitUnavailable, ask.stdout, ask.stderr)
		}
		out := decodeAsk(t, ask)
		if len(out.Unavailable) != 1 || !strings.Contains(out.Unavailable[0], c.want) || !strings.Contains(out.Reason, c.want) {
			t.Errorf("%s: --json %+v, want %q named", c.agent, out, c.want)
		}
	}
	// packrat without its mcp.json still has its own tools; and the task
	// comes from stdin.
	ask := &askProcess{stdout: &proctest.SyncBuffer{}, stderr: &proctest.SyncBuffer{}}
	ask.cmd = exec.CommandContext(ctx, needBinary(t), "ask", "--studio", st.URL(), "--agent", "packrat", "-")
	ask.cmd.Dir, ask.cmd.Env = dir, cleanEnv()
	ask.cmd.Stdin = strings.NewReader("remember that the launch moved to Friday\n")
	ask.cmd.Stdout, ask.cmd.Stderr = ask.stdout, ask.stderr
	if err := ask.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if code := ask.wait(t); code != exitOK || !strings.Contains(ask.stdout.String(), "packrat.store_note: Stored note") {
		t.Errorf("ask - : exit %d, stdout %q, stderr %q", code, ask.stdout, ask.stderr)
	}
}

// TestE2EUnavailableAfterANoteIsNotAnswered: the oracle's abacus is down,
// and the task needs packrat first, then abacus. packrat stores the note;
// the builtin model cannot do the arithmetic and says so. Something was
// done, so this is not exit 5 ("nothing was done"): it is 3, not
// answered, and the reason names what was done and what was unavailable.
// The note is there.
func TestE2EUnavailableAfterANoteIsNotAnswered(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), e2eTimeout)
	defer cancel()
	dir := projecttest.New(t, "packrat", "abacus")
	// The oracle's model stores the note, then finds abacus missing and
	// says it cannot go on: a real model's way. (The builtin model reads
	// the whole task first and refuses it all when a part has no tool.)
	agentWithModel(t, dir, "oracle", 4, `{
		"packrat": {"url": "${SWITCHBOARD_STUDIO_URL:-http://127.0.0.1:1}/api/agents/packrat/mcp"},
		"abacus": {"url": "`+mcptest.DeadURL(t)+`/mcp"}}`)
	giveUp := openai.ChatCompletionMessage{Refusal: "I cannot work out the sum: abacus is unavailable."}
	model := newScriptedModel(t, map[string][]turnStep{"oracle": {
		{reply: openai.ChatCompletionMessage{ToolCalls: []openai.ToolCall{call("n1", "packrat__store_note", `{"text":"The launch moved to Friday."}`)}}},
		{reply: giveUp},
		{reply: openai.ChatCompletionMessage{ToolCalls: []openai.ToolCall{call("n2", "packrat__store_note", `{"text":"The demo is on Monday."}`)}}},
		{reply: giveUp},
	}})
	st := startStudio(t, ctx, dir, "OPENAI_BASE_URL="+model.URL, "OPENAI_MODEL=scripted")

	ask := startAsk(t, ctx, dir, "--studio", st.URL(), "--json", "remember that the launch moved to Friday, then what is 2+2")
	if code := ask.wait(t); code != exitNotAnswered {
		t.Fatalf("ask exited %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitNotAnswered, ask.stdout, ask.stderr)
	}
	out := decodeAsk(t, ask)
	if out.Status != "not_answered" || out.ExitCode != exitNotAnswered {
		t.Errorf("--json status %q exit_code %d, want not_answered, %d", out.Status, out.ExitCode, exitNotAnswered)
	}
	for _, want := range []string{"not answered: ", `unavailable: agent "abacus"`, "done before it stopped: packrat.store_note"} {
		if !strings.Contains(out.Reason, want) || !strings.Contains(ask.stderr.String(), want) {
			t.Errorf("reason %q (stderr %q) lacks %q", out.Reason, ask.stderr, want)
		}
	}
	if len(out.Unavailable) != 1 || !strings.Contains(out.Unavailable[0], `"abacus"`) {
		t.Errorf("--json unavailable %q, want abacus", out.Unavailable)
	}
	if len(out.Delegations) != 1 || out.Delegations[0].Agent != "packrat" || out.Delegations[0].Tool != "store_note" || out.Delegations[0].Outcome != delegation.OutcomeOK {
		t.Errorf("delegations %+v, want packrat.store_note ok", out.Delegations)
	}
	p := newTestPool(t)
	res, err := p.CallTool(ctx, &pool.Server{Name: "packrat", URL: st.AgentURL("packrat")}, &mcp.CallToolParams{Name: "search_notes", Arguments: map[string]any{"query": "launch"}})
	if err != nil || res.IsError || !strings.Contains(delegation.ResultText(res), "Friday") {
		t.Errorf("the note is not in packrat: %v %+v", err, res)
	}

	// Text mode: the same exit code; stderr shows the note as done.
	ask = startAsk(t, ctx, dir, "--studio", st.URL(), "remember that the demo is on Monday, then what is 3+3")
	if code := ask.wait(t); code != exitNotAnswered {
		t.Fatalf("ask exited %d, want %d\nstderr:\n%s", code, exitNotAnswered, ask.stderr)
	}
	if s := ask.stderr.String(); !strings.Contains(s, "✓ packrat.store_note") || !strings.Contains(s, "done before it stopped: packrat.store_note (exit 3)") {
		t.Errorf("stderr:\n%s", s)
	}
	if n := model.Served("oracle"); n != 4 {
		t.Errorf("the model was asked %d times, want 4 (two steps per ask)", n)
	}
}

// TestE2EDeclinedDeletionIsNotDone: packrat's delete_notes, asked through
// the oracle, asks the person to confirm; ask answers decline (nobody to
// ask: stdin is not a terminal), cancel (stdin ends before an answer) and
// no (an empty line, the default false). Each time nothing is deleted, and
// ask does not exit 0: the task was not done. It exits 4, a delegation
// failed, and says that the deletion was not confirmed and how it was
// answered. A yes deletes and exits 0.
func TestE2EDeclinedDeletionIsNotDone(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), e2eTimeout)
	defer cancel()
	dir := projecttest.New(t, "oracle", "packrat", "abacus")
	st := startStudio(t, ctx, dir)
	p := newTestPool(t)
	packrat := &pool.Server{Name: "packrat", URL: st.AgentURL("packrat")}
	for _, text := range []string{"old a", "old b", "old c"} {
		res, err := p.CallTool(ctx, packrat, &mcp.CallToolParams{Name: "store_note", Arguments: map[string]any{"text": text, "tags": []string{"old"}}})
		if err != nil || res.IsError {
			t.Fatalf("store_note: %v %+v", err, res)
		}
	}
	left := func() int {
		t.Helper()
		res, err := p.CallTool(ctx, packrat, &mcp.CallToolParams{Name: "list_notes", Arguments: map[string]any{"tag": "old", "limit": 100}})
		if err != nil || res.IsError {
			t.Fatalf("list_notes: %v %+v", err, res)
		}
		m, _ := res.StructuredContent.(map[string]any)
		n, _ := m["count"].(float64)
		return int(n)
	}
	ask := func(stdin string, env []string, args ...string) (*askProcess, int) {
		t.Helper()
		a := &askProcess{stdout: &proctest.SyncBuffer{}, stderr: &proctest.SyncBuffer{}}
		a.cmd = exec.CommandContext(ctx, needBinary(t), append(append([]string{"ask", "--studio", st.URL(), "--json"}, args...), "delete_notes tag=old")...)
		a.cmd.Dir, a.cmd.Env, a.cmd.Stdin = dir, env, strings.NewReader(stdin)
		a.cmd.Stdout, a.cmd.Stderr = a.stdout, a.stderr
		if err := a.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return a, a.wait(t)
	}

	for _, c := range []struct {
		name, stdin string
		env         []string
		answered    string // packrat's words for the answer
	}{
		{"declined", "y\n", cleanEnv(), "not confirmed (decline)"},
		{"cancelled", "", cleanEnv(EnvElicitStdin + "=1"), "not confirmed (cancel)"},
		{"the default, no", "\n", cleanEnv(EnvElicitStdin + "=1"), "not confirmed (accept)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, code := ask(c.stdin, c.env)
			if code != exitDelegationFailed {
				t.Fatalf("ask exited %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitDelegationFailed, a.stdout, a.stderr)
			}
			if n := left(); n != 3 {
				t.Fatalf("%d notes tagged old left, want 3", n)
			}
			out := decodeAsk(t, a)
			if out.Status != "delegation_failed" || out.ExitCode != exitDelegationFailed ||
				!strings.Contains(out.Reason, "packrat.delete_notes: tool_error") || !strings.Contains(out.Answer, "Nothing deleted") ||
				!strings.Contains(out.Answer, c.answered) {
				t.Errorf("--json %+v: want delegation_failed, packrat.delete_notes named, the answer saying %q", out, c.answered)
			}
			if len(out.Delegations) != 1 || out.Delegations[0].Outcome != delegation.OutcomeToolError {
				t.Errorf("delegations %+v, want delete_notes as a tool error", out.Delegations)
			}
			if !strings.Contains(a.stderr.String(), "(exit 4)") {
				t.Errorf("stderr does not give the reason and the exit code:\n%s", a.stderr)
			}
		})
	}

	a, code := ask("y\n", cleanEnv(EnvElicitStdin+"=1"))
	if out := decodeAsk(t, a); code != exitOK || out.Status != "answered" || left() != 0 {
		t.Fatalf("confirmed: exit %d, --json %+v, %d notes left\nstderr:\n%s", code, out, left(), a.stderr)
	}
}
