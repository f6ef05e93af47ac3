package askcmd

// End-to-end tests: real processes throughout. The studio (started here,
// in-process, as `ask` would) runs every agent as a child process of the
// freshly built switchboard binary; `switchboard ask` runs as a process
// too. Agents driven by a model talk to a scripted OpenAI-compatible server
// that asserts the exact requests it receives.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	"github.com/switchboard-run/switchboard/internal/proctest"
	"github.com/switchboard-run/switchboard/internal/projecttest"
	"github.com/switchboard-run/switchboard/internal/studio"
	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/pool"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// e2eTimeout bounds one end-to-end test; reaching it is a failure.
const e2eTimeout = 90 * time.Second

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// agentWithModel writes an agent driven by the scripted model (its base
// URL and name come from the studio's environment) that delegates to the
// servers in mcpServers (an mcp.json "mcpServers" object).
func agentWithModel(t *testing.T, dir, name string, maxDepth int, mcpServers string) {
	t.Helper()
	writeFile(t, filepath.Join(dir, "agents", name, agentdef.DefinitionFile), fmt.Sprintf(
		`{"name": %q, "description": "test agent %s", "instructions": "You are %s, a test agent.", "max_depth": %d}`,
		name, name, name, maxDepth))
	writeFile(t, filepath.Join(dir, "agents", name, agentdef.MCPFile), `{"mcpServers": `+mcpServers+`}`)
}

// startStudio runs a studio for dir with env added to its agents'
// environment, and waits until every agent runs.
func startStudio(t *testing.T, ctx context.Context, dir string, env ...string) *studio.Studio {
	t.Helper()
	return startStudioWith(t, ctx, dir, 0, env)
}

// startStudioWith is startStudio with the supervisor's HealthyAfter (zero:
// its default).
func startStudioWith(t *testing.T, ctx context.Context, dir string, healthyAfter time.Duration, env []string) *studio.Studio {
	t.Helper()
	logs := &proctest.SyncBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent logs:\n%s", logs)
		}
	})
	st, err := studio.Start(ctx, &studio.Options{
		Dir:          dir,
		Listen:       "127.0.0.1:0",
		Executable:   needBinary(t),
		Env:          env,
		AgentOutput:  logs,
		MinBackoff:   10 * time.Millisecond,
		MaxBackoff:   100 * time.Millisecond,
		HealthyAfter: healthyAfter,
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
	return st
}

// cleanEnv is the test's environment without anything that would change
// what ask or its agents do.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "OPENAI_") || k == EnvStudioURL || k == EnvDefaultStudioURL {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// notAStudio returns the URL of a loopback server that answers every
// request 404, for $SWITCHBOARD_DEFAULT_STUDIO_URL: a test of the path on
// which ask finds no studio and starts its own must not depend on what
// listens on the default port (a developer's own studio, say), and
// something that is not a studio is what ask meets there when a port is
// taken by another program.
func notAStudio(t *testing.T) string {
	t.Helper()
	ts := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(ts.Close)
	return ts.URL
}

// askProcess is `switchboard ask` as a process.
type askProcess struct {
	cmd            *exec.Cmd
	stdout, stderr *proctest.SyncBuffer
}

func startAsk(t *testing.T, ctx context.Context, dir string, args ...string) *askProcess {
	t.Helper()
	return startAskEnv(t, ctx, dir, cleanEnv(), args...)
}

func startAskEnv(t *testing.T, ctx context.Context, dir string, env []string, args ...string) *askProcess {
	t.Helper()
	a := &askProcess{stdout: &proctest.SyncBuffer{}, stderr: &proctest.SyncBuffer{}}
	a.cmd = exec.CommandContext(ctx, needBinary(t), append([]string{"ask"}, args...)...)
	a.cmd.Dir = dir
	a.cmd.Env = env
	a.cmd.Stdout, a.cmd.Stderr = a.stdout, a.stderr
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return a
}

// wait returns the exit code.
func (a *askProcess) wait(t *testing.T) int {
	t.Helper()
	err := a.cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	t.Fatalf("ask: %v\nstderr:\n%s", err, a.stderr)
	return -1
}

func newTestPool(t *testing.T) *pool.Pool {
	p := pool.New(nil)
	t.Cleanup(func() { p.Close() })
	return p
}

// offeredTools is what the oracle should offer its model for the servers'
// tools: <agent>__<tool>, the description, and the input schema without
// $schema, with "type" and "properties" present.
func offeredTools(t *testing.T, ctx context.Context, p *pool.Pool, st *studio.Studio, agents ...string) []openai.Tool {
	t.Helper()
	var tools []openai.Tool
	for _, a := range agents {
		listed, err := p.ListTools(ctx, &pool.Server{Name: a, URL: st.AgentURL(a)})
		if err != nil {
			t.Fatal(err)
		}
		for _, tool := range listed {
			b, _ := json.Marshal(tool.InputSchema)
			var schema map[string]any
			json.Unmarshal(b, &schema)
			delete(schema, "$schema")
			if _, ok := schema["properties"]; !ok {
				schema["properties"] = map[string]any{}
			}
			tools = append(tools, openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
				Name: a + "__" + tool.Name, Description: tool.Description, Parameters: schema,
			}})
		}
	}
	return tools
}

