package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sashabaranov/go-openai"
	"github.com/switchboard-run/switchboard/agents/abacus"
	"github.com/switchboard-run/switchboard/agents/packrat"
	"github.com/switchboard-run/switchboard/pool/mcpconfig"
	"github.com/switchboard-run/switchboard/runtime"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// sse answers 200 with an event stream of chunks, each flushed as it is
// written, ended by data: [DONE] as OpenAI ends its streams.
func sse(chunks ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		for _, c := range chunks {
			fmt.Fprintf(w, "data: %s\n\n", c)
			w.(http.Flusher).Flush()
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}
}

// whole answers 200 with one JSON completion, as a provider answers a
// request with stream: false.
func whole(msg openai.ChatCompletionMessage, finish openai.FinishReason, usage openai.Usage) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		msg.Role = openai.ChatMessageRoleAssistant
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(openai.ChatCompletionResponse{
			ID: "chatcmpl-1", Object: "chat.completion", Model: "scripted", Usage: usage,
			Choices: []openai.ChatCompletionChoice{{Message: msg, FinishReason: finish}},
		})
	}
}

// deltas collects a turn's answer deltas.
type deltas struct {
	mu  sync.Mutex
	all []runtime.AnswerDelta
}

func (d *deltas) ctx(ctx context.Context) context.Context {
	return runtime.WithAnswerHandler(ctx, func(a runtime.AnswerDelta) {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.all = append(d.all, a)
	})
}

// shown is what a reader of the deltas holds at the end: the text sent
// after the last discard.
func (d *deltas) shown() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var b strings.Builder
	for _, a := range d.all {
		if a.Discard {
			b.Reset()
			continue
		}
		b.WriteString(a.Text)
	}
	return b.String()
}

func (d *deltas) discards() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, a := range d.all {
		if a.Discard {
			n++
		}
	}
	return n
}

// storeOK is a packrat store_note that stores.
func storeOK(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct{ Text string }
	json.Unmarshal(req.Params.Arguments, &in)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "stored: " + in.Text}}}, nil
}

// A provider's way of streaming the two steps of one turn (a tool call,
// then the answer), and the same two answers as it sends them whole.
type streamFlavor struct {
	name    string
	streams [2][]string
	msgs    [2]openai.ChatCompletionMessage
	finish  [2]openai.FinishReason
	usage   [2]openai.Usage
}

