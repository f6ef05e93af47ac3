package askcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/switchboard-run/switchboard/internal/statuscmd"
	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/runtime"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// askWithUsage is a studio whose oracle answers with result (and its
// usage in _meta, as the agent server's ask tool does).
func askWithUsage(t *testing.T, result *runtime.Result) string {
	return fakeStudio(t, "oracle", func(ctx context.Context, req *mcp.CallToolRequest, in askInput) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{
			IsError: result.Status != runtime.StatusAnswered,
			Content: []mcp.Content{&mcp.TextContent{Text: result.Answer}},
			Meta:    mcp.Meta{runtime.UsageMetaKey: result.Usage},
		}, result, nil
	})
}

var (
	siblingsUsage = runtime.Usage{Requests: 1, PromptTokens: 300, CompletionTokens: 100, TotalTokens: 400}
	turnUsage     = runtime.Usage{Requests: 3, PromptTokens: 1000, CompletionTokens: 234, CachedTokens: 200, TotalTokens: 1234, CostUSD: 0.0012}
	turnSteps     = []runtime.StepUsage{
		{Step: 1, RequestBytes: 2100, Attempts: 1, Usage: runtime.Usage{Requests: 1, PromptTokens: 300, CompletionTokens: 34, TotalTokens: 334, CostUSD: 0.0004}},
		{Step: 2, RequestBytes: 3800, Attempts: 2, Usage: runtime.Usage{Requests: 1, PromptTokens: 400, CompletionTokens: 100, CachedTokens: 200, TotalTokens: 500, CostUSD: 0.0008}},
	}
)

// TestAskPrintsUsage: after the answer, one line on stderr says what the
// turn cost (its siblings' part and the cost included); stdout holds the
// answer alone. A turn that failed says what it cost before it failed; an
// agent that reports no usage gets no line.
func TestAskPrintsUsage(t *testing.T) {
	const line = "tokens: 1,234 (prompt 1,000 of which 200 cached, completion 234) in 3 model requests, of which 400 by siblings, $0.0012\n"
	url := askWithUsage(t, &runtime.Result{Agent: "oracle", Answer: "42.", Status: runtime.StatusAnswered, Steps: 2, Usage: turnUsage, NestedUsage: siblingsUsage, StepUsage: turnSteps})
	var stdout, stderr bytes.Buffer
	if code := Main(t.Context(), []string{"--studio", url, "what is 6*7"}, nil, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, &stderr)
	}
	if stdout.String() != "42.\n" {
		t.Errorf("stdout %q, want the answer alone", &stdout)
	}
	if !strings.HasSuffix(stderr.String(), line) {
		t.Errorf("stderr does not end with the usage line %q:\n%s", line, &stderr)
	}

	url = askWithUsage(t, &runtime.Result{Agent: "oracle", Status: runtime.StatusFailed, Reason: "model endpoint failed", Steps: 2,
		Usage: runtime.Usage{Requests: 2, PromptTokens: 700, CompletionTokens: 34, ReasoningTokens: 20, TotalTokens: 734}})
	stdout.Reset()
	stderr.Reset()
	if code := Main(t.Context(), []string{"--studio", url, "what is 6*7"}, nil, &stdout, &stderr); code != exitFailed {
		t.Fatalf("a failed turn: exit %d; stderr:\n%s", code, &stderr)
	}
	if want := "tokens: 734 (prompt 700, completion 34 of which 20 reasoning) in 2 model requests\n"; !strings.HasSuffix(stderr.String(), want) {
		t.Errorf("a failed turn: stderr does not end with %q:\n%s", want, &stderr)
	}

	url = askWithUsage(t, &runtime.Result{Agent: "oracle", Answer: "42.", Status: runtime.StatusAnswered})
	stderr.Reset()
	if code := Main(t.Context(), []string{"--studio", url, "what is 6*7"}, nil, io.Discard, &stderr); code != exitOK || strings.Contains(stderr.String(), "tokens:") {
		t.Errorf("no usage reported: exit %d, stderr %q", code, &stderr)
	}
}

