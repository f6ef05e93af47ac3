package runtime_test

// Replays of whole turns in the response shapes the providers document:
// for each provider, a tool-calling turn (the tool call, then the answer,
// each with the provider's own ids, object, system_fingerprint and usage
// extras), the same turn with the provider's rate-limit or busy answer at
// step 2 (after the delegation ran), and its error answers to a bad request
// or an unknown model. The sibling is a real go-sdk MCP server over
// loopback that counts its executions; the model endpoint is the only fake.
//
// Each body cites the page it was taken from. What the shapes add to
// OpenAI's (x_groq, usage.queue_time, timings, cost, provider,
// prompt_cache_hit_tokens, content_filter_results...) must pass through
// go-openai's decoding without disturbing the turn; the usage members
// OpenAI defines are read into Result.Usage.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sashabaranov/go-openai"
	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/runtime"
)

// A refusal is a provider's error answer that retrying cannot mend.
type refusal struct {
	name    string
	status  int
	body    string
	message string // the provider's own words, which the error must carry
}

// A providerReplay is one provider's documented shapes.
type providerReplay struct {
	name string
	// callID is the id of step 1's tool call, which step 2's history
	// must answer.
	callID string
	// step1 calls packrat__store_note with {"text":"launch moved to
	// Friday"}; step2 answers "Stored: the launch moved to Friday.".
	step1, step2 string
	usage        runtime.Usage // of the two answers, summed
	reasoning    string        // Result.Reasoning, when the shape carries some
	// busy is the provider's rate-limit (or busy) answer, nil when it
	// documents none (a local server that queues requests instead).
	busy http.HandlerFunc
	// busyWait is what busy asks to wait; 0: none asked, a backoff.
	busyWait time.Duration
	refused  []refusal
}

// storeArgs is step 1's tool call's arguments as OpenAI sends them: a
// JSON string.
const storeArgs = `"{\"text\":\"launch moved to Friday\"}"`

const storedAnswer = "Stored: the launch moved to Friday."