var flavors = []streamFlavor{
	{
		// OpenAI's documented stream: the role first, the tool call's id
		// and name in its first piece, the arguments in pieces, the finish
		// reason in a chunk of its own, the usage in a last chunk with no
		// choices (stream_options.include_usage).
		name: "OpenAI",
		streams: [2][]string{{
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","system_fingerprint":"fp_44709d6fcb","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"packrat__store_note","arguments":""}}]},"logprobs":null,"finish_reason":null}],"usage":null}`,
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"te"}}]},"logprobs":null,"finish_reason":null}],"usage":null}`,
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"xt\":\"bring"}}]},"logprobs":null,"finish_reason":null}],"usage":null}`,
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":" cake\"}"}}]},"logprobs":null,"finish_reason":null}],"usage":null}`,
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}],"usage":null}`,
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":82,"completion_tokens":17,"total_tokens":99,"prompt_tokens_details":{"cached_tokens":64},"completion_tokens_details":{"reasoning_tokens":0}}}`,
		}, {
			`{"id":"chatcmpl-2","object":"chat.completion.chunk","created":1694268191,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}`,
			`{"id":"chatcmpl-2","object":"chat.completion.chunk","created":1694268191,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"Noted"},"logprobs":null,"finish_reason":null}],"usage":null}`,
			`{"id":"chatcmpl-2","object":"chat.completion.chunk","created":1694268191,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":": bring"},"logprobs":null,"finish_reason":null}],"usage":null}`,
			`{"id":"chatcmpl-2","object":"chat.completion.chunk","created":1694268191,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":" cake."},"logprobs":null,"finish_reason":null}],"usage":null}`,
			`{"id":"chatcmpl-2","object":"chat.completion.chunk","created":1694268191,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}`,
			`{"id":"chatcmpl-2","object":"chat.completion.chunk","created":1694268191,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":120,"completion_tokens":6,"total_tokens":126,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}`,
		}},
		msgs: [2]openai.ChatCompletionMessage{
			{ToolCalls: []openai.ToolCall{toolCall("call_a", "packrat__store_note", `{"text":"bring cake"}`)}},
			{Content: "Noted: bring cake."},
		},
		finish: [2]openai.FinishReason{openai.FinishReasonToolCalls, openai.FinishReasonStop},
		usage: [2]openai.Usage{
			{PromptTokens: 82, CompletionTokens: 17, TotalTokens: 99, PromptTokensDetails: &openai.PromptTokensDetails{CachedTokens: 64}, CompletionTokensDetails: &openai.CompletionTokensDetails{}},
			{PromptTokens: 120, CompletionTokens: 6, TotalTokens: 126, PromptTokensDetails: &openai.PromptTokensDetails{}, CompletionTokensDetails: &openai.CompletionTokensDetails{}},
		},
	},
	{
		// Ollama's OpenAI-compatible API: a tool call whole in one chunk,
		// a Qwen3-style <think> block in the content, its tags cut across
		// chunks, and the usage in a last chunk with no choices.
		name: "Ollama",
		streams: [2][]string{{
			`{"id":"chatcmpl-414","object":"chat.completion.chunk","created":1731000000,"model":"qwen3:8b","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"id":"call_q1","index":0,"type":"function","function":{"name":"packrat__store_note","arguments":"{\"text\":\"bring cake\"}"}}]},"finish_reason":null}]}`,
			`{"id":"chatcmpl-414","object":"chat.completion.chunk","created":1731000000,"model":"qwen3:8b","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"tool_calls"}]}`,
			`{"id":"chatcmpl-414","object":"chat.completion.chunk","created":1731000000,"model":"qwen3:8b","system_fingerprint":"fp_ollama","choices":[],"usage":{"prompt_tokens":90,"completion_tokens":20,"total_tokens":110}}`,
		}, {
			`{"id":"chatcmpl-415","object":"chat.completion.chunk","created":1731000001,"model":"qwen3:8b","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"<thi"},"finish_reason":null}]}`,
			`{"id":"chatcmpl-415","object":"chat.completion.chunk","created":1731000001,"model":"qwen3:8b","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"nk>\nThe note is stored; confirm it.\n</th"},"finish_reason":null}]}`,
			`{"id":"chatcmpl-415","object":"chat.completion.chunk","created":1731000001,"model":"qwen3:8b","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"ink>\n\nNoted"},"finish_reason":null}]}`,
			`{"id":"chatcmpl-415","object":"chat.completion.chunk","created":1731000001,"model":"qwen3:8b","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":": bring cake."},"finish_reason":null}]}`,
			`{"id":"chatcmpl-415","object":"chat.completion.chunk","created":1731000001,"model":"qwen3:8b","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"stop"}]}`,
			`{"id":"chatcmpl-415","object":"chat.completion.chunk","created":1731000001,"model":"qwen3:8b","system_fingerprint":"fp_ollama","choices":[],"usage":{"prompt_tokens":130,"completion_tokens":25,"total_tokens":155}}`,
		}},
		msgs: [2]openai.ChatCompletionMessage{
			{ToolCalls: []openai.ToolCall{toolCall("call_q1", "packrat__store_note", `{"text":"bring cake"}`)}},
			{Content: "<think>\nThe note is stored; confirm it.\n</think>\n\nNoted: bring cake."},
		},
		finish: [2]openai.FinishReason{openai.FinishReasonToolCalls, openai.FinishReasonStop},
		usage:  [2]openai.Usage{{PromptTokens: 90, CompletionTokens: 20, TotalTokens: 110}, {PromptTokens: 130, CompletionTokens: 25, TotalTokens: 155}},
	},
	{
		// llama.cpp's server: arguments in pieces, the usage (and its
		// timings) in the chunk that carries the finish reason.
		name: "llama.cpp",
		streams: [2][]string{{
			`{"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],"created":1736000000,"id":"chatcmpl-Lc1","model":"qwen2.5-7b-instruct","system_fingerprint":"b4600","object":"chat.completion.chunk"}`,
			`{"choices":[{"finish_reason":null,"index":0,"delta":{"tool_calls":[{"index":0,"id":"Xq1yZ","type":"function","function":{"name":"packrat__store_note","arguments":"{\""}}]}}],"created":1736000000,"id":"chatcmpl-Lc1","model":"qwen2.5-7b-instruct","system_fingerprint":"b4600","object":"chat.completion.chunk"}`,
			`{"choices":[{"finish_reason":null,"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"text\": \"bring cake\"}"}}]}}],"created":1736000000,"id":"chatcmpl-Lc1","model":"qwen2.5-7b-instruct","system_fingerprint":"b4600","object":"chat.completion.chunk"}`,
			`{"choices":[{"finish_reason":"tool_calls","index":0,"delta":{}}],"created":1736000000,"id":"chatcmpl-Lc1","model":"qwen2.5-7b-instruct","system_fingerprint":"b4600","object":"chat.completion.chunk","usage":{"completion_tokens":21,"prompt_tokens":95,"total_tokens":116},"timings":{"prompt_n":95,"predicted_n":21}}`,
		}, {
			`{"choices":[{"finish_reason":null,"index":0,"delta":{"content":"Noted:"}}],"created":1736000001,"id":"chatcmpl-Lc2","model":"qwen2.5-7b-instruct","system_fingerprint":"b4600","object":"chat.completion.chunk"}`,
			`{"choices":[{"finish_reason":null,"index":0,"delta":{"content":" bring cake."}}],"created":1736000001,"id":"chatcmpl-Lc2","model":"qwen2.5-7b-instruct","system_fingerprint":"b4600","object":"chat.completion.chunk"}`,
			`{"choices":[{"finish_reason":"stop","index":0,"delta":{}}],"created":1736000001,"id":"chatcmpl-Lc2","model":"qwen2.5-7b-instruct","system_fingerprint":"b4600","object":"chat.completion.chunk","usage":{"completion_tokens":6,"prompt_tokens":140,"total_tokens":146},"timings":{"prompt_n":140,"predicted_n":6}}`,
		}},
		msgs: [2]openai.ChatCompletionMessage{
			{ToolCalls: []openai.ToolCall{toolCall("Xq1yZ", "packrat__store_note", `{"text": "bring cake"}`)}},
			{Content: "Noted: bring cake."},
		},
		finish: [2]openai.FinishReason{openai.FinishReasonToolCalls, openai.FinishReasonStop},
		usage:  [2]openai.Usage{{PromptTokens: 95, CompletionTokens: 21, TotalTokens: 116}, {PromptTokens: 140, CompletionTokens: 6, TotalTokens: 146}},
	},
	{
		// DeepSeek's thinking mode: reasoning_content deltas before the
		// content (content null meanwhile), in both steps; the usage with
		// reasoning tokens in a last chunk with no choices.
		name: "DeepSeek",
		streams: [2][]string{{
			`{"id":"ds-1","object":"chat.completion.chunk","created":1738000000,"model":"deepseek-reasoner","system_fingerprint":"fp_ds","choices":[{"index":0,"delta":{"role":"assistant","content":null,"reasoning_content":""},"logprobs":null,"finish_reason":null}]}`,
			`{"id":"ds-1","object":"chat.completion.chunk","created":1738000000,"model":"deepseek-reasoner","system_fingerprint":"fp_ds","choices":[{"index":0,"delta":{"content":null,"reasoning_content":"The user wants"},"logprobs":null,"finish_reason":null}]}`,
			`{"id":"ds-1","object":"chat.completion.chunk","created":1738000000,"model":"deepseek-reasoner","system_fingerprint":"fp_ds","choices":[{"index":0,"delta":{"content":null,"reasoning_content":" a note stored."},"logprobs":null,"finish_reason":null}]}`,
			`{"id":"ds-1","object":"chat.completion.chunk","created":1738000000,"model":"deepseek-reasoner","system_fingerprint":"fp_ds","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_00_ds","type":"function","function":{"name":"packrat__store_note","arguments":""}}]},"logprobs":null,"finish_reason":null}]}`,
			`{"id":"ds-1","object":"chat.completion.chunk","created":1738000000,"model":"deepseek-reasoner","system_fingerprint":"fp_ds","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"text\":\"bring cake\"}"}}]},"logprobs":null,"finish_reason":null}]}`,
			`{"id":"ds-1","object":"chat.completion.chunk","created":1738000000,"model":"deepseek-reasoner","system_fingerprint":"fp_ds","choices":[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"tool_calls"}]}`,
			`{"id":"ds-1","object":"chat.completion.chunk","created":1738000000,"model":"deepseek-reasoner","system_fingerprint":"fp_ds","choices":[],"usage":{"prompt_tokens":100,"completion_tokens":40,"total_tokens":140,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":30},"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":100}}`,
		}, {
			`{"id":"ds-2","object":"chat.completion.chunk","created":1738000001,"model":"deepseek-reasoner","system_fingerprint":"fp_ds","choices":[{"index":0,"delta":{"role":"assistant","content":null,"reasoning_content":"Stored; say so."},"logprobs":null,"finish_reason":null}]}`,
			`{"id":"ds-2","object":"chat.completion.chunk","created":1738000001,"model":"deepseek-reasoner","system_fingerprint":"fp_ds","choices":[{"index":0,"delta":{"content":"Noted: bring cake.","reasoning_content":null},"logprobs":null,"finish_reason":null}]}`,
			`{"id":"ds-2","object":"chat.completion.chunk","created":1738000001,"model":"deepseek-reasoner","system_fingerprint":"fp_ds","choices":[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"stop"}]}`,
			`{"id":"ds-2","object":"chat.completion.chunk","created":1738000001,"model":"deepseek-reasoner","system_fingerprint":"fp_ds","choices":[],"usage":{"prompt_tokens":160,"completion_tokens":12,"total_tokens":172,"prompt_tokens_details":{"cached_tokens":96},"completion_tokens_details":{"reasoning_tokens":6}}}`,
		}},
		msgs: [2]openai.ChatCompletionMessage{
			{ReasoningContent: "The user wants a note stored.", ToolCalls: []openai.ToolCall{toolCall("call_00_ds", "packrat__store_note", `{"text":"bring cake"}`)}},
			{ReasoningContent: "Stored; say so.", Content: "Noted: bring cake."},
		},
		finish: [2]openai.FinishReason{openai.FinishReasonToolCalls, openai.FinishReasonStop},
		usage: [2]openai.Usage{
			{PromptTokens: 100, CompletionTokens: 40, TotalTokens: 140, PromptTokensDetails: &openai.PromptTokensDetails{}, CompletionTokensDetails: &openai.CompletionTokensDetails{ReasoningTokens: 30}},
			{PromptTokens: 160, CompletionTokens: 12, TotalTokens: 172, PromptTokensDetails: &openai.PromptTokensDetails{CachedTokens: 96}, CompletionTokensDetails: &openai.CompletionTokensDetails{ReasoningTokens: 6}},
		},
	},
	{
		// Azure OpenAI: a first chunk with no id and no choices, only the
		// prompt's filter results; each choice with its own.
		name: "Azure OpenAI",
		streams: [2][]string{{
			`{"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[{"prompt_index":0,"content_filter_results":{"hate":{"filtered":false,"severity":"safe"},"self_harm":{"filtered":false,"severity":"safe"},"sexual":{"filtered":false,"severity":"safe"},"violence":{"filtered":false,"severity":"safe"}}}]}`,
			`{"choices":[{"content_filter_results":{},"delta":{"role":"assistant","content":null,"tool_calls":[{"function":{"arguments":"","name":"packrat__store_note"},"id":"call_az","index":0,"type":"function"}]},"finish_reason":null,"index":0,"logprobs":null}],"created":1727000000,"id":"chatcmpl-AZ1","model":"gpt-4o-2024-08-06","object":"chat.completion.chunk","system_fingerprint":"fp_az"}`,
			`{"choices":[{"content_filter_results":{},"delta":{"tool_calls":[{"function":{"arguments":"{\"text\":\"bring cake\"}"},"index":0}]},"finish_reason":null,"index":0,"logprobs":null}],"created":1727000000,"id":"chatcmpl-AZ1","model":"gpt-4o-2024-08-06","object":"chat.completion.chunk","system_fingerprint":"fp_az"}`,
			`{"choices":[{"content_filter_results":{},"delta":{},"finish_reason":"tool_calls","index":0,"logprobs":null}],"created":1727000000,"id":"chatcmpl-AZ1","model":"gpt-4o-2024-08-06","object":"chat.completion.chunk","system_fingerprint":"fp_az"}`,
			`{"choices":[],"created":1727000000,"id":"chatcmpl-AZ1","model":"gpt-4o-2024-08-06","object":"chat.completion.chunk","system_fingerprint":"fp_az","usage":{"completion_tokens":18,"prompt_tokens":85,"total_tokens":103}}`,
		}, {
			`{"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[{"prompt_index":0,"content_filter_results":{"hate":{"filtered":false,"severity":"safe"}}}]}`,
			`{"choices":[{"content_filter_results":{"hate":{"filtered":false,"severity":"safe"}},"delta":{"content":"Noted: bring cake."},"finish_reason":null,"index":0,"logprobs":null}],"created":1727000001,"id":"chatcmpl-AZ2","model":"gpt-4o-2024-08-06","object":"chat.completion.chunk","system_fingerprint":"fp_az"}`,
			`{"choices":[{"content_filter_results":{},"delta":{},"finish_reason":"stop","index":0,"logprobs":null}],"created":1727000001,"id":"chatcmpl-AZ2","model":"gpt-4o-2024-08-06","object":"chat.completion.chunk","system_fingerprint":"fp_az"}`,
			`{"choices":[],"created":1727000001,"id":"chatcmpl-AZ2","model":"gpt-4o-2024-08-06","object":"chat.completion.chunk","system_fingerprint":"fp_az","usage":{"completion_tokens":6,"prompt_tokens":125,"total_tokens":131}}`,
		}},
		msgs: [2]openai.ChatCompletionMessage{
			{ToolCalls: []openai.ToolCall{toolCall("call_az", "packrat__store_note", `{"text":"bring cake"}`)}},
			{Content: "Noted: bring cake."},
		},
		finish: [2]openai.FinishReason{openai.FinishReasonToolCalls, openai.FinishReasonStop},
		usage:  [2]openai.Usage{{PromptTokens: 85, CompletionTokens: 18, TotalTokens: 103}, {PromptTokens: 125, CompletionTokens: 6, TotalTokens: 131}},
	},
	{
		// Groq: the usage in x_groq, in the chunk with the finish reason.
		name: "Groq",
		streams: [2][]string{{
			`{"id":"chatcmpl-gq1","object":"chat.completion.chunk","created":1733000000,"model":"llama-3.3-70b-versatile","system_fingerprint":"fp_gq","choices":[{"index":0,"delta":{"role":"assistant","content":null},"logprobs":null,"finish_reason":null}],"x_groq":{"id":"req_01gq1"}}`,
			`{"id":"chatcmpl-gq1","object":"chat.completion.chunk","created":1733000000,"model":"llama-3.3-70b-versatile","system_fingerprint":"fp_gq","choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_gq","type":"function","function":{"name":"packrat__store_note","arguments":"{\"text\":\"bring cake\"}"},"index":0}]},"logprobs":null,"finish_reason":null}]}`,
			`{"id":"chatcmpl-gq1","object":"chat.completion.chunk","created":1733000000,"model":"llama-3.3-70b-versatile","system_fingerprint":"fp_gq","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}],"x_groq":{"id":"req_01gq1","usage":{"queue_time":0.02,"prompt_tokens":88,"prompt_time":0.01,"completion_tokens":19,"completion_time":0.05,"total_tokens":107,"total_time":0.06}}}`,
		}, {
			`{"id":"chatcmpl-gq2","object":"chat.completion.chunk","created":1733000001,"model":"llama-3.3-70b-versatile","system_fingerprint":"fp_gq","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"x_groq":{"id":"req_01gq2"}}`,
			`{"id":"chatcmpl-gq2","object":"chat.completion.chunk","created":1733000001,"model":"llama-3.3-70b-versatile","system_fingerprint":"fp_gq","choices":[{"index":0,"delta":{"content":"Noted: bring cake."},"logprobs":null,"finish_reason":null}]}`,
			`{"id":"chatcmpl-gq2","object":"chat.completion.chunk","created":1733000001,"model":"llama-3.3-70b-versatile","system_fingerprint":"fp_gq","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"x_groq":{"id":"req_01gq2","usage":{"queue_time":0.02,"prompt_tokens":130,"prompt_time":0.01,"completion_tokens":6,"completion_time":0.01,"total_tokens":136,"total_time":0.02}}}`,
		}},
		msgs: [2]openai.ChatCompletionMessage{
			{ToolCalls: []openai.ToolCall{toolCall("call_gq", "packrat__store_note", `{"text":"bring cake"}`)}},
			{Content: "Noted: bring cake."},
		},
		finish: [2]openai.FinishReason{openai.FinishReasonToolCalls, openai.FinishReasonStop},
		usage:  [2]openai.Usage{{PromptTokens: 88, CompletionTokens: 19, TotalTokens: 107}, {PromptTokens: 130, CompletionTokens: 6, TotalTokens: 136}},
	},
	{
		// Some Ollama and vLLM builds: the tool call with no index, no id
		// and no type, its arguments a JSON object in one chunk; a
		// preamble in the content before it.
		name: "arguments as an object",
		streams: [2][]string{{
			`{"id":"cmpl-v1","object":"chat.completion.chunk","created":1730000000,"model":"llama3.1","choices":[{"index":0,"delta":{"role":"assistant","content":"Let me store that."},"finish_reason":null}]}`,
			`{"id":"cmpl-v1","object":"chat.completion.chunk","created":1730000000,"model":"llama3.1","choices":[{"index":0,"delta":{"tool_calls":[{"function":{"name":"packrat__store_note","arguments":{"text":"bring cake"}}}]},"finish_reason":null}]}`,
			`{"id":"cmpl-v1","object":"chat.completion.chunk","created":1730000000,"model":"llama3.1","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":70,"completion_tokens":15,"total_tokens":85}}`,
		}, {
			`{"id":"cmpl-v2","object":"chat.completion.chunk","created":1730000001,"model":"llama3.1","choices":[{"index":0,"delta":{"role":"assistant","content":"Noted: bring cake."},"finish_reason":null}]}`,
			`{"id":"cmpl-v2","object":"chat.completion.chunk","created":1730000001,"model":"llama3.1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":100,"completion_tokens":6,"total_tokens":106}}`,
		}},
		msgs: [2]openai.ChatCompletionMessage{
			{Content: "Let me store that.", ToolCalls: []openai.ToolCall{{Function: openai.FunctionCall{Name: "packrat__store_note", Arguments: `{"text":"bring cake"}`}}}},
			{Content: "Noted: bring cake."},
		},
		finish: [2]openai.FinishReason{openai.FinishReasonToolCalls, openai.FinishReasonStop},
		usage:  [2]openai.Usage{{PromptTokens: 70, CompletionTokens: 15, TotalTokens: 85}, {PromptTokens: 100, CompletionTokens: 6, TotalTokens: 106}},
	},
}

