package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sashabaranov/go-openai"
	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/pool"
	"github.com/switchboard-run/switchboard/pool/mcpconfig"
	"github.com/switchboard-run/switchboard/runtime"
)

// pagedSchema is a tool that pages its results, as a file reader does.
const pagedSchema = `{"type":"object","properties":{"path":{"type":"string"},"offset":{"type":"integer"},"limit":{"type":"integer"}}}`

// bigText is n bytes of text whose runes are two bytes from the second
// byte on, so that a cut at an even byte count falls inside a rune.
func bigText(n int) string {
	return "x" + strings.Repeat("é", (n-1)/2) + strings.Repeat("y", (n-1)%2)
}

// archive is a real go-sdk server over loopback HTTP whose read tool
// returns text of the size it is asked for, counting its runs.
func archive(t *testing.T, runs *atomic.Int32) *mcpconfig.Server {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "archive", Version: "test"}, nil)
	s.AddTool(&mcp.Tool{Name: "read", Description: "Read a file.", InputSchema: json.RawMessage(pagedSchema)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			runs.Add(1)
			var in struct{ Path string }
			json.Unmarshal(req.Params.Arguments, &in)
			n, err := strconv.Atoi(in.Path)
			if err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: bigText(n)}}}, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(ts.Close)
	return &mcpconfig.Server{Name: "archive", Type: "http", URL: ts.URL}
}

// commas writes n as the notes do: 1,048,576.
func commas(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// toolContents returns the tool messages' contents of a request body, by
// tool_call_id.
func toolContents(t *testing.T, body string) map[string]string {
	t.Helper()
	var req openai.ChatCompletionRequest
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatalf("request body: %v", err)
	}
	out := map[string]string{}
	for _, m := range req.Messages {
		if m.Role == openai.ChatMessageRoleTool {
			out[m.ToolCallID] = m.Content
		}
	}
	return out
}

// TestToolResultCapped: a real MCP tool returns 1 MB and 10 MB through the
// pool; the model's next request holds 64 KiB of it, cut inside no rune,
// with a note of what was left out and how to page, and the request is
// bounded whatever the result's size. With the caps raised the same
// result makes a request past 1 MB, which is what the cap prevents.
func TestToolResultCapped(t *testing.T) {
	for _, tc := range []struct {
		name   string
		size   int
		opts   runtime.Options
		capped bool
	}{
		{"1MB", 1 << 20, runtime.Options{}, true},
		{"10MB", 10 << 20, runtime.Options{}, true},
		{"1MB uncapped", 1 << 20, runtime.Options{MaxToolResultBytes: 16 << 20, MaxToolResultsBytes: 64 << 20}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var runs atomic.Int32
			srv := archive(t, &runs)
			e := newEndpoint(t,
				reply(openai.ChatCompletionMessage{ToolCalls: []openai.ToolCall{toolCall("c1", "archive__read", fmt.Sprintf(`{"path":"%d"}`, tc.size))}}),
				answer("It is a long file."),
			)
			a := newAgent(t, oracle(e.URL, srv), &tc.opts)
			res, err := a.Run(t.Context(), "read it", chain)
			if err != nil {
				t.Fatal(err)
			}
			bodies := e.Bodies()
			if len(bodies) != 2 || runs.Load() != 1 {
				t.Fatalf("%d model requests, the tool ran %d times; want 2 and 1", len(bodies), runs.Load())
			}
			got := toolContents(t, bodies[1])["c1"]
			full := bigText(tc.size)
			t.Logf("tool result %s bytes: model request %s bytes (StepUsage %d), tool message %s bytes",
				commas(tc.size), commas(len(bodies[1])), res.StepUsage[1].RequestBytes, commas(len(got)))
			if res.StepUsage[1].RequestBytes != len(bodies[1]) {
				t.Errorf("StepUsage says %d request bytes, the endpoint read %d", res.StepUsage[1].RequestBytes, len(bodies[1]))
			}
			if len(res.Delegations) != 1 || res.Delegations[0].Outcome != delegation.OutcomeOK || res.Status != runtime.StatusAnswered {
				t.Errorf("delegations %+v, status %s", res.Delegations, res.Status)
			}
			// The cut is reported on the step that made the call, for the
			// studio's run page and ask --json.
			wantCut := []runtime.Truncated{{CallID: "c1", Tool: "archive__read", Sent: runtime.DefaultMaxToolResultBytes - 1, Original: len(full)}}
			if !tc.capped {
				wantCut = nil
			}
			if g := res.StepUsage[0].Truncated; !reflect.DeepEqual(g, wantCut) || len(res.StepUsage[1].Truncated) != 0 {
				t.Errorf("step 1 truncated %+v, step 2 %+v; want %+v on step 1 only", g, res.StepUsage[1].Truncated, wantCut)
			}
			if !tc.capped {
				if got != full || len(bodies[1]) < 1<<20 {
					t.Errorf("uncapped: tool message of %d bytes, request of %d; want the whole result", len(got), len(bodies[1]))
				}
				return
			}
			const kept = runtime.DefaultMaxToolResultBytes - 1 // byte 65,536 is inside an é
			note := fmt.Sprintf("\n\n[switchboard: %s of %s bytes of this result were left out to fit the model's context]"+
				` The tool takes "offset" and "limit": call it again with them to read the rest.`, commas(len(full)-kept), commas(len(full)))
			if !strings.HasPrefix(got, full[:kept]) || got[kept:] != note || !utf8.ValidString(got) {
				t.Errorf("tool message: %d bytes, valid UTF-8 %v, ends %q; want the first %d bytes and %q", len(got), utf8.ValidString(got), got[max(0, len(got)-300):], kept, note)
			}
			if len(bodies[1]) > runtime.DefaultMaxToolResultBytes+8<<10 {
				t.Errorf("the model request is %d bytes: not bounded by the tool result cap", len(bodies[1]))
			}
		})
	}
}

