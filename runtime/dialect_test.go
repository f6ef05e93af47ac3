package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sashabaranov/go-openai"
	"github.com/switchboard-run/switchboard/runtime"
)

// raw answers 200 with body, written by hand in a provider's shape.
func raw(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, body)
	}
}

// TestArgumentsAsObject: Ollama and some vLLM builds send a tool call's
// arguments as a JSON object (vLLM's also without id and type); the call
// runs with those arguments, and the history sent back has them as the
// string OpenAI's API expects.
func TestArgumentsAsObject(t *testing.T) {
	for _, tc := range []struct{ name, body string }{
		{"Ollama", `{"id":"chatcmpl-417","object":"chat.completion","created":1733000000,"model":"llama3.1","system_fingerprint":"fp_ollama",
			"choices":[{"index":0,"message":{"role":"assistant","content":"","tool_calls":[{"id":"call_x1","index":0,"type":"function",
			"function":{"name":"packrat__store_note","arguments":{"text":"launch moved to Friday"}}}]},"finish_reason":"tool_calls"}],
			"usage":{"prompt_tokens":120,"completion_tokens":20,"total_tokens":140}}`},
		{"vLLM without id and type", `{"id":"cmpl-9","object":"chat.completion","created":1733000000,"model":"qwen2.5",
			"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"function":{"name":"packrat__store_note","arguments":{ "text" : "launch moved to Friday" }}}]},"logprobs":null,"finish_reason":"tool_calls","stop_reason":null}],
			"usage":{"prompt_tokens":120,"total_tokens":140,"completion_tokens":20}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var got []string
			srv := scriptedPackrat(t, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				mu.Lock()
				defer mu.Unlock()
				got = append(got, string(req.Params.Arguments))
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "stored"}}}, nil
			})
			e := newEndpoint(t, raw(tc.body), answer("Noted."))
			a := newAgent(t, oracle(e.URL, srv), nil)
			res, err := a.Run(t.Context(), "remember the launch", chain)
			if err != nil {
				t.Fatal(err)
			}
			if res.Answer != "Noted." || res.Status != runtime.StatusAnswered || len(got) != 1 || got[0] != `{"text":"launch moved to Friday"}` {
				t.Fatalf("answer %q status %q, tool got %q", res.Answer, res.Status, got)
			}
			var req openai.ChatCompletionRequest
			if err := json.Unmarshal([]byte(e.Bodies()[1]), &req); err != nil {
				t.Fatal(err)
			}
			if tcs := req.Messages[2].ToolCalls; len(tcs) != 1 || tcs[0].Function.Arguments != `{"text":"launch moved to Friday"}` || tcs[0].ID == "" || tcs[0].Type != "function" {
				t.Errorf("history's tool call %+v, want the arguments as a string, with an id and a type", tcs)
			}
		})
	}
}

// TestErrorIn200: OpenRouter answers 200 with an error object when the
// upstream provider failed; a 502 or 429 there is retried like the status
// it names, a 400 fails at once with the provider's message.
func TestErrorIn200(t *testing.T) {
	const upstream502 = `{"error":{"code":502,"message":"Provider returned error","metadata":{"provider_name":"Fireworks","raw":"upstream connect error"}},"user_id":"user_2x"}`
	const upstream400 = `{"error":{"code":400,"message":"Provider returned error: tools are not supported by this model","metadata":{"provider_name":"Mistral"}}}`
	e := newEndpoint(t, raw(upstream502), answer("42"))
	a := newAgent(t, oracle(e.URL), nil)
	noWait(a)
	var n notes
	res, err := a.Run(n.ctx(t.Context()), "what is 6 times 7?", chain)
	if err != nil || res.Answer != "42" {
		t.Fatalf("answer %q, err %v; want 42", res.Answer, err)
	}
	if ns := n.get(); len(ns) != 1 || !strings.Contains(ns[0], "answered 200 with an error in the body (code 502)") {
		t.Errorf("notes %q, want one saying 200 with an error (code 502)", ns)
	}

	e = newEndpoint(t, raw(upstream400))
	a = newAgent(t, oracle(e.URL), nil)
	noWait(a)
	_, err = a.Run(t.Context(), "what is 6 times 7?", chain)
	var apiErr *openai.APIError
	if !errors.Is(err, runtime.ErrModel) || !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 400 ||
		!strings.Contains(err.Error(), "tools are not supported by this model") || len(e.Bodies()) != 1 {
		t.Errorf("err = %v after %d requests, want ErrModel with the provider's 400 message, at once", err, len(e.Bodies()))
	}
}

// TestEmptyChoices: a 200 with "choices": [] is asked again; if it stays
// empty the error says so.
func TestEmptyChoices(t *testing.T) {
	const empty = `{"id":"gen-1","object":"chat.completion","created":1733000000,"model":"openai/gpt-4o-mini","choices":[],"usage":{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0}}`
	e := newEndpoint(t, raw(empty), answer("42"))
	a := newAgent(t, oracle(e.URL), nil)
	noWait(a)
	if res, err := a.Run(t.Context(), "q", chain); err != nil || res.Answer != "42" {
		t.Fatalf("answer %v, err %v; want 42", res, err)
	}

	e = newEndpoint(t, raw(empty), raw(empty), raw(empty))
	a = newAgent(t, oracle(e.URL), nil)
	noWait(a)
	_, err := a.Run(t.Context(), "q", chain)
	if !errors.Is(err, runtime.ErrModel) || !strings.Contains(err.Error(), "3 attempts, the endpoint answered with no choices") {
		t.Errorf("err = %v, want ErrModel saying 3 attempts got no choices", err)
	}
}

// TestReasoningContentKept: DeepSeek's thinking mode with tools wants the
// assistant message's reasoning_content back in the same turn; the run
// records every step's reasoning, the answer shows none.
func TestReasoningContentKept(t *testing.T) {
	srv := scriptedPackrat(t, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "stored"}}}, nil
	})
	step1 := `{"id":"a1b2","object":"chat.completion","created":1733000000,"model":"deepseek-reasoner",
		"choices":[{"index":0,"message":{"role":"assistant","content":"","reasoning_content":"The user wants the launch date kept; store it.",
		"tool_calls":[{"index":0,"id":"call_00_x","type":"function","function":{"name":"packrat__store_note","arguments":"{\"text\":\"launch Friday\"}"}}]},
		"logprobs":null,"finish_reason":"tool_calls"}],
		"usage":{"prompt_tokens":200,"completion_tokens":40,"total_tokens":240,"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":200,"completion_tokens_details":{"reasoning_tokens":25}}}`
	step2 := `{"id":"a1b3","object":"chat.completion","created":1733000001,"model":"deepseek-reasoner",
		"choices":[{"index":0,"message":{"role":"assistant","content":"Stored: launch Friday.","reasoning_content":"It is stored; say so."},"logprobs":null,"finish_reason":"stop"}]}`
	e := newEndpoint(t, raw(step1), raw(step2))
	a := newAgent(t, oracle(e.URL, srv), nil)
	res, err := a.Run(t.Context(), "remember the launch", chain)
	if err != nil {
		t.Fatal(err)
	}
	var req openai.ChatCompletionRequest
	if err := json.Unmarshal([]byte(e.Bodies()[1]), &req); err != nil {
		t.Fatal(err)
	}
	if got := req.Messages[2].ReasoningContent; got != "The user wants the launch date kept; store it." {
		t.Errorf("step 2's history has reasoning_content %q, want step 1's", got)
	}
	if res.Answer != "Stored: launch Friday." || res.Reasoning != "The user wants the launch date kept; store it.\n\nIt is stored; say so." {
		t.Errorf("answer %q reasoning %q", res.Answer, res.Reasoning)
	}
}

// TestThinkBlocks: <think> in the content (DeepSeek-R1 distills on Ollama,
// Qwen3 on llama.cpp) is kept in the run's record and out of the answer,
// also when the template opened the block and the content only closes it.
func TestThinkBlocks(t *testing.T) {
	for _, tc := range []struct{ name, content, answer, reasoning string }{
		{"a whole block", "<think>\nSix sevens are 42.\n</think>\n\nThe answer is 42.", "The answer is 42.", "Six sevens are 42."},
		{"only the closing tag", "Six sevens are 42.\n</think>\n\nThe answer is 42.", "The answer is 42.", "Six sevens are 42."},
		{"no block", "The answer is 42.", "The answer is 42.", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEndpoint(t, answer(tc.content))
			a := newAgent(t, oracle(e.URL), nil)
			res, err := a.Run(t.Context(), "what is 6 times 7?", chain)
			if err != nil {
				t.Fatal(err)
			}
			if res.Answer != tc.answer || res.Reasoning != tc.reasoning {
				t.Errorf("answer %q reasoning %q; want %q, %q", res.Answer, res.Reasoning, tc.answer, tc.reasoning)
			}
		})
	}
}