// TestStreamedTurnEqualsWholeTurn: for each provider's way of streaming,
// a turn over the stream has the Result (answer, reasoning, status, usage
// per step and in all) the same turn has over the answers sent whole, and
// sends the model the same history; the deltas the caller saw add up to
// the answer and hold no reasoning.
func TestStreamedTurnEqualsWholeTurn(t *testing.T) {
	for _, f := range flavors {
		t.Run(f.name, func(t *testing.T) {
			streamed := newEndpoint(t, sse(f.streams[0]...), sse(f.streams[1]...))
			plain := newEndpoint(t, whole(f.msgs[0], f.finish[0], f.usage[0]), whole(f.msgs[1], f.finish[1], f.usage[1]))
			a := newAgent(t, oracle(streamed.URL, scriptedPackrat(t, storeOK)), nil)
			b := newAgent(t, oracle(plain.URL, scriptedPackrat(t, storeOK)), &runtime.Options{NoStream: true})
			var d deltas
			got, err := a.Run(d.ctx(t.Context()), "remember to bring cake", chain)
			if err != nil {
				t.Fatal(err)
			}
			want, err := b.Run(t.Context(), "remember to bring cake", chain)
			if err != nil {
				t.Fatal(err)
			}
			if got.Answer != "Noted: bring cake." || got.Answer != want.Answer || got.Reasoning != want.Reasoning || got.Status != want.Status || got.Steps != 2 {
				t.Errorf("streamed: answer %q reasoning %q status %s steps %d\nwhole:    answer %q reasoning %q status %s steps %d",
					got.Answer, got.Reasoning, got.Status, got.Steps, want.Answer, want.Reasoning, want.Status, want.Steps)
			}
			// The streamed requests are longer by their stream members, and
			// each step has its own span: everything else of each step's
			// record is the same.
			for i := range got.StepUsage {
				got.StepUsage[i].RequestBytes, want.StepUsage[i].RequestBytes = 0, 0
				if got.StepUsage[i].Start.IsZero() || got.StepUsage[i].DurationMS <= 0 {
					t.Errorf("streamed step %d has no span: %+v", i+1, got.StepUsage[i])
				}
				got.StepUsage[i].Start, want.StepUsage[i].Start = time.Time{}, time.Time{}
				got.StepUsage[i].DurationMS, want.StepUsage[i].DurationMS = 0, 0
			}
			gu, _ := json.Marshal(got.StepUsage)
			wu, _ := json.Marshal(want.StepUsage)
			if string(gu) != string(wu) || got.Usage != want.Usage || got.Usage.TotalTokens != f.usage[0].TotalTokens+f.usage[1].TotalTokens {
				t.Errorf("usage differs:\nstreamed %s %+v\nwhole    %s %+v", gu, got.Usage, wu, want.Usage)
			}
			gb, wb := streamed.Bodies(), plain.Bodies()
			for i, body := range gb {
				var req openai.ChatCompletionRequest
				json.Unmarshal([]byte(body), &req)
				if !req.Stream || req.StreamOptions == nil || !req.StreamOptions.IncludeUsage {
					t.Errorf("streamed request %d: stream %v, stream_options %+v; want a stream with usage", i+1, req.Stream, req.StreamOptions)
				}
			}
			if diff := jsonDiff(messagesOf(t, wb[1]), messagesOf(t, gb[1])); diff != "" {
				t.Errorf("the second request's history differs (want: whole, got: streamed):\n%s", diff)
			}
			if shown := d.shown(); shown != got.Answer {
				t.Errorf("the deltas add up to %q, want the answer %q", shown, got.Answer)
			}
			for _, x := range d.all {
				if strings.Contains(x.Text, "think") || (got.Reasoning != "" && strings.Contains(got.Reasoning, x.Text)) {
					t.Errorf("delta %+v is reasoning", x)
				}
			}
		})
	}
}