// TestToolResultsShareTheRequest: the results of one step share the bound
// on a request's tool text (a small one whole, the large ones evenly), and
// a later step's results push the oldest ones out, each replaced by a note
// of its size.
func TestToolResultsShareTheRequest(t *testing.T) {
	var runs atomic.Int32
	srv := archive(t, &runs)
	const total = 96 << 10
	e := newEndpoint(t,
		reply(openai.ChatCompletionMessage{ToolCalls: []openai.ToolCall{
			toolCall("a", "archive__read", `{"path":"100000"}`),
			toolCall("b", "archive__read", `{"path":"11"}`),
			toolCall("c", "archive__read", `{"path":"100000"}`),
		}}),
		reply(openai.ChatCompletionMessage{ToolCalls: []openai.ToolCall{toolCall("d", "archive__read", `{"path":"30001"}`)}}),
		answer("done"),
	)
	a := newAgent(t, oracle(e.URL, srv), &runtime.Options{MaxToolResultsBytes: total})
	res, err := a.Run(t.Context(), "read them", chain)
	if err != nil {
		t.Fatal(err)
	}
	bodies := e.Bodies()
	if len(bodies) != 3 {
		t.Fatalf("%d model requests, want 3", len(bodies))
	}
	textOf := func(s string) int { // bytes of the result's own text, without the note
		if i := strings.Index(s, "\n\n[switchboard:"); i >= 0 {
			return i
		}
		return len(s)
	}
	step2 := toolContents(t, bodies[1])
	a1, c1 := textOf(step2["a"]), textOf(step2["c"])
	// Each large one gets half of what the small one left, less the byte
	// a cut inside an é backs up.
	if half := (total - 11) / 2; step2["b"] != bigText(11) || a1 < half-1 || a1 > half+1 || c1 < half-1 || c1 > half+1 || a1+c1+11 > total {
		t.Errorf("step 2: a %d, b %q, c %d bytes; want about %d, the whole small one, about %d", a1, step2["b"], c1, half, half)
	}
	// The two large results were cut to their share, the small one not:
	// step 1 says so, with what was sent of each.
	if cuts := res.StepUsage[0].Truncated; len(cuts) != 2 || cuts[0].CallID != "a" || cuts[0].Sent != a1 || cuts[0].Original != 100000 ||
		cuts[1].CallID != "c" || cuts[1].Sent != c1 || cuts[1].Original != 100000 || len(res.StepUsage[1].Truncated) != 0 {
		t.Errorf("truncated: step 1 %+v, step 2 %+v; want a (%d of 100000) and c (%d of 100000) on step 1", cuts, res.StepUsage[1].Truncated, a1, c1)
	}
	step3 := toolContents(t, bodies[2])
	leftOut := "[switchboard: this result (100,000 bytes) was left out here to fit the model's context; call the tool again if you need it]"
	if step3["a"] != leftOut || step3["c"] != step2["c"] || step3["b"] != step2["b"] || step3["d"] != bigText(30001) {
		t.Errorf("step 3: a %q, c %d bytes, d %d bytes; want a left out, c as before, d whole", step3["a"][:min(200, len(step3["a"]))], len(step3["c"]), len(step3["d"]))
	}
	sum := 0
	for _, c := range step3 {
		sum += textOf(c)
	}
	if sum > total+len(leftOut) {
		t.Errorf("step 3's tool text is %d bytes, past the bound of %d", sum, total)
	}
}

