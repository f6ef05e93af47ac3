package runtime_test

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sashabaranov/go-openai"
	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/runtime"
)

// completion is a chat completion body with one choice whose message is
// msg (JSON) and whose finish_reason is finish.
func completion(msg, finish string) string {
	return `{"id":"chatcmpl-9","object":"chat.completion","created":1733000000,"model":"scripted",
		"choices":[{"index":0,"message":` + msg + `,"logprobs":null,"finish_reason":"` + finish + `"}],
		"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`
}

// TestAnswersThatAreNotAnswers: an empty answer (null, "", blanks, only
// reasoning, an empty tool_calls list), one cut at the output limit, a
// refusal and a content filter's stop are StatusNotAnswered, with a
// reason saying which; none is an error of the turn.
func TestAnswersThatAreNotAnswers(t *testing.T) {
	srv := scriptedPackrat(t, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "stored"}}}, nil
	})
	for _, tc := range []struct{ name, body, reason string }{
		{"content null", completion(`{"role":"assistant","content":null}`, "stop"), "not answered: the model's answer was empty"},
		{"content empty", completion(`{"role":"assistant","content":""}`, "stop"), "not answered: the model's answer was empty"},
		{"content blank", completion(`{"role":"assistant","content":"  \n\t"}`, "stop"), "not answered: the model's answer was empty"},
		{"only reasoning_content (DeepSeek)", completion(`{"role":"assistant","content":"","reasoning_content":"Let me think about 6 times 7."}`, "stop"),
			"not answered: the model's answer was empty (it gave only its reasoning)"},
		{"only a think block (Ollama)", completion(`{"role":"assistant","content":"<think>\n6 times 7...\n</think>\n\n"}`, "stop"), "not answered: the model's answer was empty"},
		{"tool_calls empty", completion(`{"role":"assistant","content":null,"tool_calls":[]}`, "tool_calls"), "not answered: the model's answer was empty"},
		{"cut at the output limit", completion(`{"role":"assistant","content":"The answer is"}`, "length"), `not answered: the answer was cut off at the model's output limit (finish_reason "length")`},
		{"a refusal (OpenAI)", completion(`{"role":"assistant","content":null,"refusal":"I'm sorry, I can't help with that."}`, "stop"), "not answered: the model refused: I'm sorry, I can't help with that."},
		{"a content filter (Azure)", completion(`{"role":"assistant","content":null}`, "content_filter"), `not answered: the provider's content filter stopped the answer`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEndpoint(t, raw(tc.body))
			a := newAgent(t, oracle(e.URL, srv), nil)
			res, err := a.Run(t.Context(), "what is 6 times 7?", chain)
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != runtime.StatusNotAnswered || !strings.HasPrefix(res.Reason, tc.reason) {
				t.Errorf("status %q reason %q, want not_answered: %q", res.Status, res.Reason, tc.reason)
			}
		})
	}
}

// TestEveryCallFailed: a model whose every tool call failed (a name that
// is no tool, arguments that are no object) and which then answers anyway
// has not done the task; the reason names each call. A model that found
// the right tool after a wrong name has.
func TestEveryCallFailed(t *testing.T) {
	srv := scriptedPackrat(t, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "stored"}}}, nil
	})
	e := newEndpoint(t,
		reply(openai.ChatCompletionMessage{ToolCalls: []openai.ToolCall{toolCall("c1", "notes_v2", `{"text":"x"}`)}}),
		reply(openai.ChatCompletionMessage{ToolCalls: []openai.ToolCall{toolCall("c2", "packrat__store_note", `["x"]`)}}),
		answer("Your note is stored."),
	)
	a := newAgent(t, oracle(e.URL, srv), nil)
	res, err := a.Run(t.Context(), "remember x", chain)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != runtime.StatusDelegationFailed || !strings.Contains(res.Reason, `"notes_v2": unknown_tool`) || !strings.Contains(res.Reason, "packrat.store_note: bad_arguments") {
		t.Errorf("status %q reason %q, want delegation_failed naming both calls", res.Status, res.Reason)
	}

	e = newEndpoint(t,
		reply(openai.ChatCompletionMessage{ToolCalls: []openai.ToolCall{toolCall("c1", "notes_v2", `{"text":"x"}`)}}),
		reply(openai.ChatCompletionMessage{ToolCalls: []openai.ToolCall{toolCall("c2", "packrat__store_note", `{"text":"x"}`)}}),
		answer("Your note is stored."),
	)
	a = newAgent(t, oracle(e.URL, srv), nil)
	res, err = a.Run(t.Context(), "remember x", chain)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != runtime.StatusAnswered || len(res.Delegations) != 1 || res.Delegations[0].Outcome != delegation.OutcomeOK {
		t.Errorf("status %q reason %q delegations %+v, want answered after the right tool", res.Status, res.Reason, res.Delegations)
	}
}

// TestFailedCallAndEmptyAnswer: both are said, the severest first.
func TestFailedCallAndEmptyAnswer(t *testing.T) {
	e := newEndpoint(t,
		reply(openai.ChatCompletionMessage{ToolCalls: []openai.ToolCall{toolCall("c1", "notes_v2", `{}`)}}),
		raw(completion(`{"role":"assistant","content":""}`, "stop")),
	)
	a := newAgent(t, oracle(e.URL, scriptedPackrat(t, nil)), nil)
	res, err := a.Run(t.Context(), "remember x", chain)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != runtime.StatusDelegationFailed || !strings.HasSuffix(res.Reason, "; and the model's answer was empty") {
		t.Errorf("status %q reason %q", res.Status, res.Reason)
	}
}