// messagesOf is the messages member of a request body, as JSON.
func messagesOf(t *testing.T, body string) string {
	t.Helper()
	var req struct {
		Messages json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatalf("request body %q: %v", body, err)
	}
	return string(req.Messages)
}

// TestStreamPreambleIsDiscarded: text the model writes before it calls
// tools is sent as it comes, then withdrawn when the tool call arrives.
func TestStreamPreambleIsDiscarded(t *testing.T) {
	f := flavors[len(flavors)-1]
	e := newEndpoint(t, sse(f.streams[0]...), sse(f.streams[1]...))
	a := newAgent(t, oracle(e.URL, scriptedPackrat(t, storeOK)), nil)
	var d deltas
	if _, err := a.Run(d.ctx(t.Context()), "remember to bring cake", chain); err != nil {
		t.Fatal(err)
	}
	want := []runtime.AnswerDelta{{Step: 1, Text: "Let me store that."}, {Step: 1, Discard: true}, {Step: 2, Text: "Noted: bring cake."}}
	if fmt.Sprint(d.all) != fmt.Sprint(want) {
		t.Errorf("deltas %+v, want %+v", d.all, want)
	}
}

// TestStreamRefused: an endpoint that refuses streams (OpenAI's o1 models
// answer 400 "'stream' does not support true with this model") gets the
// request again without one, and the agent asks it for none from then on;
// one that refuses only stream_options (vLLM builds that forbid extra
// inputs) gets it again streamed without them. A 400 about something else
// is the error it is, sent once.
func TestStreamRefused(t *testing.T) {
	const o1Refusal = `{"error":{"message":"Unsupported value: 'stream' does not support true with this model. Only the default (false) value is supported.","type":"invalid_request_error","param":"stream","code":"unsupported_value"}}`
	const vllmOptions = `{"object":"error","message":"[{'type': 'extra_forbidden', 'loc': ('body', 'stream_options'), 'msg': 'Extra inputs are not permitted', 'input': {'include_usage': True}}]","type":"BadRequestError","param":null,"code":400}`
	call := openai.ChatCompletionMessage{ToolCalls: []openai.ToolCall{toolCall("call_a", "packrat__store_note", `{"text":"bring cake"}`)}}
	ok := openai.Usage{PromptTokens: 10, CompletionTokens: 2, TotalTokens: 12}
	type shape struct{ stream, options bool }
	for _, tc := range []struct {
		name    string
		answers []http.HandlerFunc
		want    []shape // each request's stream and stream_options
	}{
		{"streams refused", []http.HandlerFunc{
			fail(http.StatusBadRequest, o1Refusal),
			whole(call, openai.FinishReasonToolCalls, ok),
			whole(openai.ChatCompletionMessage{Content: "Noted."}, openai.FinishReasonStop, ok),
		}, []shape{{true, true}, {false, false}, {false, false}}},
		{"stream_options refused", []http.HandlerFunc{
			fail(http.StatusBadRequest, vllmOptions),
			sse(`{"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"packrat__store_note","arguments":"{\"text\":\"bring cake\"}"}}]},"finish_reason":"tool_calls"}]}`),
			sse(`{"id":"c2","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"Noted."},"finish_reason":"stop"}]}`),
		}, []shape{{true, true}, {true, false}, {true, false}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEndpoint(t, tc.answers...)
			a := newAgent(t, oracle(e.URL, scriptedPackrat(t, storeOK)), nil)
			noWait(a)
			res, err := a.Run(t.Context(), "remember to bring cake", chain)
			if err != nil || res.Answer != "Noted." {
				t.Fatalf("answer %q, err %v", res.Answer, err)
			}
			var got []shape
			for _, b := range e.Bodies() {
				var req openai.ChatCompletionRequest
				json.Unmarshal([]byte(b), &req)
				got = append(got, shape{req.Stream, req.StreamOptions != nil})
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("requests (stream, stream_options) %v, want %v", got, tc.want)
			}
		})
	}

	for _, tc := range []struct {
		status int
		body   string
		says   string
	}{
		{http.StatusBadRequest, openAIContext, "maximum context length"},
		// "upstream" is not about streams.
		{http.StatusNotFound, `{"error":{"message":"The upstream provider has no model gpt-5-turbo","type":"invalid_request_error","code":"model_not_found"}}`, "knows no model"},
	} {
		e := newEndpoint(t, fail(tc.status, tc.body))
		a := newAgent(t, oracle(e.URL), nil)
		noWait(a)
		_, err := a.Run(t.Context(), "a long task", chain)
		if !errors.Is(err, runtime.ErrModel) || len(e.Bodies()) != 1 || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("a %d not about streams: err %v after %d requests; want ErrModel saying %q, after 1", tc.status, err, len(e.Bodies()), tc.says)
		}
	}
}