// Context-length answers as providers send them.
const (
	azureContext    = `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 131201 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`
	groqContext     = `{"error":{"message":"Please reduce the length of the messages or completion.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`
	vllmNewContext  = `{"error":{"message":"This model's maximum context length is 4096 tokens. However, your request has 5210 input tokens. Please reduce the length of the input messages.","type":"BadRequestError","param":null,"code":400}}`
	llamaCppContext = `{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":5210,"n_ctx":4096}}`
	deepSeekContext = `{"error":{"message":"This model's maximum context length is 65536 tokens. However, you requested 70210 tokens (70210 in the messages, 0 in the completion). Please reduce the length of the messages or completion.","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}`
	openRouterCtx   = `{"error":{"message":"This endpoint's maximum context length is 131072 tokens. However, you requested about 180312 tokens (180312 of text input). Please reduce the length of either one, or use the \"middle-out\" transform to compress your prompt automatically.","code":400,"metadata":{"provider_name":null}}}`
)

// TestContextLengthExceeded: a step refused as longer than the model's
// context, in each provider's words, is asked again once with the oldest
// tool results left out (StepUsage.Trimmed); refused again, the turn fails
// with ErrContextLength and ErrModel, naming the step, the sizes and what
// to set. A 400 about something else leaves nothing out.
func TestContextLengthExceeded(t *testing.T) {
	for _, tc := range []struct{ name, body string }{
		{"OpenAI", openAIContext},
		{"Azure OpenAI", azureContext},
		{"Groq", groqContext},
		{"vLLM", vllmBadRequest},
		{"vLLM error object", vllmNewContext},
		{"llama.cpp", llamaCppContext},
		{"DeepSeek", deepSeekContext},
		{"OpenRouter", openRouterCtx},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var runs atomic.Int32
			srv := archive(t, &runs)
			first := reply(openai.ChatCompletionMessage{ToolCalls: []openai.ToolCall{toolCall("c1", "archive__read", `{"path":"20000"}`)}})
			e := newEndpoint(t, first, fail(400, tc.body), answer("done without it"))
			a := newAgent(t, oracle(e.URL, srv), nil)
			noWait(a)
			res, err := a.Run(t.Context(), "read it", chain)
			if err != nil {
				t.Fatal(err)
			}
			bodies := e.Bodies()
			if len(bodies) != 3 {
				t.Fatalf("%d model requests, want 3", len(bodies))
			}
			want := "[switchboard: this result (20,000 bytes) was left out here to fit the model's context; call the tool again if you need it]"
			if got := toolContents(t, bodies[2])["c1"]; got != want {
				t.Errorf("asked again with tool message %q, want %q", got[:min(len(got), 200)], want)
			}
			if toolContents(t, bodies[1])["c1"] != bigText(20000) {
				t.Error("the first request of step 2 did not carry the whole result")
			}
			su := res.StepUsage[1]
			if su.Trimmed != 1 || su.Attempts != 2 || res.Answer != "done without it" || runs.Load() != 1 {
				t.Errorf("step 2 %+v, answer %q, the tool ran %d times; want 1 trimmed, 2 attempts, done without it, 1 run", su, res.Answer, runs.Load())
			}
		})
	}

	t.Run("refused twice", func(t *testing.T) {
		var runs atomic.Int32
		srv := archive(t, &runs)
		first := reply(openai.ChatCompletionMessage{ToolCalls: []openai.ToolCall{toolCall("c1", "archive__read", `{"path":"20000"}`)}})
		e := newEndpoint(t, first, fail(400, openAIContext), fail(400, openAIContext))
		a := newAgent(t, oracle(e.URL, srv), nil)
		noWait(a)
		res, err := a.Run(t.Context(), "read it", chain)
		if !errors.Is(err, runtime.ErrModel) || !errors.Is(err, runtime.ErrContextLength) {
			t.Fatalf("err = %v, want ErrModel and ErrContextLength", err)
		}
		bodies := e.Bodies()
		if len(bodies) != 3 {
			t.Fatalf("%d model requests, want 3", len(bodies))
		}
		for _, want := range []string{`agent "oracle", step 2`, commas(len(bodies[2])) + " bytes", commas(len(bodies[1])) + " bytes",
			"1 tool result (20,000 bytes) was left out", "context.max_tool_results_bytes (now 196,608)", "context.max_tool_result_bytes (now 65,536)",
			"maximum context length is 128000 tokens"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
		if su := res.StepUsage[1]; su.Trimmed != 1 || su.Attempts != 2 || su.RequestBytes != len(bodies[2]) {
			t.Errorf("step 2 %+v", su)
		}
	})

	t.Run("another 400", func(t *testing.T) {
		var runs atomic.Int32
		srv := archive(t, &runs)
		first := reply(openai.ChatCompletionMessage{ToolCalls: []openai.ToolCall{toolCall("c1", "archive__read", `{"path":"20000"}`)}})
		e := newEndpoint(t, first, fail(400, vllmBadValue))
		a := newAgent(t, oracle(e.URL, srv), nil)
		noWait(a)
		res, err := a.Run(t.Context(), "read it", chain)
		if !errors.Is(err, runtime.ErrModel) || errors.Is(err, runtime.ErrContextLength) {
			t.Fatalf("err = %v, want ErrModel and not ErrContextLength", err)
		}
		if len(e.Bodies()) != 2 || res.StepUsage[1].Trimmed != 0 {
			t.Errorf("%d requests, step 2 %+v; want 2 and nothing trimmed", len(e.Bodies()), res.StepUsage[1])
		}
	})
}

