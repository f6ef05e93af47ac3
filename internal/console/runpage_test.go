package console

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/internal/logging"
	"github.com/switchboard-run/switchboard/internal/mcphttp"
	"github.com/switchboard-run/switchboard/internal/observe"
	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/runtime"
)

// runRig is a studio (observer, console, pages) on loopback with agents
// oracle and packrat behind its proxy routes, each an MCP server whose ask
// answers as the agent server's does.
type runRig struct {
	url string
}

func newRunRig(t *testing.T, oracle, packrat func(ctx context.Context, studio, task string) *runtime.Result) *runRig {
	t.Helper()
	deleg := observe.NewDelegations()
	runs := observe.NewRuns(logging.NewScrubber(nil), deleg)
	ob := &observe.Observer{
		Budget: mcphttp.NewBudget(nil), MaxBody: mcphttp.DefaultMaxBodyBytes,
		AgentOfKey:  func(*http.Request) string { return "" },
		Delegations: deleg, Runs: runs, Series: observe.NewSeries([]string{"oracle", "packrat"}),
		Metrics: observe.NewMetrics(prometheus.NewRegistry(), observe.NewTools([]string{"oracle", "packrat"}, func(context.Context, string) ([]string, error) { return []string{"ask"}, nil })),
	}
	mux := http.NewServeMux()
	studio := httptest.NewServer(mux)
	t.Cleanup(studio.Close)
	mux.Handle("/api/agents/oracle/mcp", observed(ob, "oracle", askErrServer("oracle", func(ctx context.Context, task string) *runtime.Result { return oracle(ctx, studio.URL, task) })))
	mux.Handle("/api/agents/packrat/mcp", observed(ob, "packrat", askErrServer("packrat", func(ctx context.Context, task string) *runtime.Result { return packrat(ctx, studio.URL, task) })))
	con := New(&Options{URL: studio.URL, Runs: runs, Delegations: deleg, Series: ob.Series, Logs: observe.NewLogs(logging.NewScrubber(nil)),
		Pools: func(context.Context) []studioapi.PoolInfo { return nil }})
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		if !con.ServeAPI(w, r, r.URL.EscapedPath()) {
			NotFound(w, r.URL.EscapedPath())
		}
	})
	mux.HandleFunc("/", con.ServePage)
	return &runRig{url: studio.URL}
}

// askErrServer is askServer whose result is a tool error when the turn did
// not answer fully, as the agent server's (internal/agentserver, answer).
func askErrServer(name string, turn func(ctx context.Context, task string) *runtime.Result) http.Handler {
	s := mcp.NewServer(&mcp.Implementation{Name: name, Version: "test"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "ask"}, func(ctx context.Context, req *mcp.CallToolRequest, in askIn) (*mcp.CallToolResult, *runtime.Result, error) {
		res := turn(ctx, in.Task)
		text := res.Answer
		if res.Status != runtime.StatusAnswered {
			text += "\n\n(" + res.Reason + ")"
		}
		return &mcp.CallToolResult{
			IsError: res.Status != runtime.StatusAnswered,
			Content: []mcp.Content{&mcp.TextContent{Text: text}},
			Meta:    mcp.Meta{runtime.UsageMetaKey: res.Usage},
		}, res, nil
	})
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
}

// askPackrat is oracle's delegation to packrat's ask, as a turn makes it:
// through the studio, with the chain in _meta.
func askPackrat(t *testing.T, ctx context.Context, studio, runID string) {
	cs := connectTo(t, ctx, studio+"/api/agents/packrat/mcp")
	chain := delegation.Chain{RunID: runID, Agents: []string{"oracle"}, Depth: 1}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"task": "store it"}, Meta: chain.Meta()}); err != nil {
		t.Errorf("oracle asking packrat: %v", err)
	}
}

func finished(id, server, tool string, outcome delegation.Outcome, ms float64, at time.Time) delegation.Event {
	return delegation.Event{Phase: delegation.PhaseFinish, CallID: id, Agent: server, Tool: tool, Outcome: outcome, DurationMS: ms, Time: at}
}