// TestStreamAnsweredWithJSON: an endpoint that answers a streamed request
// with one JSON completion has answered: that answer is the step's, the
// caller still sees its text, and the next steps ask for no stream.
func TestStreamAnsweredWithJSON(t *testing.T) {
	call := openai.ChatCompletionMessage{ToolCalls: []openai.ToolCall{toolCall("call_a", "packrat__store_note", `{"text":"bring cake"}`)}}
	u := openai.Usage{PromptTokens: 10, CompletionTokens: 2, TotalTokens: 12}
	e := newEndpoint(t, whole(call, openai.FinishReasonToolCalls, u), whole(openai.ChatCompletionMessage{Content: "Noted."}, openai.FinishReasonStop, u))
	a := newAgent(t, oracle(e.URL, scriptedPackrat(t, storeOK)), nil)
	var d deltas
	res, err := a.Run(d.ctx(t.Context()), "remember to bring cake", chain)
	if err != nil || res.Answer != "Noted." || res.Usage.TotalTokens != 24 || len(res.Delegations) != 1 {
		t.Fatalf("answer %q, usage %+v, %d delegations, err %v", res.Answer, res.Usage, len(res.Delegations), err)
	}
	bodies := e.Bodies()
	if !strings.Contains(bodies[0], `"stream":true`) || !strings.Contains(bodies[1], `"stream":false`) {
		t.Errorf("requests:\n%s\n%s\nwant a stream asked for, then none", bodies[0], bodies[1])
	}
}