func assertTools(t *testing.T, got, want []openai.Tool) {
	t.Helper()
	g, _ := json.MarshalIndent(got, "", "  ")
	w, _ := json.MarshalIndent(want, "", "  ")
	// Both sides are decoded and re-encoded, so key order is canonical.
	var gv, wv any
	json.Unmarshal(g, &gv)
	json.Unmarshal(w, &wv)
	g, _ = json.MarshalIndent(gv, "", "  ")
	w, _ = json.MarshalIndent(wv, "", "  ")
	if !bytes.Equal(g, w) {
		t.Errorf("tools offered differ\nwant %s\n got %s", w, g)
	}
}

// restart kills agent name's process through the studio's view of it and
// waits until the studio runs a new one: the old process, and every session
// it held, are gone.
func restart(t *testing.T, ctx context.Context, st *studio.Studio, name string) {
	t.Helper()
	old := agentInfo(t, st, name)
	if old.PID == 0 {
		t.Fatalf("agent %s has no process: %+v", name, old)
	}
	if err := syscall.Kill(old.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		now := agentInfo(t, st, name)
		if now.State == studioapi.StateRunning && now.PID != 0 && now.PID != old.PID {
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("agent %s was not restarted: %+v", name, now)
		}
	}
}

func agentInfo(t *testing.T, st *studio.Studio, name string) studioapi.AgentInfo {
	for _, a := range st.Agents() {
		if a.Name == name {
			return a
		}
	}
	t.Fatalf("no agent %s", name)
	return studioapi.AgentInfo{}
}

// askJSON is the --json output.
type askJSON struct {
	Answer      string             `json:"answer"`
	Agent       string             `json:"agent"`
	Delegations []delegation.Event `json:"delegations"`
	DurationMS  int64              `json:"duration_ms"`
	Error       string             `json:"error"`
}