// TestRunPageShowsTheModelAndEveryHop: oracle's turn asks packrat (through
// the studio) and calls two servers of its tools/mcp.json directly, one
// by a repaired name, one retried; its model steps carry their spans.
// The run counts three delegations (packrat's once), badges oracle's
// not_answered as "not answered" (not tool_error), and the page draws each
// model step with its finish reason and chosen tools and each direct call
// with its server and marks, and the run's model and tool time.
func TestRunPageShowsTheModelAndEveryHop(t *testing.T) {
	ctx := t.Context()
	const runID = "R-hops"
	rig := newRunRig(t, func(ctx context.Context, studio, task string) *runtime.Result {
		began := time.Now()
		askPackrat(t, ctx, studio, runID)
		now := time.Now()
		fetch := finished("c3", "fetch", "get", delegation.OutcomeOK, 3, now)
		fetch.Retried, fetch.Recovered = true, true
		return &runtime.Result{Agent: "oracle", RunID: runID, Status: runtime.StatusNotAnswered, Reason: "not answered: the model said it cannot do that", Steps: 2,
			Delegations: []delegation.Event{
				finished("c1", "packrat", "ask", delegation.OutcomeOK, float64(now.Sub(began))/1e6, now),
				finished("c2", "github", "search_issues", delegation.OutcomeOK, 2, now),
				fetch,
			},
			NameRepairs: []runtime.NameRepair{{Step: 1, CallID: "c2", From: "github.search_issues", To: "github__search_issues"}},
			StepUsage: []runtime.StepUsage{
				{Step: 1, Attempts: 1, Start: began, DurationMS: 1, FinishReason: "tool_calls", ToolCalls: []string{"packrat__ask", "github.search_issues", "fetch__get"},
					Usage:     runtime.Usage{Requests: 1, PromptTokens: 300, CompletionTokens: 20, CachedTokens: 100, TotalTokens: 320},
					Truncated: []runtime.Truncated{{CallID: "c3", Tool: "fetch__get", Sent: 65535, Original: 1 << 20}}},
				{Step: 2, Attempts: 2, Start: now, DurationMS: 1, FinishReason: "stop", Usage: runtime.Usage{Requests: 1, PromptTokens: 400, CompletionTokens: 10, TotalTokens: 410}},
			}}
	}, func(ctx context.Context, studio, task string) *runtime.Result {
		return &runtime.Result{Agent: "packrat", RunID: runID, Answer: "stored", Status: runtime.StatusAnswered, Steps: 1}
	})
	cs := connectTo(t, ctx, rig.url+"/api/agents/oracle/mcp")
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"task": "file the numbers"}}); err != nil || !res.IsError {
		t.Fatalf("ask: %v %+v, want the tool error of a turn not answered", err, res)
	}

	var run studioapi.Run
	if err := json.Unmarshal([]byte(getBody(t, rig.url+"/api/runs/"+runID)), &run); err != nil {
		t.Fatal(err)
	}
	if run.Delegations != 3 || run.Failures != 0 || run.Recovered != 1 || run.Badge != "not answered" {
		t.Errorf("run: %d delegations %d failures %d recovered, badge %q; want 3 0 1 \"not answered\"", run.Delegations, run.Failures, run.Recovered, run.Badge)
	}
	if run.ModelMS != 2 || run.ToolMS <= 5 {
		t.Errorf("model %v ms, tool %v ms", run.ModelMS, run.ToolMS)
	}

	page := getBody(t, rig.url+"/runs/"+runID)
	for _, s := range []string{
		`<span id="run-outcome" class="badge tone-notanswered">not answered</span>`,
		`<dd>3 · 1 recovered</dd>`,
		`<dd id="run-time">model 2.0 ms · tools`,
		`<span class="span-name">model step 1</span> <span class="badge tone-model">tool_calls</span> <span class="mark" title="the model was sent these results of this step&#39;s calls cut to the agent&#39;s context budget (context.max_tool_result_bytes, max_tool_results_bytes): fetch__get (c3): 65.5 KB of 1048.6 KB">truncated</span> <span class="mark tokens">320 tokens</span>`,
		`<li><code>fetch__get</code> (c3): 65.5 KB of 1048.6 KB</li>`,
		// A step's messages and response are fetched from oracle's journal
		// when it is opened; step 2's bar has no truncated mark.
		`<div class="step-content" data-step-url="/api/agents/oracle/runs/R-hops/steps/1">`,
		`<div class="step-content" data-step-url="/api/agents/oracle/runs/R-hops/steps/2">`,
		`<code>packrat__ask</code>, <code>github.search_issues</code>, <code>fetch__get</code>`,
		`<span class="span-name">model step 2</span> <span class="badge tone-model">stop</span> <span class="mark" title="the request was sent again after a failure that passes">2 attempts</span>`,
		`<span class="span-name">github.search_issues</span> <span class="badge tone-ok">ok</span> <span class="mark" title="the model wrote github.search_issues; the agent routed it to this tool">repaired</span>`,
		`<span class="span-name">fetch.get</span> <span class="badge tone-recovered">recovered</span> <span class="mark" title="the pool re-initialized the server&#39;s session and sent the call once more">retried</span>`,
		`<p class="failure reason">not answered: the model said it cannot do that</p>`,
	} {
		if !strings.Contains(page, s) {
			t.Errorf("the run page lacks %q", s)
		}
	}
	// packrat's ask is a hop of its own, not a span of oracle's too.
	if strings.Contains(page, `<span class="span-name">packrat.ask</span>`) {
		t.Error("packrat's ask is drawn twice: as a hop and as a call oracle reported")
	}
}