// TestStreamResetMidStream: a stream cut part way (the connection closed
// in the middle of the chunked body) is sent again, with a note; the part
// of the answer the caller saw is withdrawn before the new one comes.
func TestStreamResetMidStream(t *testing.T) {
	cut := func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"The launch"},"finish_reason":null}]}`+"\n\n")
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // net/http closes the connection mid-body
	}
	e := newEndpoint(t, cut, sse(
		`{"id":"c2","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"The launch is on Friday."},"finish_reason":null}]}`,
		`{"id":"c2","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
	))
	a := newAgent(t, oracle(e.URL), nil)
	noWait(a)
	var n notes
	var d deltas
	res, err := a.Run(d.ctx(n.ctx(t.Context())), "when is the launch?", chain)
	if err != nil || res.Answer != "The launch is on Friday." {
		t.Fatalf("answer %q, err %v", res.Answer, err)
	}
	if got := n.get(); len(got) != 1 || !strings.Contains(got[0], "closed the connection") {
		t.Errorf("notes %q, want one saying the endpoint closed the connection and it is retried", got)
	}
	want := []runtime.AnswerDelta{{Step: 1, Text: "The launch"}, {Step: 1, Discard: true}, {Step: 1, Text: "The launch is on Friday."}}
	if fmt.Sprint(d.all) != fmt.Sprint(want) {
		t.Errorf("deltas %+v, want %+v", d.all, want)
	}
}

// TestStreamStall: a stream that stops coming is ended one ModelTimeout
// after its last byte, retried, and then fails with an error saying it
// stalled, after how many chunks, and how to give it longer.
func TestStreamStall(t *testing.T) {
	stall := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Thinking about"},"finish_reason":null}]}`+"\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done() // the client gives up on the stall
	}
	e := newEndpoint(t, stall, stall)
	a := newAgent(t, oracle(e.URL), &runtime.Options{ModelTimeout: 100 * time.Millisecond, MaxRetries: 1})
	noWait(a)
	var n notes
	var d deltas
	_, err := a.Run(d.ctx(n.ctx(t.Context())), "anything", chain)
	if !errors.Is(err, runtime.ErrModel) || !errors.Is(err, runtime.ErrModelTimeout) {
		t.Fatalf("err = %v, want ErrModel wrapping ErrModelTimeout", err)
	}
	for _, want := range []string{"stopped coming", "after 1 chunk ", "100ms", runtime.EnvModelTimeout, "2 attempts"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if len(n.get()) != 1 || d.shown() != "" || d.discards() != 2 {
		t.Errorf("notes %q, deltas %+v: want one retry note, and each attempt's text withdrawn", n.get(), d.all)
	}
}