// TestE2ERestartBetweenDelegations: the oracle delegates to packrat twice in
// one turn, and packrat's process is killed and restarted by the studio
// between the two, so the oracle's pooled session to it is gone. Both
// delegations succeed, the note is stored once, and the answer has it.
func TestE2ERestartBetweenDelegations(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), e2eTimeout)
	defer cancel()
	dir := projecttest.New(t, "oracle", "packrat", "abacus")
	def, err := agentdef.Load(filepath.Join(dir, "agents", "oracle"))
	if err != nil {
		t.Fatal(err)
	}
	const task = "remember that the launch moved to Friday, then tell me what you know about the launch"
	system := openai.ChatCompletionMessage{Role: "system", Content: def.Instructions}
	user := openai.ChatCompletionMessage{Role: "user", Content: task}
	store := call("call_store", "packrat__store_note", `{"text":"The launch moved to Friday.","idempotency_key":"launch-friday"}`)
	search := call("call_search", "packrat__search_notes", `{"query":"launch"}`)
	const answer = "The launch moved to Friday (packrat note 1)."

	var st *studio.Studio
	var want []openai.Tool
	var searchResult string
	model := newScriptedModel(t, map[string][]turnStep{"oracle": {
		{
			check: func(t *testing.T, req *openai.ChatCompletionRequest) {
				assertMessages(t, "request 1", req.Messages, []openai.ChatCompletionMessage{system, user})
				assertTools(t, req.Tools, want)
			},
			reply: openai.ChatCompletionMessage{ToolCalls: []openai.ToolCall{store}},
		},
		{
			check: func(t *testing.T, req *openai.ChatCompletionRequest) {
				assertMessages(t, "request 2", req.Messages, []openai.ChatCompletionMessage{
					system, user,
					{Role: "assistant", ToolCalls: []openai.ToolCall{store}},
					{Role: "tool", ToolCallID: "call_store", Content: "Stored note 1."},
				})
				assertTools(t, req.Tools, want)
			},
			// Between the two delegations: packrat dies and comes back.
			before: func(*http.Request) { restart(t, ctx, st, "packrat") },
			reply:  openai.ChatCompletionMessage{ToolCalls: []openai.ToolCall{search}},
		},
		{
			check: func(t *testing.T, req *openai.ChatCompletionRequest) {
				if n := len(req.Messages); n != 6 {
					t.Fatalf("request 3 has %d messages, want 6", n)
				}
				searchResult = req.Messages[5].Content
				assertMessages(t, "request 3", req.Messages, []openai.ChatCompletionMessage{
					system, user,
					{Role: "assistant", ToolCalls: []openai.ToolCall{store}},
					{Role: "tool", ToolCallID: "call_store", Content: "Stored note 1."},
					{Role: "assistant", ToolCalls: []openai.ToolCall{search}},
					{Role: "tool", ToolCallID: "call_search", Content: searchResult},
				})
			},
			reply: openai.ChatCompletionMessage{Content: answer},
		},
	}})
	st = startStudio(t, ctx, dir, "OPENAI_BASE_URL="+model.URL, "OPENAI_MODEL=scripted")
	p := newTestPool(t)
	want = offeredTools(t, ctx, p, st, "packrat", "abacus")

	ask := startAsk(t, ctx, dir, "--studio", st.URL(), "--json", task)
	if code := ask.wait(t); code != 0 {
		t.Fatalf("ask exited %d\nstderr:\n%s", code, ask.stderr)
	}
	var out askJSON
	if err := json.Unmarshal([]byte(ask.stdout.String()), &out); err != nil {
		t.Fatalf("ask --json printed %q: %v", ask.stdout, err)
	}
	if out.Answer != answer || out.Agent != "oracle" {
		t.Errorf("output %+v", out)
	}
	if len(out.Delegations) != 2 {
		t.Fatalf("delegations %+v, want 2", out.Delegations)
	}
	for i, tool := range []string{"store_note", "search_notes"} {
		d := out.Delegations[i]
		if d.Agent != "packrat" || d.Tool != tool || d.Outcome != delegation.OutcomeOK {
			t.Errorf("delegation %d = %+v, want packrat.%s ok", i, d, tool)
		}
	}
	if !strings.HasPrefix(searchResult, `1 note matching "launch", newest first:`) || !strings.Contains(searchResult, "The launch moved to Friday.") {
		t.Errorf("search result %q", searchResult)
	}
	for _, line := range []string{"→ packrat.store_note", "✓ packrat.store_note", "→ packrat.search_notes", "✓ packrat.search_notes"} {
		if !strings.Contains(ask.stderr.String(), line) {
			t.Errorf("stderr lacks %q:\n%s", line, ask.stderr)
		}
	}
	if info := agentInfo(t, st, "packrat"); info.Restarts < 1 {
		t.Errorf("packrat restarts = %d, want at least 1", info.Restarts)
	}

	// Stored exactly once, and kept across the restart.
	res, err := p.CallTool(ctx, &pool.Server{Name: "packrat", URL: st.AgentURL("packrat")}, &mcp.CallToolParams{Name: "list_notes", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	var notes struct{ Count int }
	b, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(b, &notes)
	if notes.Count != 1 {
		t.Errorf("packrat holds %d notes, want 1: %s", notes.Count, delegation.ResultText(res))
	}
}

// TestE2ECycleAndDepthRefusal: alpha delegates to beta, which delegates
// back to alpha: alpha's process refuses the cycle, beta's model reads the
// refusal, and both turns complete. Then alpha delegates to gamma, whose
// max_depth of 1 refuses a task already one agent deep.
func TestE2ECycleAndDepthRefusal(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), e2eTimeout)
	defer cancel()
	dir := t.TempDir()
	via := func(names ...string) string {
		var parts []string
		for _, n := range names {
			parts = append(parts, fmt.Sprintf(`%q: {"url": "${SWITCHBOARD_STUDIO_URL:-http://127.0.0.1:1}/api/agents/%s/mcp"}`, n, n))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	agentWithModel(t, dir, "alpha", 4, via("beta", "gamma"))
	agentWithModel(t, dir, "beta", 4, via("alpha"))
	agentWithModel(t, dir, "gamma", 1, `{}`)

	var cycleMsg, depthMsg string
	toolMsg := func(t *testing.T, req *openai.ChatCompletionRequest, id string) string {
		last := req.Messages[len(req.Messages)-1]
		if last.Role != "tool" || last.ToolCallID != id {
			t.Errorf("last message %+v, want the tool message for %s", last, id)
		}
		return last.Content
	}
	model := newScriptedModel(t, map[string][]turnStep{
		"alpha": {
			{reply: openai.ChatCompletionMessage{ToolCalls: []openai.ToolCall{call("a1", "beta__ask", `{"task":"ask alpha back"}`)}}},
			{
				check: func(t *testing.T, req *openai.ChatCompletionRequest) {
					// beta's turn had its delegation refused: an error
					// whose text is beta's answer and why.
					want := `Error: agent "beta", tool "ask" reported an error: beta: alpha refused.` + "\n\n(delegation failed: alpha.ask: tool_error)"
					if got := toolMsg(t, req, "a1"); got != want {
						t.Errorf("alpha got %q from beta, want %q", got, want)
					}
				},
				reply: openai.ChatCompletionMessage{Content: "cycle refused"},
			},
			{reply: openai.ChatCompletionMessage{ToolCalls: []openai.ToolCall{call("a2", "gamma__ask", `{"task":"go deep"}`)}}},
			{
				check: func(t *testing.T, req *openai.ChatCompletionRequest) { depthMsg = toolMsg(t, req, "a2") },
				reply: openai.ChatCompletionMessage{Content: "depth refused"},
			},
		},
		"beta": {
			{reply: openai.ChatCompletionMessage{ToolCalls: []openai.ToolCall{call("b1", "alpha__ask", `{"task":"loop"}`)}}},
			{
				check: func(t *testing.T, req *openai.ChatCompletionRequest) { cycleMsg = toolMsg(t, req, "b1") },
				reply: openai.ChatCompletionMessage{Content: "beta: alpha refused."},
			},
		},
	})
	st := startStudio(t, ctx, dir, "OPENAI_BASE_URL="+model.URL, "OPENAI_MODEL=scripted")
	p := newTestPool(t)
	alpha := &pool.Server{Name: "alpha", URL: st.AgentURL("alpha")}
	// Each of alpha's turns had a delegation refused, so each is an error
	// carrying the answer and the reason.
	for _, c := range []struct{ answer, callee string }{{"cycle refused", "beta"}, {"depth refused", "gamma"}} {
		res, err := p.CallTool(ctx, alpha, &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"task": "test " + c.answer}})
		if err != nil {
			t.Fatal(err)
		}
		want := c.answer + "\n\n(delegation failed: " + c.callee + ".ask: tool_error)"
		if got := delegation.ResultText(res); !res.IsError || got != want {
			t.Errorf("alpha answered %q (isError %v), want %q as an error", got, res.IsError, want)
		}
	}
	for _, c := range []struct{ msg, has string }{
		{cycleMsg, `Error: agent "alpha", tool "ask" reported an error: agent alpha refused the call to ask: delegation cycle`},
		{cycleMsg, "alpha → beta → alpha"},
		{depthMsg, `Error: agent "gamma", tool "ask" reported an error: agent gamma refused the call to ask: delegation too deep`},
		{depthMsg, "past the limit 1"},
	} {
		if !strings.Contains(c.msg, c.has) {
			t.Errorf("tool message %q lacks %q", c.msg, c.has)
		}
	}
	if n := model.Served("gamma"); n != 0 {
		t.Errorf("gamma's model was asked %d times; the refusal must come first", n)
	}
}

