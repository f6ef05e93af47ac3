package runtime

// What a turn cost: the tokens of every model request, per step and for
// the whole turn, with the turns of the siblings it asked (their own ask
// tool's model requests, reported in the result's _meta under UsageMetaKey)
// rolled up into it, so that a run's bill is one number.

import (
	"encoding/json"
	"math"
	"time"

	"github.com/sashabaranov/go-openai"
)

// UsageMetaKey is the _meta member of an ask tool's result that carries
// the Usage of the turn behind it (nested turns included), so that the
// turn which delegated to it can add it to its own.
const UsageMetaKey = "run.switchboard/usage"

// Usage counts the tokens of model requests, as the endpoints report them
// (an endpoint that reports none counts zero).
type Usage struct {
	// Requests is the number of chat requests answered, retries included.
	Requests         int `json:"requests"`
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	// CachedTokens are the prompt tokens the provider served from its
	// prompt cache (prompt_tokens_details.cached_tokens); they are part of
	// PromptTokens.
	CachedTokens int `json:"cached_tokens,omitempty"`
	// ReasoningTokens are the completion tokens spent thinking
	// (completion_tokens_details.reasoning_tokens); part of
	// CompletionTokens.
	ReasoningTokens int `json:"reasoning_tokens,omitempty"`
	TotalTokens     int `json:"total_tokens"`
	// CostUSD is what the tokens cost by agent.json's price table, zero
	// when it has none for the model.
	CostUSD float64 `json:"cost_usd,omitempty"`
}

// Add adds o to u.
func (u *Usage) Add(o Usage) {
	u.Requests += o.Requests
	u.PromptTokens += o.PromptTokens
	u.CompletionTokens += o.CompletionTokens
	u.CachedTokens += o.CachedTokens
	u.ReasoningTokens += o.ReasoningTokens
	u.TotalTokens += o.TotalTokens
	u.CostUSD += o.CostUSD
}

// usageOf reads a chat response's usage.
func usageOf(u openai.Usage) Usage {
	out := Usage{
		Requests:         1,
		PromptTokens:     u.PromptTokens,
		CompletionTokens: u.CompletionTokens,
		TotalTokens:      u.TotalTokens,
	}
	if u.PromptTokensDetails != nil {
		out.CachedTokens = u.PromptTokensDetails.CachedTokens
	}
	if u.CompletionTokensDetails != nil {
		out.ReasoningTokens = u.CompletionTokensDetails.ReasoningTokens
	}
	if out.TotalTokens == 0 {
		out.TotalTokens = out.PromptTokens + out.CompletionTokens
	}
	return out
}

// wireUsage is a usage member as providers send it: OpenAI's, and
// DeepSeek's prompt_cache_hit_tokens, its name for the prompt tokens its
// context cache served (https://api-docs.deepseek.com/guides/kv_cache).
type wireUsage struct {
	openai.Usage
	PromptCacheHitTokens int `json:"prompt_cache_hit_tokens"`
}

// normalized is the usage in OpenAI's shape, DeepSeek's cache hits as
// prompt_tokens_details.cached_tokens when that says nothing.
func (w *wireUsage) normalized() openai.Usage {
	u := w.Usage
	if w.PromptCacheHitTokens > 0 && (u.PromptTokensDetails == nil || u.PromptTokensDetails.CachedTokens == 0) {
		d := openai.PromptTokensDetails{CachedTokens: w.PromptCacheHitTokens}
		if u.PromptTokensDetails != nil {
			d.AudioTokens = u.PromptTokensDetails.AudioTokens
		}
		u.PromptTokensDetails = &d
	}
	return u
}

