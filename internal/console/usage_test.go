package console

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/internal/logging"
	"github.com/switchboard-run/switchboard/internal/mcphttp"
	"github.com/switchboard-run/switchboard/internal/observe"
	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/runtime"
)

type askIn struct {
	Task string `json:"task"`
}

// askServer is an MCP server whose ask tool answers as the agent server's
// does: the turn's runtime.Result as structured content and its usage in
// _meta. turn makes the result.
func askServer(name string, turn func(ctx context.Context, task string) *runtime.Result) http.Handler {
	s := mcp.NewServer(&mcp.Implementation{Name: name, Version: "test"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "ask"}, func(ctx context.Context, req *mcp.CallToolRequest, in askIn) (*mcp.CallToolResult, *runtime.Result, error) {
		res := turn(ctx, in.Task)
		return &mcp.CallToolResult{
			Content: []mcp.Content{&mcp.TextContent{Text: res.Answer}},
			Meta:    mcp.Meta{runtime.UsageMetaKey: res.Usage},
		}, res, nil
	})
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
}

func connectTo(t *testing.T, ctx context.Context, url string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func getBody(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", url, resp.Status, b)
	}
	return string(b)
}

// TestRunUsageShown: a client asks oracle through the observed routes,
// oracle asks packrat in the same run, and each answers with its usage,
// oracle's holding packrat's. /api/runs and /api/runs/<id> give the run
// the usage of oracle's turn (not oracle's plus packrat's again), each hop
// its own, the run its steps; the run page shows the tokens, the steps and
// the hops' tokens, and the fleet page the run's tokens.
func TestRunUsageShown(t *testing.T) {
	ctx := t.Context()
	packratU := runtime.Usage{Requests: 1, PromptTokens: 400, CompletionTokens: 30, TotalTokens: 430}
	oracleOwn := runtime.Usage{Requests: 2, PromptTokens: 1000, CompletionTokens: 234, CachedTokens: 200, ReasoningTokens: 100, TotalTokens: 1234, CostUSD: 0.0012}
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

	mux.Handle("/api/agents/packrat/mcp", observed(ob, "packrat", askServer("packrat", func(ctx context.Context, task string) *runtime.Result {
		return &runtime.Result{Agent: "packrat", RunID: "R-usage", Answer: "stored", Status: runtime.StatusAnswered, Steps: 1, Usage: packratU,
			StepUsage: []runtime.StepUsage{{Step: 1, RequestBytes: 900, Attempts: 1, Usage: packratU}}}
	})))
	mux.Handle("/api/agents/oracle/mcp", observed(ob, "oracle", askServer("oracle", func(ctx context.Context, task string) *runtime.Result {
		// A delegation to packrat's ask, as a turn makes it: through the
		// studio, with the chain in _meta.
		cs := connectTo(t, ctx, studio.URL+"/api/agents/packrat/mcp")
		chain := delegation.Chain{RunID: "R-usage", Agents: []string{"oracle"}, Depth: 1}
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"task": "store it"}, Meta: chain.Meta()}); err != nil {
			t.Errorf("oracle asking packrat: %v", err)
		}
		total := oracleOwn
		total.Add(packratU)
		return &runtime.Result{Agent: "oracle", RunID: "R-usage", Answer: "filed", Status: runtime.StatusAnswered, Steps: 2,
			Usage: total, NestedUsage: packratU,
			StepUsage: []runtime.StepUsage{
				{Step: 1, RequestBytes: 2100, Attempts: 2, Usage: runtime.Usage{Requests: 1, PromptTokens: 450, CompletionTokens: 34, TotalTokens: 484}},
				{Step: 2, RequestBytes: 3800, Attempts: 1, Usage: runtime.Usage{Requests: 1, PromptTokens: 550, CompletionTokens: 200, CachedTokens: 200, ReasoningTokens: 100, TotalTokens: 750, CostUSD: 0.0012}},
			}}
	})))
	con := New(&Options{URL: studio.URL, Runs: runs, Delegations: deleg, Series: ob.Series, Logs: observe.NewLogs(logging.NewScrubber(nil)),
		Pools: func(context.Context) []studioapi.PoolInfo { return nil }})
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		if !con.ServeAPI(w, r, r.URL.EscapedPath()) {
			NotFound(w, r.URL.EscapedPath())
		}
	})
	mux.HandleFunc("/", con.ServePage)

	cs := connectTo(t, ctx, studio.URL+"/api/agents/oracle/mcp")
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"task": "file the numbers"}})
	if err != nil || res.IsError {
		t.Fatalf("ask: %v %+v", err, res)
	}

	want := studioapi.Usage{Requests: 3, PromptTokens: 1400, CompletionTokens: 264, CachedTokens: 200, ReasoningTokens: 100, TotalTokens: 1664, CostUSD: 0.0012}
	var list studioapi.RunList
	if err := json.Unmarshal([]byte(getBody(t, studio.URL+"/api/runs")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Runs) != 1 || list.Runs[0].ID != "R-usage" || list.Runs[0].Usage != want {
		t.Fatalf("/api/runs: %+v, want run R-usage with usage %+v", list.Runs, want)
	}
	var run studioapi.Run
	if err := json.Unmarshal([]byte(getBody(t, studio.URL+"/api/runs/R-usage")), &run); err != nil {
		t.Fatal(err)
	}
	if run.Usage != want || len(run.StepUsage) != 2 || run.StepUsage[1].Usage.CachedTokens != 200 || run.StepUsage[0].Attempts != 2 {
		t.Errorf("/api/runs/R-usage: usage %+v steps %+v", run.Usage, run.StepUsage)
	}
	if len(run.Hops) != 2 || run.Hops[1].Agent != "packrat" || run.Hops[1].Usage != (studioapi.Usage{Requests: 1, PromptTokens: 400, CompletionTokens: 30, TotalTokens: 430}) ||
		run.Hops[0].NestedUsage != run.Hops[1].Usage {
		t.Errorf("hops: %+v", run.Hops)
	}

	page := getBody(t, studio.URL+"/runs/R-usage")
	for _, s := range []string{
		`<dd id="run-usage">1,664 tokens (prompt 1,400, 200 of them cached; completion 264, 100 of them reasoning) in 3 model requests, $0.0012</dd>`,
		`<tr data-step="2"><td class="num">2</td><td class="num">1</td><td class="num">3.8 KB</td><td class="num">550</td><td class="num">200</td><td class="num">200</td><td class="num">100</td><td class="num">750</td>`,
		`<tr data-step="1"><td class="num">1</td><td class="num">2</td><td class="num">2.1 KB</td>`,
		`430 tokens</span>`,
		`model: 1,664 tokens (prompt 1,400, 200 of them cached; completion 264, 100 of them reasoning) in 3 model requests, $0.0012, of which 430 tokens by the siblings it asked`,
	} {
		if !strings.Contains(page, s) {
			t.Errorf("the run page lacks %q", s)
		}
	}
	if fleet := getBody(t, studio.URL+"/"); !strings.Contains(fleet, `<td class="num tokens">1,664 <span class="muted">$0.0012</span></td>`) {
		t.Errorf("the fleet page's run list lacks the run's tokens")
	}
}

// observed is an agent's route through the observer, as the studio's.
func observed(ob *observe.Observer, agent string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ob.Serve(agent, w, r, next.ServeHTTP) })
}

func TestCount(t *testing.T) {
	for n, want := range map[int]string{0: "0", 7: "7", 999: "999", 1000: "1,000", 12345: "12,345", 1234567: "1,234,567", -4321: "-4,321"} {
		if got := count(n); got != want {
			t.Errorf("count(%d) = %q, want %q", n, got, want)
		}
	}
}