var providerReplays = []providerReplay{
	{
		// https://platform.openai.com/docs/api-reference/chat/object
		// (usage.prompt_tokens_details.cached_tokens: https://platform.openai.com/docs/guides/prompt-caching);
		// 429 and x-ratelimit-*: https://platform.openai.com/docs/guides/rate-limits;
		// error bodies: https://platform.openai.com/docs/guides/error-codes
		name:   "OpenAI",
		callID: "call_Ur1R2bQrvOVD3tnQp4QzHWvX",
		step1: `{"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion","created":1741570283,"model":"gpt-4o-2024-08-06",
			"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_Ur1R2bQrvOVD3tnQp4QzHWvX","type":"function",
			"function":{"name":"packrat__store_note","arguments":` + storeArgs + `}}],"refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"tool_calls"}],
			"usage":{"prompt_tokens":1117,"completion_tokens":46,"total_tokens":1163,"prompt_tokens_details":{"cached_tokens":1024,"audio_tokens":0},
			"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},
			"service_tier":"default","system_fingerprint":"fp_fc9f1d7035"}`,
		step2: `{"id":"chatcmpl-B9MHEbslfkBeAs8l4bebGdFOJ6PeH","object":"chat.completion","created":1741570284,"model":"gpt-4o-2024-08-06",
			"choices":[{"index":0,"message":{"role":"assistant","content":"Stored: the launch moved to Friday.","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],
			"usage":{"prompt_tokens":1180,"completion_tokens":9,"total_tokens":1189,"prompt_tokens_details":{"cached_tokens":1152,"audio_tokens":0},
			"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},
			"service_tier":"default","system_fingerprint":"fp_fc9f1d7035"}`,
		usage: runtime.Usage{Requests: 2, PromptTokens: 2297, CompletionTokens: 55, CachedTokens: 2176, TotalTokens: 2352},
		busy: fail(429, openAIRateLimit, "x-ratelimit-limit-requests", "3", "x-ratelimit-remaining-requests", "0",
			"x-ratelimit-reset-requests", "1s", "x-ratelimit-limit-tokens", "40000", "x-ratelimit-remaining-tokens", "39000", "retry-after", "1"),
		busyWait: time.Second,
		refused: []refusal{{"a tool call id too long", 400,
			`{"error":{"message":"Invalid 'messages[2].tool_calls[0].id': string too long. Expected a string with maximum length 40, but got a string with length 64 instead.","type":"invalid_request_error","param":"messages[2].tool_calls[0].id","code":"string_above_max_length"}}`,
			"Expected a string with maximum length 40"}},
	},
	{
		// https://learn.microsoft.com/en-us/azure/ai-foundry/openai/reference#createchatcompletion
		// (prompt_filter_results, content_filter_results); 429 with
		// retry-after-ms: https://learn.microsoft.com/en-us/azure/ai-foundry/openai/quotas-limits;
		// DeploymentNotFound: https://learn.microsoft.com/en-us/azure/ai-foundry/openai/how-to/create-resource
		name:   "Azure OpenAI",
		callID: "call_8dBfDgYW4Ihx2wbx1KQ6cJzA",
		step1: `{"choices":[{"content_filter_results":{},"finish_reason":"tool_calls","index":0,"logprobs":null,
			"message":{"content":null,"refusal":null,"role":"assistant","tool_calls":[{"function":{"arguments":` + storeArgs + `,"name":"packrat__store_note"},
			"id":"call_8dBfDgYW4Ihx2wbx1KQ6cJzA","type":"function"}]}}],
			"created":1733000000,"id":"chatcmpl-AZ1x2y3z","model":"gpt-4o-2024-11-20","object":"chat.completion",
			"prompt_filter_results":[{"prompt_index":0,"content_filter_results":{"hate":{"filtered":false,"severity":"safe"},"jailbreak":{"filtered":false,"detected":false},
			"self_harm":{"filtered":false,"severity":"safe"},"sexual":{"filtered":false,"severity":"safe"},"violence":{"filtered":false,"severity":"safe"}}}],
			"system_fingerprint":"fp_ee1d74bde0",
			"usage":{"completion_tokens":21,"completion_tokens_details":{"accepted_prediction_tokens":0,"audio_tokens":0,"reasoning_tokens":0,"rejected_prediction_tokens":0},
			"prompt_tokens":310,"prompt_tokens_details":{"audio_tokens":0,"cached_tokens":0},"total_tokens":331}}`,
		step2: `{"choices":[{"content_filter_results":{"hate":{"filtered":false,"severity":"safe"},"protected_material_code":{"filtered":false,"detected":false},
			"protected_material_text":{"filtered":false,"detected":false},"self_harm":{"filtered":false,"severity":"safe"},"sexual":{"filtered":false,"severity":"safe"},
			"violence":{"filtered":false,"severity":"safe"}},"finish_reason":"stop","index":0,"logprobs":null,
			"message":{"content":"Stored: the launch moved to Friday.","refusal":null,"role":"assistant"}}],
			"created":1733000001,"id":"chatcmpl-AZ1x2y4a","model":"gpt-4o-2024-11-20","object":"chat.completion",
			"prompt_filter_results":[{"prompt_index":0,"content_filter_results":{}}],"system_fingerprint":"fp_ee1d74bde0",
			"usage":{"completion_tokens":10,"completion_tokens_details":{"reasoning_tokens":0},"prompt_tokens":352,"prompt_tokens_details":{"cached_tokens":0},"total_tokens":362}}`,
		usage:    runtime.Usage{Requests: 2, PromptTokens: 662, CompletionTokens: 31, TotalTokens: 693},
		busy:     fail(429, azureRateLimit, "retry-after", "1", "retry-after-ms", "800", "x-ratelimit-remaining-requests", "0", "x-ratelimit-remaining-tokens", "0"),
		busyWait: 800 * time.Millisecond,
		refused: []refusal{{"the deployment does not exist", 404,
			`{"error":{"code":"DeploymentNotFound","message":"The API deployment for this resource does not exist. If you created the deployment within the last 5 minutes, please wait a moment and try again."}}`,
			"The API deployment for this resource does not exist"}},
	},
	{
		// Ollama's OpenAI-compatible /v1 (https://github.com/ollama/ollama/blob/main/docs/openai.md):
		// OpenAI's shape with system_fingerprint "fp_ollama" and no
		// native done_reason; errors in OpenAI's error shape
		// (openai.NewError: invalid_request_error for 400). Busy is a 503
		// (https://github.com/ollama/ollama/blob/main/docs/faq.md, OLLAMA_MAX_QUEUE).
		name:   "Ollama",
		callID: "call_q0u8u3ft",
		step1: `{"id":"chatcmpl-417","object":"chat.completion","created":1733000000,"model":"llama3.1:8b","system_fingerprint":"fp_ollama",
			"choices":[{"index":0,"message":{"role":"assistant","content":"","tool_calls":[{"id":"call_q0u8u3ft","index":0,"type":"function",
			"function":{"name":"packrat__store_note","arguments":` + storeArgs + `}}]},"finish_reason":"tool_calls"}],
			"usage":{"prompt_tokens":214,"completion_tokens":25,"total_tokens":239}}`,
		step2: `{"id":"chatcmpl-418","object":"chat.completion","created":1733000002,"model":"llama3.1:8b","system_fingerprint":"fp_ollama",
			"choices":[{"index":0,"message":{"role":"assistant","content":"Stored: the launch moved to Friday."},"finish_reason":"stop"}],
			"usage":{"prompt_tokens":260,"completion_tokens":11,"total_tokens":271}}`,
		usage: runtime.Usage{Requests: 2, PromptTokens: 474, CompletionTokens: 36, TotalTokens: 510},
		busy:  fail(503, ollamaBusy),
		refused: []refusal{{"a model without tool support", 400,
			`{"error":{"message":"registry.ollama.ai/library/gemma2:latest does not support tools","type":"invalid_request_error","param":null,"code":null}}`,
			"does not support tools"}},
	},
	{
		// vLLM's OpenAI-compatible server
		// (https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html),
		// with a reasoning parser (https://docs.vllm.ai/en/latest/features/reasoning_outputs.html):
		// reasoning_content beside the tool call, chatcmpl-tool- ids,
		// stop_reason, prompt_logprobs; errors as
		// {"object":"error",...,"code":400}. vLLM queues requests and
		// documents no 429.
		name:   "vLLM",
		callID: "chatcmpl-tool-3c5f0b0d5b6b4f0e9c8a",
		step1: `{"id":"chatcmpl-8d2b0c1f","object":"chat.completion","created":1733000000,"model":"Qwen/QwQ-32B",
			"choices":[{"index":0,"message":{"role":"assistant","reasoning_content":"The user wants the launch date kept; store it.","content":null,
			"tool_calls":[{"id":"chatcmpl-tool-3c5f0b0d5b6b4f0e9c8a","type":"function","function":{"name":"packrat__store_note","arguments":` + storeArgs + `}}]},
			"logprobs":null,"finish_reason":"tool_calls","stop_reason":null}],
			"usage":{"prompt_tokens":402,"total_tokens":470,"completion_tokens":68,"prompt_tokens_details":null},"prompt_logprobs":null,"kv_transfer_params":null}`,
		step2: `{"id":"chatcmpl-8d2b0c20","object":"chat.completion","created":1733000001,"model":"Qwen/QwQ-32B",
			"choices":[{"index":0,"message":{"role":"assistant","reasoning_content":"Stored; say so.","content":"Stored: the launch moved to Friday.","tool_calls":[]},
			"logprobs":null,"finish_reason":"stop","stop_reason":null}],
			"usage":{"prompt_tokens":480,"total_tokens":500,"completion_tokens":20,"prompt_tokens_details":null},"prompt_logprobs":null}`,
		usage:     runtime.Usage{Requests: 2, PromptTokens: 882, CompletionTokens: 88, TotalTokens: 970},
		reasoning: "The user wants the launch date kept; store it.\n\nStored; say so.",
		refused: []refusal{{"auto tool choice not enabled", 400,
			`{"object":"error","message":"\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set","type":"BadRequestError","param":null,"code":400}`,
			"requires --enable-auto-tool-choice"}},
	},
	{
		// llama.cpp's llama-server, /v1/chat/completions
		// (https://github.com/ggml-org/llama.cpp/blob/master/tools/server/README.md):
		// a build id as system_fingerprint, a 32-character random tool
		// call id, and timings beside usage; errors as
		// {"error":{"code":400,"message":...,"type":...}}; 503 while
		// the model loads.
		name:   "llama.cpp",
		callID: "Jb6Qh6HTJ6DkxFc0gOsCEqBNm8KnB9ij",
		step1: `{"choices":[{"finish_reason":"tool_calls","index":0,"message":{"role":"assistant","content":null,
			"tool_calls":[{"type":"function","function":{"name":"packrat__store_note","arguments":` + storeArgs + `},"id":"Jb6Qh6HTJ6DkxFc0gOsCEqBNm8KnB9ij"}]}}],
			"created":1733000000,"model":"gpt-3.5-turbo","system_fingerprint":"b4923-5e2a4e9c","object":"chat.completion",
			"usage":{"completion_tokens":23,"prompt_tokens":350,"total_tokens":373},"id":"chatcmpl-zT4cB1NDFoCgxFvBgcQk5Czzj3eDX3wd",
			"timings":{"cache_n":0,"prompt_n":350,"prompt_ms":812.4,"prompt_per_token_ms":2.32,"prompt_per_second":430.8,
			"predicted_n":23,"predicted_ms":640.1,"predicted_per_token_ms":27.83,"predicted_per_second":35.93}}`,
		step2: `{"choices":[{"finish_reason":"stop","index":0,"message":{"role":"assistant","content":"Stored: the launch moved to Friday."}}],
			"created":1733000002,"model":"gpt-3.5-turbo","system_fingerprint":"b4923-5e2a4e9c","object":"chat.completion",
			"usage":{"completion_tokens":10,"prompt_tokens":40,"total_tokens":50},"id":"chatcmpl-hD2cB1NDFoCgxFvBgcQk5Czzj3eDX3we",
			"timings":{"cache_n":373,"prompt_n":40,"prompt_ms":90.2,"prompt_per_token_ms":2.25,"prompt_per_second":443.4,
			"predicted_n":10,"predicted_ms":280.0,"predicted_per_token_ms":28.0,"predicted_per_second":35.71}}`,
		// llama-server's usage.prompt_tokens counts only the tokens it
		// evaluated; the ones reused from its cache are timings.cache_n,
		// which is not an OpenAI member and is not read.
		usage: runtime.Usage{Requests: 2, PromptTokens: 390, CompletionTokens: 33, TotalTokens: 423},
		busy:  fail(503, llamaCppLoading),
		refused: []refusal{{"tools without --jinja", 400,
			`{"error":{"code":400,"message":"tools param requires --jinja flag","type":"invalid_request_error"}}`,
			"tools param requires --jinja flag"}},
	},
	{
		// LM Studio's OpenAI-compatible endpoints
		// (https://lmstudio.ai/docs/api/openai-api, tool use:
		// https://lmstudio.ai/docs/app/api/tools): a numeric string as
		// the tool call id, no content member at all beside tool_calls,
		// the model key as system_fingerprint. A local server: no 429.
		// The docs show no error body; the one below is OpenAI's shape
		// with LM Studio's "No models loaded" message, as its server
		// answers with no model loaded.
		name:   "LM Studio",
		callID: "365174485",
		step1: `{"id":"chatcmpl-gb1t1uqzefudice8ntxd9i","object":"chat.completion","created":1730913210,"model":"qwen2.5-7b-instruct",
			"choices":[{"index":0,"logprobs":null,"finish_reason":"tool_calls","message":{"role":"assistant",
			"tool_calls":[{"id":"365174485","type":"function","function":{"name":"packrat__store_note","arguments":` + storeArgs + `}}]}}],
			"usage":{"prompt_tokens":223,"completion_tokens":18,"total_tokens":241},"stats":{},"system_fingerprint":"qwen2.5-7b-instruct"}`,
		step2: `{"id":"chatcmpl-x8zqk1mm8cq6b0n2v4h7","object":"chat.completion","created":1730913212,"model":"qwen2.5-7b-instruct",
			"choices":[{"index":0,"logprobs":null,"finish_reason":"stop","message":{"role":"assistant","content":"Stored: the launch moved to Friday."}}],
			"usage":{"prompt_tokens":262,"completion_tokens":10,"total_tokens":272},"stats":{},"system_fingerprint":"qwen2.5-7b-instruct"}`,
		usage: runtime.Usage{Requests: 2, PromptTokens: 485, CompletionTokens: 28, TotalTokens: 513},
		refused: []refusal{{"no model loaded", 404,
			`{"error":{"message":"No models loaded. Please load a model in the developer page or use the 'lms load' command.","type":"invalid_request_error","param":"model","code":"model_not_found"}}`,
			"No models loaded"}},
	},
	{
		// https://api-docs.deepseek.com/api/create-chat-completion:
		// a UUID as the id, call_0_ tool call ids, and the prompt cache
		// as usage.prompt_cache_hit_tokens / prompt_cache_miss_tokens
		// (https://api-docs.deepseek.com/guides/kv_cache), not OpenAI's
		// prompt_tokens_details; errors:
		// https://api-docs.deepseek.com/quick_start/error_codes (400 for
		// a model that does not exist, 429 rate limit reached). That
		// page gives the statuses and their meaning, not the bodies:
		// the bodies below are in OpenAI's error shape, which DeepSeek's
		// API follows, with its messages.
		name:   "DeepSeek",
		callID: "call_0_8f1c9d2e-6a4b-4c1e-9a7d-3b2f1e0d9c8b",
		step1: `{"id":"930c60df-bf64-41c9-a88e-3ec75f81e00e","object":"chat.completion","created":1733000000,"model":"deepseek-chat",
			"choices":[{"index":0,"message":{"role":"assistant","content":"","tool_calls":[{"index":0,"id":"call_0_8f1c9d2e-6a4b-4c1e-9a7d-3b2f1e0d9c8b","type":"function",
			"function":{"name":"packrat__store_note","arguments":` + storeArgs + `}}]},"logprobs":null,"finish_reason":"tool_calls"}],
			"usage":{"prompt_tokens":512,"completion_tokens":30,"total_tokens":542,"prompt_cache_hit_tokens":448,"prompt_cache_miss_tokens":64},
			"system_fingerprint":"fp_8802369eaa_prod0623"}`,
		step2: `{"id":"930c60df-bf64-41c9-a88e-3ec75f81e00f","object":"chat.completion","created":1733000001,"model":"deepseek-chat",
			"choices":[{"index":0,"message":{"role":"assistant","content":"Stored: the launch moved to Friday."},"logprobs":null,"finish_reason":"stop"}],
			"usage":{"prompt_tokens":560,"completion_tokens":10,"total_tokens":570,"prompt_cache_hit_tokens":512,"prompt_cache_miss_tokens":48},
			"system_fingerprint":"fp_8802369eaa_prod0623"}`,
		// prompt_cache_hit_tokens is DeepSeek's cached_tokens: 448 + 512.
		usage: runtime.Usage{Requests: 2, PromptTokens: 1072, CompletionTokens: 40, CachedTokens: 960, TotalTokens: 1112},
		busy:  fail(429, `{"error":{"message":"Rate limit reached for requests","type":"rate_limit_error","param":null,"code":"rate_limit_reached"}}`),
		refused: []refusal{{"a model that does not exist", 400,
			`{"error":{"message":"Model Not Exist","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}`,
			"Model Not Exist"}},
	},
	{
		// https://console.groq.com/docs/api-reference#chat-create:
		// usage with queue_time, prompt_time, completion_time and
		// total_time, and x_groq.id; 429 with retry-after and
		// x-ratelimit-* (https://console.groq.com/docs/rate-limits);
		// errors (https://console.groq.com/docs/errors), among them 400
		// tool_use_failed with the model's failed_generation.
		name:   "Groq",
		callID: "call_d5wg",
		step1: `{"id":"chatcmpl-f51b2cd2-bef7-417e-964e-a08f0b513c22","object":"chat.completion","created":1730241104,"model":"llama-3.3-70b-versatile",
			"choices":[{"index":0,"message":{"role":"assistant","tool_calls":[{"id":"call_d5wg","type":"function",
			"function":{"name":"packrat__store_note","arguments":` + storeArgs + `}}]},"logprobs":null,"finish_reason":"tool_calls"}],
			"usage":{"queue_time":0.037493756,"prompt_tokens":318,"prompt_time":0.020680594,"completion_tokens":28,"completion_time":0.101818182,
			"total_tokens":346,"total_time":0.122498776},"usage_breakdown":null,
			"system_fingerprint":"fp_179b0f92c9","x_groq":{"id":"req_01jbd6g2qdfw2adyrt2az8hz4w"},"service_tier":"on_demand"}`,
		step2: `{"id":"chatcmpl-f51b2cd2-bef7-417e-964e-a08f0b513c23","object":"chat.completion","created":1730241105,"model":"llama-3.3-70b-versatile",
			"choices":[{"index":0,"message":{"role":"assistant","content":"Stored: the launch moved to Friday."},"logprobs":null,"finish_reason":"stop"}],
			"usage":{"queue_time":0.041,"prompt_tokens":366,"prompt_time":0.018,"completion_tokens":10,"completion_time":0.036,
			"total_tokens":376,"total_time":0.054,"prompt_tokens_details":{"cached_tokens":256}},
			"system_fingerprint":"fp_179b0f92c9","x_groq":{"id":"req_01jbd6g2qdfw2adyrt2az8hz4x"},"service_tier":"on_demand"}`,
		usage: runtime.Usage{Requests: 2, PromptTokens: 684, CompletionTokens: 38, CachedTokens: 256, TotalTokens: 722},
		busy: fail(429, groqRateLimit, "retry-after", "2", "x-ratelimit-limit-requests", "14400", "x-ratelimit-limit-tokens", "6000",
			"x-ratelimit-remaining-requests", "14370", "x-ratelimit-remaining-tokens", "0", "x-ratelimit-reset-requests", "2m59.56s", "x-ratelimit-reset-tokens", "7.66s"),
		busyWait: 2 * time.Second,
		refused: []refusal{
			{"a model that does not exist", 404,
				`{"error":{"message":"The model ` + "`llama-9000`" + ` does not exist or you do not have access to it.","type":"invalid_request_error","code":"model_not_found"}}`,
				"does not exist or you do not have access to it"},
			{"tool_use_failed", 400,
				`{"error":{"message":"Failed to call a function. Please adjust your prompt. See 'failed_generation' for more details.","type":"invalid_request_error","code":"tool_use_failed",
				"failed_generation":"<function=packrat__store_note>{\"text\": \"launch moved to Friday\"}</function>"}}`,
				"Failed to call a function"},
		},
	},
	{
		// https://openrouter.ai/docs/api-reference/overview: a gen- id,
		// the upstream provider's name, native_finish_reason; usage
		// with cost, is_byok and cost_details
		// (https://openrouter.ai/docs/use-cases/usage-accounting);
		// errors with a numeric code and metadata
		// (https://openrouter.ai/docs/api-reference/errors), a 429's
		// limits in metadata.headers and X-RateLimit-* headers.
		name:   "OpenRouter",
		callID: "call_pSIm1q8nTZ3ClCBiBh6W0FhZ",
		step1: `{"id":"gen-1733000000-Xr9cKpq3sQ0aWmBvHnTe","provider":"OpenAI","model":"openai/gpt-4o-mini","object":"chat.completion","created":1733000000,
			"choices":[{"logprobs":null,"finish_reason":"tool_calls","native_finish_reason":"tool_calls","index":0,
			"message":{"role":"assistant","content":"","refusal":null,"reasoning":null,"tool_calls":[{"index":0,"id":"call_pSIm1q8nTZ3ClCBiBh6W0FhZ","type":"function",
			"function":{"name":"packrat__store_note","arguments":` + storeArgs + `}}]}}],"system_fingerprint":"fp_0aa8d3e20b",
			"usage":{"prompt_tokens":194,"completion_tokens":20,"total_tokens":214,"cost":0.0000411,"is_byok":false,
			"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"cost_details":{"upstream_inference_cost":null},
			"completion_tokens_details":{"reasoning_tokens":0}}}`,
		step2: `{"id":"gen-1733000001-Yb2dLqr4tR1bXnCwIoUf","provider":"OpenAI","model":"openai/gpt-4o-mini","object":"chat.completion","created":1733000001,
			"choices":[{"logprobs":null,"finish_reason":"stop","native_finish_reason":"stop","index":0,
			"message":{"role":"assistant","content":"Stored: the launch moved to Friday.","refusal":null,"reasoning":null}}],"system_fingerprint":"fp_0aa8d3e20b",
			"usage":{"prompt_tokens":236,"completion_tokens":10,"total_tokens":246,"cost":0.0000414,"is_byok":false,
			"prompt_tokens_details":{"cached_tokens":128,"audio_tokens":0},"cost_details":{"upstream_inference_cost":null},
			"completion_tokens_details":{"reasoning_tokens":0}}}`,
		// usage.cost is OpenRouter's bill, not read: CostUSD comes from
		// agent.json's price table.
		usage: runtime.Usage{Requests: 2, PromptTokens: 430, CompletionTokens: 30, CachedTokens: 128, TotalTokens: 460},
		busy: fail(429, `{"error":{"code":429,"message":"Rate limit exceeded: free-models-per-min. ","metadata":{"headers":{"X-RateLimit-Limit":"20","X-RateLimit-Remaining":"0","X-RateLimit-Reset":"1733000060000"},"provider_name":null}},"user_id":"user_2x"}`,
			"X-RateLimit-Limit", "20", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1733000060000"),
		refused: []refusal{{"a model id that is not valid", 400,
			`{"error":{"message":"openai/gpt-5-turbo is not a valid model ID","code":400},"user_id":"user_2x"}`,
			"is not a valid model ID"}},
	},
}

// TestProviderReplays: each provider's documented shapes, replayed. A
// tool-calling turn answers, the delegation ran once, its usage is read;
// the provider's busy answer at step 2 resends step 2 only; its error
// answers fail at once, naming the endpoint, the status and the
// provider's own message.
func TestProviderReplays(t *testing.T) {
	for _, p := range providerReplays {
		t.Run(p.name, func(t *testing.T) {
			t.Run("turn", func(t *testing.T) {
				e, res, runs := replayTurn(t, p, nil)
				if b := e.Bodies(); len(b) != 2 || !strings.Contains(b[1], `"tool_call_id":"`+p.callID+`"`) {
					t.Errorf("%d requests; want 2, step 2's history answering call %s:\n%s", len(b), p.callID, strings.Join(b, "\n"))
				}
				if res.Usage != p.usage {
					t.Errorf("usage %+v, want %+v", res.Usage, p.usage)
				}
				if res.Reasoning != p.reasoning {
					t.Errorf("reasoning %q, want %q", res.Reasoning, p.reasoning)
				}
				if runs != 1 {
					t.Errorf("the tool ran %d times, want 1", runs)
				}
			})
			if p.busy != nil {
				t.Run("busy at step 2", func(t *testing.T) {
					var got []time.Duration
					e, res, runs := replayTurn(t, p, p.busy, &got)
					b := e.Bodies()
					if len(b) != 3 || b[1] != b[2] {
						t.Fatalf("%d requests; want 3, step 2 resent as it was", len(b))
					}
					if runs != 1 {
						t.Errorf("the tool ran %d times, want 1: a retried model request never reruns a delegation", runs)
					}
					// The refused attempt answered nothing: its usage is
					// not counted, its attempt is.
					if res.Usage != p.usage || len(res.StepUsage) != 2 || res.StepUsage[1].Attempts != 2 {
						t.Errorf("usage %+v, steps %+v; want %+v and 2 attempts at step 2", res.Usage, res.StepUsage, p.usage)
					}
					switch {
					case len(got) != 1:
						t.Errorf("waits %v, want one", got)
					case p.busyWait > 0 && got[0] != p.busyWait:
						t.Errorf("waited %v, want the %v asked for", got[0], p.busyWait)
					case p.busyWait == 0 && got[0] > 500*time.Millisecond:
						t.Errorf("waited %v, want a backoff within 500ms", got[0])
					}
				})
			}
			for _, r := range p.refused {
				t.Run("refused: "+r.name, func(t *testing.T) {
					e := newEndpoint(t, fail(r.status, r.body))
					a := newAgent(t, oracle(e.URL), nil)
					w := noWait(a)
					res, err := a.Run(t.Context(), "remember the launch", chain)
					if !errors.Is(err, runtime.ErrModel) {
						t.Fatalf("err = %v, want ErrModel", err)
					}
					if got := statusOf(err); got != r.status {
						t.Errorf("err = %v: status %d inside, want %d", err, got, r.status)
					}
					for _, want := range []string{e.URL, fmt.Sprintf("(%d)", r.status), r.message} {
						if !strings.Contains(err.Error(), want) {
							t.Errorf("error %q does not say %q", err, want)
						}
					}
					if len(e.Bodies()) != 1 || len(w.get()) != 0 || res.Status != runtime.StatusFailed {
						t.Errorf("%d requests, %d waits, status %q; want 1, 0, failed", len(e.Bodies()), len(w.get()), res.Status)
					}
				})
			}
		})
	}
}

// replayTurn runs p's turn against a real go-sdk packrat, with busy (when
// not nil) answering step 2's first attempt; waits, when given, receives
// the retry waits. It checks what every replay must end as and returns the
// endpoint, the result and how many times the tool ran.
func replayTurn(t *testing.T, p providerReplay, busy http.HandlerFunc, waits ...*[]time.Duration) (*endpoint, *runtime.Result, int64) {
	t.Helper()
	var runs atomic.Int64
	srv := scriptedPackrat(t, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		runs.Add(1)
		if got := string(req.Params.Arguments); got != `{"text":"launch moved to Friday"}` {
			t.Errorf("the tool got %s", got)
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "stored note 1"}}}, nil
	})
	answers := []http.HandlerFunc{raw(p.step1)}
	if busy != nil {
		answers = append(answers, busy)
	}
	e := newEndpoint(t, append(answers, raw(p.step2))...)
	a := newAgent(t, oracle(e.URL, srv), nil)
	w := noWait(a)
	res, err := a.Run(t.Context(), "remember that the launch moved to Friday", chain)
	if err != nil {
		t.Fatal(err)
	}
	if res.Answer != storedAnswer || res.Status != runtime.StatusAnswered || res.Steps != 2 {
		t.Errorf("answer %q, status %q, %d steps; want %q, answered, 2", res.Answer, res.Status, res.Steps, storedAnswer)
	}
	if len(res.Delegations) != 1 || res.Delegations[0].Outcome != delegation.OutcomeOK || res.Delegations[0].Tool != "store_note" {
		t.Errorf("delegations %+v, want one store_note, ok", res.Delegations)
	}
	for _, dst := range waits {
		*dst = w.get()
	}
	return e, res, runs.Load()
}

// statusOf is the HTTP status of the endpoint's answer inside err.
func statusOf(err error) int {
	if apiErr, ok := errors.AsType[*openai.APIError](err); ok {
		return apiErr.HTTPStatusCode
	}
	if reqErr, ok := errors.AsType[*openai.RequestError](err); ok {
		return reqErr.HTTPStatusCode
	}
	return 0
}