// TestE2EInterruptCancelsSiblingCalls sends SIGINT to `switchboard ask`
// while the oracle's delegation is in flight: ask exits 130 and the sibling
// sees its call cancelled. Both with a running studio, and with the studio
// ask starts (and stops) itself.
func TestE2EInterruptCancelsSiblingCalls(t *testing.T) {
	t.Run("running studio", func(t *testing.T) { testInterrupt(t, false) })
	t.Run("studio started by ask", func(t *testing.T) { testInterrupt(t, true) })
}

func testInterrupt(t *testing.T, inProcess bool) {
	ctx, cancel := context.WithTimeout(t.Context(), e2eTimeout)
	defer cancel()
	started := make(chan struct{}, 1)
	cancelled := make(chan error, 1)
	slow := mcp.NewServer(&mcp.Implementation{Name: "slowpoke"}, nil)
	slow.AddTool(&mcp.Tool{Name: "wait", Description: "Waits until cancelled.", InputSchema: map[string]any{"type": "object"}},
		func(callCtx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			started <- struct{}{}
			select {
			case <-callCtx.Done():
				cancelled <- callCtx.Err()
				return nil, callCtx.Err()
			case <-ctx.Done():
				cancelled <- errors.New("the call was never cancelled")
				return nil, ctx.Err()
			}
		})
	sibling := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return slow }, nil))
	// Registered before the studio's, so it runs after the oracle is gone:
	// until then the oracle's pooled session holds a stream open here.
	t.Cleanup(func() {
		for ss := range slow.Sessions() {
			ss.Close()
		}
		sibling.Close()
	})

	dir := t.TempDir()
	agentWithModel(t, dir, "oracle", 4, fmt.Sprintf(`{"slowpoke": {"url": %q}}`, sibling.URL))
	model := newScriptedModel(t, map[string][]turnStep{"oracle": {
		{reply: openai.ChatCompletionMessage{ToolCalls: []openai.ToolCall{call("w", "slowpoke__wait", `{}`)}}},
	}})
	var ask *askProcess
	if inProcess {
		ask = startAskEnv(t, ctx, dir, cleanEnv(EnvDefaultStudioURL+"="+notAStudio(t), "OPENAI_BASE_URL="+model.URL, "OPENAI_MODEL=scripted"), "wait for it")
	} else {
		st := startStudio(t, ctx, dir, "OPENAI_BASE_URL="+model.URL, "OPENAI_MODEL=scripted")
		ask = startAsk(t, ctx, dir, "--studio", st.URL(), "wait for it")
	}
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatalf("the delegation never started; stderr:\n%s", ask.stderr)
	}
	// The call is in flight, and ask has shown it.
	ask.stderr.WaitFor(t, ctx, "→ slowpoke.wait")
	if err := ask.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if code := ask.wait(t); code != exitCancelled {
		t.Errorf("ask exited %d, want %d; stderr:\n%s", code, exitCancelled, ask.stderr)
	}
	if err := <-cancelled; !errors.Is(err, context.Canceled) {
		t.Errorf("sibling: %v", err)
	}
	if !strings.Contains(ask.stderr.String(), "cancelled; the agent was told to stop") {
		t.Errorf("stderr does not say the task was cancelled:\n%s", ask.stderr)
	}
}

// TestE2EBuiltinOnAFreshCheckout runs the README's main job on a fresh
// project directory with no configuration and no model endpoint: ask finds
// no studio where it looks first (something else answers there), starts one
// with the bundled agents and the builtin model, and answers.
func TestE2EBuiltinOnAFreshCheckout(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), e2eTimeout)
	defer cancel()
	dir := projecttest.New(t, "oracle", "packrat", "abacus")
	notStudio := notAStudio(t)
	ask := startAskEnv(t, ctx, dir, cleanEnv(EnvDefaultStudioURL+"="+notStudio), "remember that the launch moved to Friday, then tell me what you know about the launch")
	if code := ask.wait(t); code != 0 {
		t.Fatalf("ask exited %d\nstderr:\n%s", code, ask.stderr)
	}
	if out := ask.stdout.String(); !strings.Contains(out, "Friday") {
		t.Errorf("answer %q does not mention Friday", out)
	}
	for _, line := range []string{"no studio at " + notStudio + ": started one at http://127.0.0.1:", "→ packrat.store_note", "✓ packrat.store_note"} {
		if !strings.Contains(ask.stderr.String(), line) {
			t.Errorf("stderr lacks %q:\n%s", line, ask.stderr)
		}
	}
}