// wideServer is a real go-sdk server over loopback HTTP offering n tools
// named prefix0000 and on.
func wideServer(t *testing.T, name string, n int) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: name, Version: "test"}, nil)
	for i := range n {
		s.AddTool(&mcp.Tool{Name: fmt.Sprintf("t%05d", i), Description: "A tool.", InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
			})
	}
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(ts.Close)
	return ts.URL
}

// TestToolsBounded: a server of 20,000 tools is past what the pool lists
// of one server (2,000): it is unavailable, with the pool's reason, rather
// than offered in part without a word. Of the rest, the model is offered
// 128 tools, the agent's own first, then mcp.json's in order, is told in
// the system prompt how many of which server's were left out, and so is
// the Result. A tool left out is not run if the model names it anyway.
func TestToolsBounded(t *testing.T) {
	self := &pool.Server{Name: "self", URL: wideServer(t, "self", 3)}
	sprawl := &mcpconfig.Server{Name: "sprawl", Type: "http", URL: wideServer(t, "sprawl", 20000)}
	wide := &mcpconfig.Server{Name: "wide", Type: "http", URL: wideServer(t, "wide", 1500)}
	e := newEndpoint(t,
		reply(openai.ChatCompletionMessage{ToolCalls: []openai.ToolCall{toolCall("c1", "wide__t01499", `{}`)}}),
		answer("done"),
	)
	a := newAgent(t, oracle(e.URL, sprawl, wide), &runtime.Options{Servers: []*pool.Server{self}})
	res, err := a.Run(t.Context(), "do it", chain)
	if err != nil {
		t.Fatal(err)
	}
	offered, system := offeredIn(t, e.Bodies()[0])
	if len(offered) != runtime.DefaultMaxTools || offered[0] != "self__t00000" || offered[2] != "self__t00002" || offered[3] != "wide__t00000" || offered[127] != "wide__t00124" {
		t.Errorf("offered %d tools: %q … %q", len(offered), offered[:min(5, len(offered))], offered[max(0, len(offered)-2):])
	}
	want := []runtime.ToolsLeftOut{{Server: "wide", Offered: 125, LeftOut: 1375}}
	if fmt.Sprint(res.ToolsLeftOut) != fmt.Sprint(want) {
		t.Errorf("ToolsLeftOut %+v, want %+v", res.ToolsLeftOut, want)
	}
	for _, s := range []string{`agent "wide": 1,375 of its 1,500 tools are not offered (an agent offers the model at most 128 tools; context.max_tools in agent.json)`, `agent "sprawl"`, "tools/list stopped"} {
		if !strings.Contains(system, s) {
			t.Errorf("system prompt does not say %q:\n%s", s, system)
		}
	}
	if len(res.Unavailable) != 1 || !strings.Contains(res.Unavailable[0], `server "sprawl": tools/list stopped`) {
		t.Errorf("unavailable %q, want sprawl's list error", res.Unavailable)
	}
	if len(res.Delegations) != 0 || res.Status != runtime.StatusDelegationFailed {
		t.Errorf("a tool not offered was called: delegations %+v, status %s", res.Delegations, res.Status)
	}

	t.Run("agent.json max_tools", func(t *testing.T) {
		e := newEndpoint(t, answer("done"))
		def := oracle(e.URL, wide)
		def.Context.MaxTools = 10
		res, err := newAgent(t, def, nil).Run(t.Context(), "do it", chain)
		if err != nil {
			t.Fatal(err)
		}
		tools, _ := offeredIn(t, e.Bodies()[0])
		n := len(tools)
		if n != 10 || len(res.ToolsLeftOut) != 1 || res.ToolsLeftOut[0].LeftOut != 1490 {
			t.Errorf("offered %d tools, left out %+v; want 10, 1,490 of wide's", n, res.ToolsLeftOut)
		}
	})
}

// offeredIn returns the tool names a request offered and its system
// prompt.
func offeredIn(t *testing.T, body string) (names []string, system string) {
	t.Helper()
	var req openai.ChatCompletionRequest
	if err := json.Unmarshal([]byte(body), &req); err != nil || len(req.Messages) == 0 {
		t.Fatalf("request body: %v", err)
	}
	for _, tool := range req.Tools {
		names = append(names, tool.Function.Name)
	}
	return names, req.Messages[0].Content
}
