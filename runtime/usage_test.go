package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sashabaranov/go-openai"
	"github.com/switchboard-run/switchboard/internal/agentserver"
	"github.com/switchboard-run/switchboard/pool/mcpconfig"
	"github.com/switchboard-run/switchboard/runtime"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// billed answers 200 with msg and usage (the chat API's usage object, as
// OpenAI documents it, e.g. with prompt_tokens_details.cached_tokens).
func billed(msg openai.ChatCompletionMessage, usage string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		finish := "stop"
		if len(msg.ToolCalls) > 0 {
			finish = "tool_calls"
		}
		msg.Role = openai.ChatMessageRoleAssistant
		m, _ := json.Marshal(msg)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1733000000,"model":"scripted","choices":[{"index":0,"message":%s,"finish_reason":%q}],"usage":%s}`, m, finish, usage)
	}
}

func tokens(prompt, completion int) string {
	return fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}`, prompt, completion, prompt+completion)
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-12 }

// askServer is a real go-sdk server over loopback HTTP with an ask tool
// that answers with meta as its result's _meta.
func askServer(t *testing.T, name string, meta mcp.Meta, isError bool) *mcpconfig.Server {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: name, Version: "test"}, nil)
	s.AddTool(&mcp.Tool{Name: "ask", Description: "Ask " + name + ".", InputSchema: json.RawMessage(`{"type":"object","properties":{"task":{"type":"string"}}}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{IsError: isError, Content: []mcp.Content{&mcp.TextContent{Text: name + " did it"}}, Meta: meta}, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(ts.Close)
	return &mcpconfig.Server{Name: name, Type: "http", URL: ts.URL}
}

// TestNestedUsage: the usage a sibling's ask tool reports in _meta (a
// tool error's too: a turn that did not answer still cost) is added to
// Result.NestedUsage and Result.Usage; a server that uses the key for
// something that is no Usage adds nothing.
func TestNestedUsage(t *testing.T) {
	sibling := runtime.Usage{Requests: 3, PromptTokens: 900, CompletionTokens: 90, CachedTokens: 400, TotalTokens: 990, CostUSD: 0.0125}
	failed := runtime.Usage{Requests: 1, PromptTokens: 10, CompletionTokens: 1, TotalTokens: 11}
	packrat := askServer(t, "packrat", mcp.Meta{runtime.UsageMetaKey: sibling}, false)
	scout := askServer(t, "scout", mcp.Meta{runtime.UsageMetaKey: failed}, true)
	odd := askServer(t, "odd", mcp.Meta{runtime.UsageMetaKey: "lots", "other": 1}, false)
	e := newEndpoint(t,
		billed(openai.ChatCompletionMessage{ToolCalls: []openai.ToolCall{
			toolCall("c1", "packrat__ask", `{"task":"a"}`), toolCall("c2", "scout__ask", `{"task":"b"}`), toolCall("c3", "odd__ask", `{"task":"c"}`),
		}}, tokens(100, 10)),
		billed(openai.ChatCompletionMessage{Content: "done"}, tokens(200, 20)),
	)
	res, err := newAgent(t, oracle(e.URL, packrat, scout, odd), nil).Run(t.Context(), "ask them", chain)
	if err != nil {
		t.Fatal(err)
	}
	nested := sibling
	nested.Add(failed)
	if res.NestedUsage != nested {
		t.Errorf("NestedUsage %+v, want %+v", res.NestedUsage, nested)
	}
	want := runtime.Usage{Requests: 2, PromptTokens: 300, CompletionTokens: 30, TotalTokens: 330}
	want.Add(nested)
	if res.Usage != want {
		t.Errorf("Usage %+v, want %+v (own and nested)", res.Usage, want)
	}
	// Each step's span and what it chose, for the studio's waterfall.
	if len(res.StepUsage) != 2 {
		t.Fatalf("steps %+v", res.StepUsage)
	}
	first, last := res.StepUsage[0], res.StepUsage[1]
	if first.FinishReason != "tool_calls" || fmt.Sprint(first.ToolCalls) != "[packrat__ask scout__ask odd__ask]" || first.Start.IsZero() || first.DurationMS <= 0 {
		t.Errorf("step 1 %+v, want its span, tool_calls and the three tools", first)
	}
	if last.FinishReason != "stop" || len(last.ToolCalls) != 0 || last.Start.Before(first.Start) || last.Replayed {
		t.Errorf("step 2 %+v, want its span after step 1's and stop", last)
	}
}

// serveAgent serves def as a real agent server (its ask tool and all)
// over loopback HTTP.
func serveAgent(t *testing.T, def *agentdef.Definition) *mcpconfig.Server {
	t.Helper()
	s, err := agentserver.New(def, &agentserver.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		s.CloseSessions()
		ts.Close()
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return &mcpconfig.Server{Name: def.Name, Type: "http", URL: ts.URL}
}

// TestNestedUsageTwoLevels: oracle asks mid, a real agent server, whose
// turn asks leaf, another: each level's ask result carries its turn's
// usage, nested turns included, so oracle's Result.Usage is the bill of
// all three turns, tokens and cost by each agent's own price table.
func TestNestedUsageTwoLevels(t *testing.T) {
	leafModel := newEndpoint(t, billed(openai.ChatCompletionMessage{Content: "leaf did it"}, tokens(50, 10)))
	leaf := serveAgent(t, &agentdef.Definition{Name: "leaf", Description: "Does the work.", MaxDepth: 4,
		// A toolset of its own, so that its answer without tools is a turn
		// that did its task (an agent with no tools at all is unavailable).
		Tools: []string{"abacus"}, Model: agentdef.Model{BaseURL: leafModel.URL, Name: "scripted"}, MCP: &mcpconfig.Config{}})

	midModel := newEndpoint(t,
		billed(openai.ChatCompletionMessage{ToolCalls: []openai.ToolCall{toolCall("m1", "leaf__ask", `{"task":"do it"}`)}}, tokens(100, 20)),
		billed(openai.ChatCompletionMessage{Content: "mid did it"}, tokens(150, 30)),
	)
	mid := serveAgent(t, &agentdef.Definition{Name: "mid", Description: "Delegates.", MaxDepth: 4,
		Model: agentdef.Model{BaseURL: midModel.URL, Name: "scripted", Prices: map[string]agentdef.Price{"scripted": {Input: 10, Output: 10}}},
		MCP:   &mcpconfig.Config{Servers: []*mcpconfig.Server{leaf}}})

	oracleModel := newEndpoint(t,
		billed(openai.ChatCompletionMessage{ToolCalls: []openai.ToolCall{toolCall("o1", "mid__ask", `{"task":"do it"}`)}},
			`{"prompt_tokens":200,"completion_tokens":40,"total_tokens":240,"prompt_tokens_details":{"cached_tokens":100}}`),
		billed(openai.ChatCompletionMessage{Content: "all done"}, tokens(300, 60)),
	)
	def := oracle(oracleModel.URL, mid)
	half := 0.5
	def.Model.Prices = map[string]agentdef.Price{"scripted": {Input: 1, CachedInput: &half, Output: 2}}
	res, err := newAgent(t, def, nil).Run(t.Context(), "get it done", chain)
	if err != nil {
		t.Fatal(err)
	}
	if res.Answer != "all done" || res.Status != runtime.StatusAnswered {
		t.Fatalf("answer %q, status %s: %s; mid saw %q", res.Answer, res.Status, res.Reason, toolContents(t, midModel.Bodies()[1]))
	}
	// mid: its own two requests at $10/M, and leaf's one (no price).
	midCost := (250*10.0 + 50*10.0) / 1e6
	wantNested := runtime.Usage{Requests: 3, PromptTokens: 300, CompletionTokens: 60, TotalTokens: 360, CostUSD: midCost}
	if !near(res.NestedUsage.CostUSD, wantNested.CostUSD) {
		t.Errorf("nested cost %v, want %v", res.NestedUsage.CostUSD, wantNested.CostUSD)
	}
	res.NestedUsage.CostUSD = wantNested.CostUSD
	if res.NestedUsage != wantNested {
		t.Errorf("NestedUsage %+v, want %+v (mid's turn with leaf's)", res.NestedUsage, wantNested)
	}
	ownCost := (400*1.0 + 100*0.5 + 100*2.0) / 1e6
	want := runtime.Usage{Requests: 5, PromptTokens: 800, CompletionTokens: 160, CachedTokens: 100, TotalTokens: 960, CostUSD: ownCost + midCost}
	if !near(res.Usage.CostUSD, want.CostUSD) {
		t.Errorf("cost %v, want %v", res.Usage.CostUSD, want.CostUSD)
	}
	res.Usage.CostUSD = want.CostUSD
	if res.Usage != want {
		t.Errorf("Usage %+v, want %+v", res.Usage, want)
	}
}

// TestPriced: tokens become CostUSD by agent.json's price table, cached
// prompt tokens at cached_input when it is given and at input when not,
// per request (OnModelRequest) and per step; a model without a price, and
// the builtin model whatever the table says, cost 0.
func TestPriced(t *testing.T) {
	const usage = `{"prompt_tokens":2000,"completion_tokens":500,"total_tokens":2500,"prompt_tokens_details":{"cached_tokens":1000},"completion_tokens_details":{"reasoning_tokens":200}}`
	cached := 0.075
	for _, tc := range []struct {
		name   string
		prices map[string]agentdef.Price
		want   float64
	}{
		{"cached price", map[string]agentdef.Price{"scripted": {Input: 0.15, CachedInput: &cached, Output: 0.60}}, (1000*0.15 + 1000*0.075 + 500*0.60) / 1e6},
		{"no cached price", map[string]agentdef.Price{"scripted": {Input: 0.15, Output: 0.60}}, (2000*0.15 + 500*0.60) / 1e6},
		{"another model's price", map[string]agentdef.Price{"gpt-4o": {Input: 2.5, Output: 10}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEndpoint(t, billed(openai.ChatCompletionMessage{Content: "hi"}, usage))
			def := oracle(e.URL)
			def.Model.Prices = tc.prices
			var seen []runtime.ModelRequest
			res, err := newAgent(t, def, &runtime.Options{OnModelRequest: func(mr runtime.ModelRequest) { seen = append(seen, mr) }}).Run(t.Context(), "hi", chain)
			if err != nil {
				t.Fatal(err)
			}
			if !near(res.Usage.CostUSD, tc.want) || !near(res.StepUsage[0].Usage.CostUSD, tc.want) || len(seen) != 1 || !near(seen[0].Usage.CostUSD, tc.want) {
				t.Errorf("cost %v (step %v, request %+v), want %v", res.Usage.CostUSD, res.StepUsage[0].Usage.CostUSD, seen, tc.want)
			}
			if res.Usage.CachedTokens != 1000 || res.Usage.ReasoningTokens != 200 {
				t.Errorf("usage %+v", res.Usage)
			}
		})
	}
	t.Run("builtin", func(t *testing.T) {
		def := &agentdef.Definition{Name: "oracle", Model: agentdef.Model{Name: runtime.BuiltinModel,
			Prices: map[string]agentdef.Price{runtime.BuiltinModel: {Input: 1, Output: 1}}}, MCP: &mcpconfig.Config{}}
		res, _ := newAgent(t, def, nil).Run(t.Context(), "hello", chain)
		if res.Usage.Requests == 0 || res.Usage.TotalTokens == 0 || res.Usage.CostUSD != 0 {
			t.Errorf("builtin usage %+v, want tokens counted at no cost", res.Usage)
		}
	})
}
