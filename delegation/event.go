package delegation

import "time"

// Phase says where a delegation is in its life.
type Phase string

const (
	// PhaseStart: the call is about to be sent to the sibling.
	PhaseStart Phase = "start"
	// PhaseFinish: the call ended; the Event's outcome fields are set.
	PhaseFinish Phase = "finish"
)

// Outcome is how a delegation ended. Besides the constants below it can be
// the String of a pool.Kind ("session_expired", "outcome_unknown",
// "transport", "rpc") for a call the pool could not complete.
type Outcome string

const (
	// OutcomeOK: the tool ran and returned a result.
	OutcomeOK Outcome = "ok"
	// OutcomeToolError: the tool ran and reported an error (isError).
	OutcomeToolError Outcome = "tool_error"
	// OutcomeBadArguments: the model's arguments were not a JSON object; the
	// call was not sent.
	OutcomeBadArguments Outcome = "bad_arguments"
	// OutcomeUnknownTool: the model named a tool it was not offered.
	OutcomeUnknownTool Outcome = "unknown_tool"
	// OutcomeCanceled: the turn was cancelled while the call was in flight
	// (the sibling was sent notifications/cancelled) or before it was sent.
	OutcomeCanceled Outcome = "canceled"
	// OutcomeError: any other failure.
	OutcomeError Outcome = "error"
)

// An Event reports a delegation as it starts and as it finishes. Its JSON
// form is one line, suitable for an MCP progress notification's message.
type Event struct {
	Phase  Phase     `json:"phase"`
	RunID  string    `json:"run_id,omitempty"`
	Depth  int       `json:"depth"` // of the delegating agent on the chain
	CallID string    `json:"call_id"`
	Agent  string    `json:"agent"`
	Tool   string    `json:"tool"`
	Time   time.Time `json:"time"`

	// The fields below are set on PhaseFinish only.

	DurationMS float64 `json:"duration_ms,omitempty"`
	Outcome    Outcome `json:"outcome,omitempty"`
	// Code and Message are the JSON-RPC error's, when there was one.
	Code    int64  `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
	// Retried: the pool re-initialized the sibling's session and sent the
	// call once more. Recovered: and that succeeded.
	Retried   bool `json:"retried,omitempty"`
	Recovered bool `json:"recovered,omitempty"`
	// Replayed: the sibling answered from its record of an earlier send of
	// this call (its answer had been lost); the tool ran once.
	Replayed bool `json:"replayed,omitempty"`
}

// Duration returns the event's duration.
func (e Event) Duration() time.Duration {
	return time.Duration(e.DurationMS * float64(time.Millisecond))
}