// TestStreamErrorInside: OpenRouter's error inside a stream (an error
// object with finish_reason "error" after the answer began) is a failed
// request, retried; the answer comes from the retry.
func TestStreamErrorInside(t *testing.T) {
	e := newEndpoint(t, sse(
		`{"id":"gen-1","object":"chat.completion.chunk","created":1740000000,"model":"openai/gpt-4o","provider":"OpenAI","choices":[{"index":0,"delta":{"role":"assistant","content":"The"},"finish_reason":null}]}`,
		`{"id":"gen-1","object":"chat.completion.chunk","created":1740000000,"model":"openai/gpt-4o","provider":"OpenAI","error":{"code":"server_error","message":"Provider disconnected unexpectedly"},"choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}]}`,
	), sse(
		`{"id":"gen-2","object":"chat.completion.chunk","created":1740000001,"model":"openai/gpt-4o","provider":"OpenAI","choices":[{"index":0,"delta":{"role":"assistant","content":"The answer."},"finish_reason":"stop"}]}`,
		`{"id":"gen-2","object":"chat.completion.chunk","created":1740000001,"model":"openai/gpt-4o","provider":"OpenAI","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}`,
	))
	a := newAgent(t, oracle(e.URL), nil)
	noWait(a)
	var n notes
	var d deltas
	res, err := a.Run(d.ctx(n.ctx(t.Context())), "anything", chain)
	if err != nil || res.Answer != "The answer." || d.shown() != "The answer." || res.Usage.TotalTokens != 8 {
		t.Fatalf("answer %q, deltas %+v, usage %+v, err %v", res.Answer, d.all, res.Usage, err)
	}
	if got := n.get(); len(got) != 1 || !strings.Contains(got[0], "error in the body") {
		t.Errorf("notes %q, want one saying the endpoint sent an error in its answer", got)
	}
}