// TestRunPageEscapesServerStrings: what servers say (a task, an answer,
// tool names, a turn's reason, a call's message, a result) is shown as
// text: markup in it stays text, quotes do not end an attribute, and ANSI
// escapes are made visible. The page is rendered by the console's real
// handlers from a run that passed its real observer.
func TestRunPageEscapesServerStrings(t *testing.T) {
	ctx := t.Context()
	const runID = "R-esc"
	const evil = `<script>alert(1)</script>"><img src=x onerror=alert(2)>'` + "\x1b[31mred\x1b[0m"
	rig := newRunRig(t, func(ctx context.Context, studio, task string) *runtime.Result {
		askPackrat(t, ctx, studio, runID)
		now := time.Now()
		ev := finished("c1", "ev\"il<b>"+evil, "t<i>ool"+evil, delegation.OutcomeToolError, 1, now)
		ev.Message = "message " + evil
		return &runtime.Result{Agent: "oracle", RunID: runID, Answer: "answer " + evil, Status: runtime.StatusDelegationFailed, Reason: "reason " + evil, Steps: 1,
			Delegations: []delegation.Event{ev},
			NameRepairs: []runtime.NameRepair{{CallID: "c1", From: "from" + evil}},
			StepUsage: []runtime.StepUsage{{Step: 1, Attempts: 1, Start: now, DurationMS: 1, FinishReason: "stop" + evil, ToolCalls: []string{"tool" + evil},
				Truncated: []runtime.Truncated{{CallID: "c1" + evil, Tool: "t<i>ool" + evil, Sent: 10, Original: 20}}}}}
	}, func(ctx context.Context, studio, task string) *runtime.Result {
		return &runtime.Result{Agent: "packrat", RunID: runID, Answer: "packrat " + evil, Status: runtime.StatusAnswered, Steps: 1}
	})
	cs := connectTo(t, ctx, rig.url+"/api/agents/oracle/mcp")
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"task": "task " + evil}}); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/runs/" + runID, "/", "/runs/" + runID + "?from=0"} {
		page := getBody(t, rig.url+path)
		// The only scripts are the page's own two.
		own := []string{`<script src="/static/studio.js" defer></script>`, `<script src="/static/ask.js" defer></script>`}
		n := strings.Count(strings.ToLower(page), "<script")
		for _, s := range own {
			if !strings.Contains(page, s) {
				n = -1
			}
		}
		if n != len(own) {
			t.Errorf("%s: %d <script elements, want only the page's own %d", path, n, len(own))
		}
		for _, bad := range []string{"<img", "<b>", "<i>", `"><img`, "<script>alert", "\x1b"} {
			if strings.Contains(page, bad) {
				i := strings.Index(page, bad)
				t.Errorf("%s holds %q unescaped: …%s…", path, bad, page[max(i-80, 0):min(i+80, len(page))])
			}
		}
		if path != "/" && !strings.Contains(page, "&lt;script&gt;alert(1)&lt;/script&gt;&#34;&gt;&lt;img src=x onerror=alert(2)&gt;&#39;␛[31mred␛[0m") {
			t.Errorf("%s does not show the strings as text", path)
		}
	}
}