// TestAskJSONUsage: --json carries the turn's usage, its siblings' part
// and its steps as the agent reported them, and prints no usage line.
func TestAskJSONUsage(t *testing.T) {
	url := askWithUsage(t, &runtime.Result{Agent: "oracle", Answer: "42.", Status: runtime.StatusAnswered, Steps: 2, Usage: turnUsage, NestedUsage: siblingsUsage, StepUsage: turnSteps})
	var stdout, stderr bytes.Buffer
	if code := Main(t.Context(), []string{"--json", "--studio", url, "what is 6*7"}, nil, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, &stderr)
	}
	var out struct {
		Usage       runtime.Usage       `json:"usage"`
		NestedUsage runtime.Usage       `json:"nested_usage"`
		StepUsage   []runtime.StepUsage `json:"step_usage"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("stdout %q: %v", &stdout, err)
	}
	if out.Usage != turnUsage || out.NestedUsage != siblingsUsage || len(out.StepUsage) != 2 || !reflect.DeepEqual(out.StepUsage, turnSteps) {
		t.Errorf("--json usage %+v nested %+v steps %+v", out.Usage, out.NestedUsage, out.StepUsage)
	}
	if strings.Contains(stderr.String(), "tokens:") {
		t.Errorf("--json printed a usage line: %q", &stderr)
	}
}

// openAIScript answers each agent's chat completions from its own list of
// reply bodies, in OpenAI's chat.completion shape with usage, starting
// over when the list ends; an agent is known by its system prompt ("You
// are <name>").
type openAIScript struct {
	t       *testing.T
	URL     string
	mu      sync.Mutex
	replies map[string][]string // agent → message JSON and usage JSON, alternating
	served  map[string]int
}

func newOpenAIScript(t *testing.T, replies map[string][]string) *openAIScript {
	s := &openAIScript{t: t, replies: replies, served: map[string]int{}}
	ts := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(ts.Close)
	s.URL = ts.URL + "/v1"
	return s
}

func (s *openAIScript) serve(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
		s.t.Errorf("scripted model: a request that is not a chat completion: %v", err)
		http.Error(w, `{"error":{"message":"bad request","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	agent := agentOf(req.Messages[0].Content)
	s.mu.Lock()
	script := s.replies[agent]
	n := s.served[agent]
	s.served[agent]++
	s.mu.Unlock()
	if len(script) == 0 {
		s.t.Errorf("scripted model: no script for agent %q", agent)
		http.Error(w, `{"error":{"message":"no script","type":"server_error"}}`, http.StatusInternalServerError)
		return
	}
	i := (2 * n) % len(script)
	message, usage := script[i], script[i+1]
	finish := "stop"
	if strings.Contains(message, `"tool_calls"`) {
		finish = "tool_calls"
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"chatcmpl-%s-%d","object":"chat.completion","created":1733000000,"model":%q,"choices":[{"index":0,"message":%s,"logprobs":null,"finish_reason":%q}],"usage":%s,"system_fingerprint":"fp_test"}`,
		agent, n, req.Model, message, finish, usage)
}

// TestE2EUsageEverywhere: alpha asks beta, against an OpenAI-shaped
// endpoint that reports usage with cached and reasoning tokens. The usage
// reaches `ask --json` and the line after the answer, the studio's
// federated /metrics (each agent's own tokens), the run in /api/runs (the
// top-level ask's usage, nested asks not counted again) and `switchboard
// status`. Real studio, real agent processes, real ask command.
func TestE2EUsageEverywhere(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), e2eTimeout)
	defer cancel()
	dir := t.TempDir()
	agentWithModel(t, dir, "alpha", 4, `{"beta": {"url": "${SWITCHBOARD_STUDIO_URL}/api/agents/beta/mcp"}}`)
	agentWithModel(t, dir, "beta", 4, `{}`)
	// With a native toolset, so that its turn, which calls none, is a
	// full answer.
	writeFile(t, filepath.Join(dir, "agents", "beta", agentdef.DefinitionFile),
		`{"name": "beta", "description": "test agent beta", "instructions": "You are beta, a test agent.", "tools": ["abacus"], "max_depth": 4}`)
	m := newOpenAIScript(t, map[string][]string{
		"alpha": {
			`{"role":"assistant","content":null,"tool_calls":[{"id":"call_beta","type":"function","function":{"name":"beta__ask","arguments":"{\"task\":\"count the notes\"}"}}],"refusal":null}`,
			`{"prompt_tokens":1000,"completion_tokens":34,"total_tokens":1034,"prompt_tokens_details":{"cached_tokens":200,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`,
			`{"role":"assistant","content":"Beta counted 7 notes.","refusal":null}`,
			`{"prompt_tokens":1200,"completion_tokens":66,"total_tokens":1266,"prompt_tokens_details":{"cached_tokens":1000,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`,
		},
		"beta": {
			`{"role":"assistant","content":"7 notes.","refusal":null}`,
			`{"prompt_tokens":300,"completion_tokens":100,"total_tokens":400,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":60}}`,
		},
	})
	st := startStudio(t, ctx, dir, "OPENAI_BASE_URL="+m.URL, "OPENAI_MODEL=gpt-4o-mini")
	alphaOwn := runtime.Usage{Requests: 2, PromptTokens: 2200, CompletionTokens: 100, CachedTokens: 1200, TotalTokens: 2300}
	betaOwn := runtime.Usage{Requests: 1, PromptTokens: 300, CompletionTokens: 100, ReasoningTokens: 60, TotalTokens: 400}

	ask := startAsk(t, ctx, dir, "--studio", st.URL(), "--agent", "alpha", "--json", "how many notes are there")
	if code := ask.wait(t); code != exitOK {
		t.Fatalf("ask exited %d\nstderr:\n%s", code, ask.stderr)
	}
	var out struct {
		Answer string `json:"answer"`
		turnCost
	}
	if err := json.Unmarshal([]byte(ask.stdout.String()), &out); err != nil {
		t.Fatalf("ask --json printed %q: %v", ask.stdout, err)
	}
	// The turn's usage is alpha's own plus what beta's turn reported, if
	// alpha's runtime rolls it in (NestedUsage says how much).
	own := out.Usage
	own.Requests -= out.NestedUsage.Requests
	own.PromptTokens -= out.NestedUsage.PromptTokens
	own.CompletionTokens -= out.NestedUsage.CompletionTokens
	own.CachedTokens -= out.NestedUsage.CachedTokens
	own.ReasoningTokens -= out.NestedUsage.ReasoningTokens
	own.TotalTokens -= out.NestedUsage.TotalTokens
	if own != alphaOwn || (out.NestedUsage != runtime.Usage{} && out.NestedUsage != betaOwn) {
		t.Errorf("--json usage %+v, nested %+v: want alpha's own %+v (and beta's %+v nested)", out.Usage, out.NestedUsage, alphaOwn, betaOwn)
	}
	if len(out.StepUsage) != 2 || out.StepUsage[0].Usage.CachedTokens != 200 || out.StepUsage[1].Usage.PromptTokens != 1200 || out.StepUsage[0].Attempts != 1 || out.StepUsage[0].RequestBytes == 0 {
		t.Errorf("--json step_usage %+v", out.StepUsage)
	}

	// The studio's /metrics: each agent's own tokens, federated.
	resp, err := http.Get(st.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	series := func(fam, process, key, value string) float64 {
		t.Helper()
		for _, s := range fams[fam].GetMetric() {
			have := map[string]string{}
			for _, l := range s.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			if have["process"] == process && have["model"] == "gpt-4o-mini" && have[key] == value {
				return s.GetCounter().GetValue()
			}
		}
		t.Errorf("the studio's /metrics has no %s{process=%q,%s=%q}", fam, process, key, value)
		return -1
	}
	for _, c := range []struct {
		fam, process, key, value string
		want                     float64
	}{
		{studioapi.MetricModelRequests, "alpha", "outcome", "ok", 2},
		{studioapi.MetricModelRequests, "beta", "outcome", "ok", 1},
		{studioapi.MetricModelTokens, "alpha", "kind", "prompt", 2200},
		{studioapi.MetricModelTokens, "alpha", "kind", "cached", 1200},
		{studioapi.MetricModelTokens, "alpha", "kind", "completion", 100},
		{studioapi.MetricModelTokens, "beta", "kind", "completion", 100},
		{studioapi.MetricModelTokens, "beta", "kind", "reasoning", 60},
	} {
		if got := series(c.fam, c.process, c.key, c.value); got != c.want {
			t.Errorf("%s{process=%q,%s=%q} = %v, want %v", c.fam, c.process, c.key, c.value, got, c.want)
		}
	}

	// The run: the top-level ask's usage, beta's nested ask not added again.
	resp, err = http.Get(st.URL() + "/api/runs?agent=alpha")
	if err != nil {
		t.Fatal(err)
	}
	var runs studioapi.RunList
	err = json.NewDecoder(resp.Body).Decode(&runs)
	resp.Body.Close()
	if err != nil || len(runs.Runs) != 1 {
		t.Fatalf("/api/runs: %v %+v", err, runs)
	}
	if got := runs.Runs[0].Usage; got.TotalTokens != out.Usage.TotalTokens || got.Requests != out.Usage.Requests || got.CachedTokens != out.Usage.CachedTokens {
		t.Errorf("the run's usage %+v, want the ask's %+v", got, out.Usage)
	}

	// status: each agent's requests and tokens.
	var sout, serr bytes.Buffer
	if code := statuscmd.Main(ctx, []string{"--studio", st.URL()}, nil, &sout, &serr); code != 0 {
		t.Fatalf("status: exit %d: %s", code, &serr)
	}
	for _, re := range []string{`(?m)^alpha +running +0 +\d+ +\d+ +\S+ +\S+ +2 +2,300 `, `(?m)^beta +running +0 +\d+ +\d+ +\S+ +\S+ +1 +400 `} {
		if !regexp.MustCompile(re).MatchString(sout.String()) {
			t.Errorf("status lacks %s:\n%s", re, &sout)
		}
	}

	// Without --json, the usage line follows the answer on stderr.
	ask = startAsk(t, ctx, dir, "--studio", st.URL(), "--agent", "alpha", "how many notes are there")
	if code := ask.wait(t); code != exitOK {
		t.Fatalf("ask exited %d\nstderr:\n%s", code, ask.stderr)
	}
	if want := usageLine(out.turnCost) + "\n"; !strings.HasPrefix(want, "tokens: 2,") || !strings.HasSuffix(ask.stderr.String(), want) {
		t.Errorf("stderr does not end with %q:\n%s", want, ask.stderr)
	}
	if got := ask.stdout.String(); got != "Beta counted 7 notes.\n" {
		t.Errorf("stdout %q", got)
	}
}