// TestStillWorkingNote: a model request with no byte of its answer yet
// tells the caller, at intervals, that the model is still working, naming
// the model, the endpoint and the step.
func TestStillWorkingNote(t *testing.T) {
	noted := make(chan string, 1)
	e := newEndpoint(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-noted:
		case <-r.Context().Done():
			return
		}
		sse(`{"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"Done."},"finish_reason":"stop"}]}`)(w, r)
	})
	a := newAgent(t, oracle(e.URL), nil)
	runtime.SetStillWorkingEvery(a, time.Millisecond)
	var first string
	ctx := runtime.WithNoteHandler(t.Context(), func(s string) {
		if strings.Contains(s, "still working") && first == "" {
			first = s
			noted <- s
		}
	})
	res, err := a.Run(ctx, "anything", chain)
	if err != nil || res.Answer != "Done." {
		t.Fatalf("answer %q, err %v", res.Answer, err)
	}
	if want := "model scripted at " + e.URL + " is still working on step 1 ("; !strings.HasPrefix(first, want) {
		t.Errorf("note %q, want it to begin %q", first, want)
	}
}

// TestStreamSwitchedOff: Options.NoStream and $SWITCHBOARD_MODEL_STREAM=0
// ask for answers whole; a value that is not a boolean is an error naming
// the variable.
func TestStreamSwitchedOff(t *testing.T) {
	for name, opts := range map[string]*runtime.Options{
		"Options.NoStream": {NoStream: true},
		"$" + runtime.EnvModelStream + "=0": {Getenv: func(k string) string {
			return map[string]string{runtime.EnvModelStream: "0"}[k]
		}},
	} {
		e := newEndpoint(t, answer("Whole."))
		a := newAgent(t, oracle(e.URL), opts)
		res, err := a.Run(t.Context(), "anything", chain)
		if err != nil || res.Answer != "Whole." || !strings.Contains(e.Bodies()[0], `"stream":false`) {
			t.Errorf("%s: answer %q, err %v, request %s; want a request with stream false", name, res.Answer, err, e.Bodies()[0])
		}
	}
	a := newAgent(t, oracle("http://127.0.0.1:1/v1"), &runtime.Options{Getenv: func(k string) string {
		return map[string]string{runtime.EnvModelStream: "sometimes"}[k]
	}})
	_, err := a.Run(t.Context(), "anything", chain)
	if !errors.Is(err, runtime.ErrModel) || !strings.Contains(err.Error(), runtime.EnvModelStream) || !strings.Contains(err.Error(), `"sometimes"`) {
		t.Errorf("err = %v, want ErrModel naming $%s and its value", err, runtime.EnvModelStream)
	}
}

// TestBuiltinModelStreams: the builtin model answers stream: true in
// OpenAI's event-stream shape; a streamed turn's answer is the one the
// same turn gets whole, and the deltas add up to it.
func TestBuiltinModelStreams(t *testing.T) {
	run := func(opts *runtime.Options, d *deltas) *runtime.Result {
		t.Helper()
		def, err := agentdef.Load("../agents/oracle")
		if err != nil {
			t.Fatal(err)
		}
		ps := mcp.NewServer(&mcp.Implementation{Name: "packrat"}, nil)
		closer, err := packrat.Register(ps, t.TempDir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { closer.Close() })
		as := mcp.NewServer(&mcp.Implementation{Name: "abacus"}, nil)
		if err := abacus.Register(as); err != nil {
			t.Fatal(err)
		}
		def.MCP = &mcpconfig.Config{Path: def.MCP.Path, Servers: []*mcpconfig.Server{serve(t, "packrat", ps), serve(t, "abacus", as)}}
		res, err := newAgent(t, def, opts).Run(d.ctx(t.Context()), "remember that the launch moved to Friday, then tell me what you know about the launch", chain)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	var streamed, plain deltas
	got := run(nil, &streamed)
	want := run(&runtime.Options{NoStream: true}, &plain)
	// The two turns store their notes a moment apart.
	stored := regexp.MustCompile(`\(stored [^)]*\)`)
	if stored.ReplaceAllString(got.Answer, "") != stored.ReplaceAllString(want.Answer, "") || !strings.Contains(got.Answer, "Friday") || got.Steps != want.Steps {
		t.Errorf("streamed answer %q in %d steps, whole %q in %d", got.Answer, got.Steps, want.Answer, want.Steps)
	}
	if streamed.shown() != strings.TrimSpace(got.Answer) || len(plain.all) != 0 {
		t.Errorf("streamed deltas add up to %q, want %q; the whole turn sent %d deltas, want none", streamed.shown(), got.Answer, len(plain.all))
	}
}

// TestStreamPassesThroughAsItComes: the model transport hands an event
// stream on as it arrives, not once it has ended: the endpoint sends the
// rest of the answer only after the caller has seen its first words.
func TestStreamPassesThroughAsItComes(t *testing.T) {
	seen := make(chan struct{})
	e := newEndpoint(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"First words"},"finish_reason":null}]}`+"\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-seen:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":", then the rest."},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
	})
	a := newAgent(t, oracle(e.URL), &runtime.Options{ModelTimeout: testDeadline, MaxRetries: -1})
	var once sync.Once
	ctx := runtime.WithAnswerHandler(t.Context(), func(d runtime.AnswerDelta) {
		if d.Text == "First words" {
			once.Do(func() { close(seen) })
		}
	})
	res, err := a.Run(ctx, "anything", chain)
	if err != nil || res.Answer != "First words, then the rest." {
		t.Fatalf("answer %q, err %v: the stream was held back until it ended", res.Answer, err)
	}
}