// StepUsage is what one step of a turn sent and what it cost.
type StepUsage struct {
	Step int `json:"step"`
	// RequestBytes is the size of the step's chat request body as sent
	// (the last attempt's).
	RequestBytes int `json:"request_bytes"`
	// Attempts is how many times the request was sent (1 without a
	// retry).
	Attempts int `json:"attempts"`
	// Trimmed is how many earlier tool results were left out of the
	// step's request after the endpoint refused it as longer than the
	// model's context (ErrContextLength), before it was asked again.
	Trimmed int   `json:"trimmed,omitempty"`
	Usage   Usage `json:"usage"`
	// Start and DurationMS are when the step's request was sent and how
	// long it took to its answer, its retries' waits included: the span the
	// studio draws for the step beside the delegations.
	Start      time.Time `json:"start,omitzero"`
	DurationMS float64   `json:"duration_ms,omitempty"`
	// Replayed: the step was answered from the run's journal, not asked.
	Replayed bool `json:"replayed,omitempty"`
	// FinishReason is the answer's finish_reason ("stop", "tool_calls",
	// "length"), and ToolCalls the tools it chose, by the names the model
	// wrote, at most 16 of them (ToolCallsLeft more).
	FinishReason  string   `json:"finish_reason,omitempty"`
	ToolCalls     []string `json:"tool_calls,omitempty"`
	ToolCallsLeft int      `json:"tool_calls_left,omitempty"`
	// Truncated lists the results of this step's tool calls that the model
	// was sent cut (budget.go), at most maxStepTruncated of them
	// (TruncatedLeft more).
	Truncated     []Truncated `json:"truncated,omitempty"`
	TruncatedLeft int         `json:"truncated_left,omitempty"`
}

// maxStepToolCalls bounds the tool names one StepUsage lists (its
// ToolCalls doc says 16): it travels in every ask result, for the studio's
// waterfall.
const maxStepToolCalls = 16

// noteAnswer records in su what the step's answer chose.
func (su *StepUsage) noteAnswer(resp openai.ChatCompletionResponse) {
	if len(resp.Choices) == 0 {
		return
	}
	c := resp.Choices[0]
	su.FinishReason = string(c.FinishReason)
	for i, tc := range c.Message.ToolCalls {
		if i == maxStepToolCalls {
			su.ToolCallsLeft = len(c.Message.ToolCalls) - i
			break
		}
		su.ToolCalls = append(su.ToolCalls, tc.Function.Name)
	}
}

// nestedUsage reads the Usage a sibling's ask tool put in its result's
// _meta; ok is false when there is none, or it is not a Usage (a server
// that is no agent may use the key for something else: its bill is not
// ours to guess).
func nestedUsage(meta map[string]any) (u Usage, ok bool) {
	v, found := meta[UsageMetaKey]
	if !found {
		return Usage{}, false
	}
	b, err := json.Marshal(v)
	if err != nil || json.Unmarshal(b, &u) != nil {
		return Usage{}, false
	}
	if u.Requests < 0 || u.PromptTokens < 0 || u.CompletionTokens < 0 || u.CachedTokens < 0 ||
		u.ReasoningTokens < 0 || u.TotalTokens < 0 || u.CostUSD < 0 || math.IsNaN(u.CostUSD) {
		return Usage{}, false
	}
	return u, true
}

// Model request outcomes, as Options.OnModelRequest and the metrics name
// them.
const (
	OutcomeOK       = "ok"       // answered
	OutcomeRetried  = "retried"  // failed, and is sent again
	OutcomeFailed   = "failed"   // failed for good
	OutcomeCanceled = "canceled" // the turn's caller went away
)

// ModelRequest is one chat request of a turn (one attempt), as
// Options.OnModelRequest sees it when it has ended.
type ModelRequest struct {
	Agent    string
	Model    string
	Endpoint string // "builtin" or the redacted base URL
	Step     int
	Attempt  int // from 1
	// Outcome is OutcomeOK, OutcomeRetried, OutcomeFailed or
	// OutcomeCanceled.
	Outcome string
	// Status is the HTTP status of a failed attempt's answer, 0 when it
	// got none (or succeeded).
	Status       int
	Duration     time.Duration
	RequestBytes int
	Usage        Usage // of an answered request
}
