// Package studioapi is the studio's HTTP API as data: the JSON bodies of
// /api/agents, /api/overview, /api/delegations, /api/runs and
// /api/agents/<name>, the names of the series its /metrics serves, and the
// environment variables and address by which a client finds a studio.
//
// It holds types and constants only, and imports nothing outside the
// standard library, so that a client of the studio (`switchboard status`,
// `switchboard ask`) links the studio's words and none of the studio: not
// its proxy, its supervisor, its page or Prometheus.
package studioapi

import (
	"encoding/json"
	"time"
)

// EnvStudioURL is set in every agent's environment to the studio's base URL,
// so that an agent's tools/mcp.json can reach its siblings through the
// studio: "url": "${SWITCHBOARD_STUDIO_URL}/api/agents/packrat/mcp". Clients
// (`switchboard ask`, `switchboard status`) read it too.
const EnvStudioURL = "SWITCHBOARD_STUDIO_URL"

// EnvToken is the environment variable `switchboard up` reads its bearer
// token from, and clients the token they send.
const EnvToken = "SWITCHBOARD_TOKEN"

// EnvAgentKey is set in each agent's environment to a key of its own, which
// the bundled tools/mcp.json sends as HeaderAgentKey: the studio then knows
// that a delegation came from the agent it started, not only that the
// chain says so.
const EnvAgentKey = "SWITCHBOARD_AGENT_KEY"

// HeaderAgentKey carries an agent's key to the studio; the proxy does not
// forward it.
const HeaderAgentKey = "X-Switchboard-Agent-Key"

// DefaultListen is where `switchboard up` listens by default.
const DefaultListen = "127.0.0.1:54321"

// State is where an agent's process is in its life.
type State string

const (
	StateStarting   State = "starting"   // launched, not listening yet
	StateRunning    State = "running"    // listening; the proxy routes to it
	StateRestarting State = "restarting" // exited; waiting out the backoff until its retry time
	StateGivenUp    State = "given_up"   // failed GiveUpAfter times in a row; not restarted again
	StateStopped    State = "stopped"    // the studio stopped it
	// StateRemote: the agent runs on another host (its agent.json gives a
	// url); the studio proxies to it and starts nothing. Whether it
	// answers is AgentInfo.Remote.Reachable.
	StateRemote State = "remote"
)

// GiveUpAfter consecutive failed runs give an agent up: it is not
// restarted again until it is started on request. With the default
// backoff (250 ms doubling to 30 s) that is about a minute of retries: long
// enough for a port or a peer to come back, short enough that a broken
// agent.json is reported as broken.
const GiveUpAfter = 8

// AgentInfo is one agent as /api/agents shows it.
type AgentInfo struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	State       State  `json:"state"`
	Restarts    int    `json:"restarts"`
	// PID is the agent process's id while it has one.
	PID int `json:"pid,omitempty"`
	// URL is the agent's MCP endpoint through the studio.
	URL string `json:"url"`
	// Tools are the names of the agent's tools, listed over MCP when it is
	// running; ToolsError says why they could not be.
	Tools      []string `json:"tools"`
	ToolsError string   `json:"tools_error,omitempty"`
	// LastError says why the agent last exited, and LastErrorAt when,
	// while it is not running; once it runs again both are empty and
	// LastExit keeps the reason, as history.
	LastError   string     `json:"last_error,omitempty"`
	LastErrorAt *time.Time `json:"last_error_at,omitempty"`
	LastExit    string     `json:"last_exit,omitempty"`
	// RetryAt is when a restarting agent's next start begins;
	// ConsecutiveFailures counts its failed runs in a row (it is given up
	// after GiveUpAfter).
	RetryAt             *time.Time `json:"retry_at,omitempty"`
	ConsecutiveFailures int        `json:"consecutive_failures,omitempty"`
	// Model is the model the agent's turns run (its ask tool); nil from a
	// studio that does not say.
	Model *AgentModel `json:"model,omitempty"`
	// Remote is where an agent in StateRemote runs and whether it
	// answers; nil for an agent the studio runs.
	Remote *RemoteAgent `json:"remote,omitempty"`
}

// RemoteAgent is an agent that runs on another host, as the studio sees
// it. It never carries a credential: URL is the agent.json's url without
// user info, query and fragment, and the token (agent.json's token_env)
// is never shown, only whether it is set.
type RemoteAgent struct {
	// URL is the agent's own MCP endpoint, where the studio proxies to.
	URL string `json:"url"`
	// Reachable: the last check of the agent's /healthz (beside its MCP
	// endpoint) was answered 200, at CheckedAt; Error says why not.
	// CheckedAt is absent before the first check.
	Reachable bool       `json:"reachable"`
	CheckedAt *time.Time `json:"checked_at,omitempty"`
	Error     string     `json:"error,omitempty"`
	// Since is when Reachable last changed.
	Since *time.Time `json:"since,omitempty"`
	// TokenEnv names the environment variable whose value the studio
	// sends as the agent's bearer token; empty: none is sent.
	TokenEnv string `json:"token_env,omitempty"`
	// Metrics is what became of the last scrape of the agent's /metrics:
	// MetricsServed, MetricsNone (it has none: 404), MetricsFailed, or
	// empty before the first scrape.
	Metrics string `json:"metrics,omitempty"`
}

// RemoteAgent.Metrics values.
const (
	MetricsServed = "served"
	MetricsNone   = "none"
	MetricsFailed = "failed"
)

// AgentModel is the model an agent's turns run, as the agent resolves it
// (agent.json's model, under the OPENAI_BASE_URL and OPENAI_MODEL of the
// environment the studio starts it with). It never carries the API key,
// which a client cannot compare and must not see.
type AgentModel struct {
	// Name is the model name the chat requests carry.
	Name string `json:"name"`
	// Endpoint is ModelEndpointBuiltin, or the chat API's base URL without
	// its user info, query and fragment (where a credential could be).
	Endpoint string `json:"endpoint"`
}

// ModelEndpointBuiltin is AgentModel.Endpoint for the embedded builtin
// model, which no request leaves the agent's process for.
const ModelEndpointBuiltin = "builtin"

// Events of an agent's history.
const (
	EventExited    = "exited"    // the agent exited on its own; Reason says how
	EventRestarted = "restarted" // restarted on request
	EventStopped   = "stopped"   // stopped on request
	EventStarted   = "started"   // started again on request after a stop
)

// ControlEvent is one entry of an agent's history.
type ControlEvent struct {
	Time   time.Time `json:"time"`
	Event  string    `json:"event"`
	Reason string    `json:"reason,omitempty"`
	// NextStart is when the supervisor starts it again, after an exit.
	NextStart time.Time `json:"next_start,omitzero"`
}

// Delegation is one tools/call through the proxy.
type Delegation struct {
	// ID increases with every call, so a poller can tell new ones.
	ID    int64     `json:"id"`
	Start time.Time `json:"start"`
	// Agent and Tool are the callee; From is the delegating agent, from the
	// call's delegation chain, or empty for a client outside the fleet
	// (`switchboard ask`).
	Agent string `json:"agent"`
	Tool  string `json:"tool"`
	From  string `json:"from,omitempty"`
	// FromSource says how the studio knows From: FromSourceAgent when the
	// call came from the agent process the studio runs under that name
	// (it carried that agent's key), FromSourceClaimed when only the
	// chain in the call's _meta says so, which any client can write.
	FromSource string `json:"from_source,omitempty"`
	RunID      string `json:"run_id,omitempty"`
	// Outcome is "running" until the response ends, then "ok" or an error
	// kind (see switchboard_agent_request_errors_total).
	Outcome    string  `json:"outcome"`
	DurationMS float64 `json:"duration_ms"`
	// Message is the error's message, when there was one.
	Message string `json:"message,omitempty"`
	// Recovery says how the pool recovered this call, or tried to.
	Recovery string `json:"recovery,omitempty"`
	TraceID  string `json:"trace_id,omitempty"`
	// Status is what the call's result says of how it ended, beyond its
	// outcome: an ask's turn status (Ask*), or the person's answer to a
	// confirmation the tool asked (StatusDeclined...). It says truthfully
	// what a tool_error was.
	Status string `json:"status,omitempty"`
}

// How From is known.
const (
	FromSourceAgent   = "agent"
	FromSourceClaimed = "claimed"
)

// Outcomes and recoveries a Delegation shows.
const (
	OutcomeRunning = "running"

	RecoveryExpired   = "session expired"                           // a 404, no retry seen (yet)
	RecoveryRetried   = "session expired; retried on a new session" // a 404 whose retry came
	RecoveryRetrying  = "retrying on a new session"                 // the retry, running
	RecoveryRecovered = "recovered: retried on a new session"       // the retry, succeeded
	RecoveryFailed    = "retried on a new session; failed again"    // the retry, failed
)

// PoolInfo is one process's MCP session pool, as the page and `switchboard
// status` show it.
type PoolInfo struct {
	Process           string `json:"process"`
	Open              int64  `json:"open"`
	InUse             int64  `json:"in_use"`
	Idle              int64  `json:"idle"`
	Dials             int64  `json:"dials"`
	Reinitializations int64  `json:"reinitializations"`
	Retries           int64  `json:"retries"`
	Invalidations     int64  `json:"invalidations"`
	// Keyed calls to servers that advertise idempotency (docs/IDEMPOTENCY.md):
	// answers replayed from the server's record, keys refused as used for
	// another call, and calls a crash of the server cut off.
	Replays     int64 `json:"replays"`
	Conflicts   int64 `json:"conflicts"`
	Interrupted int64 `json:"interrupted"`
	// Protocols counts the live sessions by the MCP version each
	// negotiated (pool.Stats.Protocols): which era the process speaks to
	// its servers in.
	Protocols map[string]int64 `json:"protocols,omitempty"`
}

// Overview is what the fleet page shows, and GET /api/overview.
type Overview struct {
	URL         string       `json:"url"`
	Time        time.Time    `json:"time"`
	Agents      []AgentInfo  `json:"agents"`
	Pools       []PoolInfo   `json:"pools"`
	Delegations []Delegation `json:"delegations"`
}

// LogLine is one line an agent wrote.
type LogLine struct {
	Time time.Time `json:"time"`
	Line string    `json:"line"`
}

// ToolInfo is one tool with its schema.
type ToolInfo struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
}

// Minute is one point of an agent's charts.
type Minute struct {
	Time        time.Time `json:"time"`
	Calls       int       `json:"calls"`
	Errors      int       `json:"errors"`
	Initializes int       `json:"initializes"`
	Expired     int       `json:"expired"`
	// P50MS, P95MS and P99MS are upper bounds of the latency histogram's
	// bucket holding that percentile (within a factor of 1.5); 0 without calls.
	P50MS float64 `json:"p50_ms"`
	P95MS float64 `json:"p95_ms"`
	P99MS float64 `json:"p99_ms"`
}

// AgentDetail is GET /api/agents/<name>.
type AgentDetail struct {
	AgentInfo
	History     []ControlEvent `json:"history"`
	ToolSchemas []ToolInfo     `json:"tool_schemas"`
	Calls       []Delegation   `json:"calls"`
	Logs        []LogLine      `json:"logs"`
	Pool        *PoolInfo      `json:"pool,omitempty"`
	Series      []Minute       `json:"series"`
}

// CallResult is the answer to POST /api/agents/<name>/call.
type CallResult struct {
	Tool    string `json:"tool"`
	IsError bool   `json:"is_error"`
	// Text is the result's text content; Result the whole result, redacted.
	Text   string          `json:"text"`
	Result json.RawMessage `json:"result"`
}

// Hop is one call of a run, as the run page shows it.
type Hop struct {
	Delegation
	Depth int `json:"depth"`
	// OffsetMS is when the call started, from the start of the run.
	OffsetMS  float64 `json:"offset_ms"`
	Arguments string  `json:"arguments,omitempty"`
	Result    string  `json:"result,omitempty"`
	// Text is the result's text: what the calling model read.
	Text     string  `json:"text,omitempty"`
	HeldMS   float64 `json:"held_ms,omitempty"`
	Replayed bool    `json:"replayed,omitempty"`
	// Badge and Tone are how the page shows the outcome truthfully: a call
	// whose session expired but whose retry succeeded is "recovered", not
	// a failure.
	Badge string `json:"badge"`
	Tone  string `json:"tone"`
	// Usage, NestedUsage and StepUsage are what an ask's turn reported it
	// cost (its structuredContent): Usage includes NestedUsage, the turns
	// of the siblings it asked.
	Usage       Usage       `json:"usage,omitzero"`
	NestedUsage Usage       `json:"nested_usage,omitzero"`
	StepUsage   []StepUsage `json:"step_usage,omitempty"`
	// Reason is why an ask's turn did not answer fully (its status is
	// Delegation.Status). Calls are the tool calls its turn reported
	// (at most MaxAgentCalls, CallsLeft more), Resumed that it went on
	// from its journal.
	Reason    string      `json:"reason,omitempty"`
	Calls     []AgentCall `json:"calls,omitempty"`
	CallsLeft int         `json:"calls_left,omitempty"`
	Resumed   bool        `json:"resumed,omitempty"`
	// TurnRun is the run id an ask's turn names in its result (its
	// structuredContent.run_id): the id its agent's journal knows the turn
	// by, whose steps the agent shows (GET /runs/<id>/steps/<n>).
	TurnRun string `json:"turn_run,omitempty"`
}

// RunSummary is one run in the list.
type RunSummary struct {
	ID          string    `json:"id"`
	Task        string    `json:"task,omitempty"`
	Agent       string    `json:"agent"`
	Tool        string    `json:"tool"`
	Start       time.Time `json:"start"`
	DurationMS  float64   `json:"duration_ms"`
	Outcome     string    `json:"outcome"`
	Badge       string    `json:"badge"`
	Tone        string    `json:"tone"`
	Delegations int       `json:"delegations"`
	Failures    int       `json:"failures"`
	Recovered   int       `json:"recovered"`
	// Refused counts the calls a tool answered with its own error (a
	// refusal in its words, isError), which are not failures of the run.
	Refused int `json:"refused,omitempty"`
	// ModelMS and ToolMS are the time the run's own ask spent in model
	// requests and in the tool calls its turn made.
	ModelMS float64 `json:"model_ms,omitempty"`
	ToolMS  float64 `json:"tool_ms,omitempty"`
	Steps   int     `json:"steps,omitempty"`
	// Usage is what the run's model turns cost, as their asks reported
	// it, each turn counted once: a top-level ask's usage already holds
	// the nested asks it caused, so a nested ask is added only when no ask
	// of its caller in the run reported one (observe.runView.usage).
	// Zero while no ask of the run has answered.
	Usage Usage `json:"usage,omitzero"`
}

// Run is one run in full, GET /api/runs/<id>.
type Run struct {
	RunSummary
	Answer string `json:"answer,omitempty"`
	// StepUsage is the run's own ask's steps (the root hop's), what each
	// model step sent and cost.
	StepUsage []StepUsage `json:"step_usage,omitempty"`
	Hops      []Hop       `json:"hops"`
	// The run has HopsTotal hops; Hops are at most MaxRunHops of them,
	// from HopsFrom on (?from=).
	HopsFrom  int `json:"hops_from"`
	HopsTotal int `json:"hops_total"`
}

// MaxRunHops bounds the hops one run page shows.
const MaxRunHops = 200

// RunList is GET /api/runs.
type RunList struct {
	Runs []RunSummary `json:"runs"`
	// Next is the before= of the next page, 0 when this is the last.
	Next    int64 `json:"next,omitempty"`
	Version int64 `json:"version"`
}

// Metric names the studio's /metrics defines (the shared ones, which the
// agents serve too, are in package telemetry).
const (
	MetricRequests        = "switchboard_agent_requests_total"
	MetricRequestDuration = "switchboard_agent_request_duration_seconds"
	MetricRequestErrors   = "switchboard_agent_request_errors_total"
	MetricToolCalls       = "switchboard_tool_calls_total"
	MetricToolDuration    = "switchboard_tool_call_duration_seconds"
	MetricAgentUp         = "switchboard_agent_up"
	MetricAgentState      = "switchboard_agent_state"
	MetricAgentRestarts   = "switchboard_agent_restarts_total"
	MetricProxySessions   = "switchboard_proxy_sessions"
	MetricAgentMetricsUp  = "switchboard_agent_metrics_up"
)

// Metric names of the model requests an agent's turns make, served by each
// agent (labelled process=<agent>) and federated into the studio's
// /metrics. Their meaning follows the OpenTelemetry GenAI client metrics
// (gen_ai.client.operation.duration, gen_ai.client.token.usage), as
// Prometheus counters in base units: what a dashboard sums and rates.
const (
	// MetricModelRequests counts chat requests (each attempt, retries
	// included), labelled model and outcome: ok, retried (failed and sent
	// again), failed (for good), canceled (the turn's caller went away).
	MetricModelRequests = "switchboard_model_requests_total"
	// MetricModelRequestDuration is each attempt's time, from sending the
	// request to its answer or failure, labelled model.
	MetricModelRequestDuration = "switchboard_model_request_duration_seconds"
	// MetricModelTokens counts the tokens endpoints reported, labelled model
	// and kind (TokenKind*). Cached tokens are part of the prompt tokens
	// and reasoning tokens part of the completion tokens: a total is the
	// sum of prompt and completion only.
	MetricModelTokens = "switchboard_model_tokens_total"
	// MetricModelCost is what the tokens cost in US dollars by the agent's
	// price table, labelled model; absent for a model without a price.
	MetricModelCost = "switchboard_model_cost_usd_total"
)

// Kinds of MetricModelTokens: prompt is gen_ai.token.type "input" and
// completion "output"; cached and reasoning are the parts of them the
// endpoint itemized (prompt_tokens_details.cached_tokens,
// completion_tokens_details.reasoning_tokens).
const (
	TokenKindPrompt     = "prompt"
	TokenKindCompletion = "completion"
	TokenKindCached     = "cached"
	TokenKindReasoning  = "reasoning"
)

// Usage is what model requests cost, as the ask tool's result reports it
// (runtime.Usage, structuredContent.usage): the tokens the endpoints
// counted and, when the agent has a price for the model, the cost.
type Usage struct {
	Requests         int `json:"requests"`
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	// CachedTokens are part of PromptTokens, ReasoningTokens part of
	// CompletionTokens.
	CachedTokens    int     `json:"cached_tokens,omitempty"`
	ReasoningTokens int     `json:"reasoning_tokens,omitempty"`
	TotalTokens     int     `json:"total_tokens"`
	CostUSD         float64 `json:"cost_usd,omitempty"`
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

// StepUsage is one model step of an ask's turn: its request's size as
// sent, how many times it was sent, and what it cost (runtime.StepUsage).
type StepUsage struct {
	Step         int   `json:"step"`
	RequestBytes int   `json:"request_bytes"`
	Attempts     int   `json:"attempts"`
	Usage        Usage `json:"usage"`
	// Start and DurationMS are the step's span (its retries included);
	// Replayed: answered from the run's journal, not asked.
	Start      time.Time `json:"start,omitzero"`
	DurationMS float64   `json:"duration_ms,omitempty"`
	Replayed   bool      `json:"replayed,omitempty"`
	// Trimmed is how many earlier tool results were left out of the
	// request to fit the model's context.
	Trimmed int `json:"trimmed,omitempty"`
	// FinishReason and ToolCalls are what the model's answer chose (the
	// tool names as the model wrote them; ToolCallsLeft more not listed).
	FinishReason  string   `json:"finish_reason,omitempty"`
	ToolCalls     []string `json:"tool_calls,omitempty"`
	ToolCallsLeft int      `json:"tool_calls_left,omitempty"`
	// Truncated are the results of the step's tool calls that the model was
	// sent cut to the agent's context budget (runtime.Truncated);
	// TruncatedLeft more were cut and not listed.
	Truncated     []Truncated `json:"truncated,omitempty"`
	TruncatedLeft int         `json:"truncated_left,omitempty"`
}

// Truncated is a tool result the model was sent cut: Sent bytes of its
// Original text (runtime.Truncated).
type Truncated struct {
	CallID   string `json:"call_id"`
	Tool     string `json:"tool"`
	Sent     int    `json:"sent"`
	Original int    `json:"original"`
}

// AgentCall is one tool call an ask's turn made, as the agent reported it
// in its result (runtime.Result's delegations, delegation.Event): to a
// sibling through the studio, or to any server the agent's tools/mcp.json
// names (stdio or HTTP, third-party included), which the studio's proxy
// never sees.
type AgentCall struct {
	// Server is the server's name in the agent's tools/mcp.json (a
	// sibling's is its agent name), Tool the tool's MCP name.
	Server     string    `json:"server"`
	Tool       string    `json:"tool"`
	Start      time.Time `json:"start,omitzero"`
	DurationMS float64   `json:"duration_ms"`
	// Outcome is delegation.Outcome: ok, tool_error, bad_arguments,
	// unknown_tool, canceled, error, interrupted.
	Outcome string `json:"outcome"`
	Message string `json:"message,omitempty"`
	// Retried: the pool re-initialized the server's session and sent it
	// once more (Recovered: and that worked). Replayed: the server
	// answered from its record of an earlier send.
	Retried   bool `json:"retried,omitempty"`
	Recovered bool `json:"recovered,omitempty"`
	Replayed  bool `json:"replayed,omitempty"`
	// RepairedFrom is the name the model wrote, when the agent routed
	// another spelling of the tool to it (runtime.NameRepair).
	RepairedFrom string `json:"repaired_from,omitempty"`
	// Proxied: the call went through the studio's proxy, so it is also a
	// hop of the run of its own (a sibling's tool).
	Proxied bool `json:"proxied,omitempty"`
}

// MaxAgentCalls bounds the calls kept of one ask.
const MaxAgentCalls = 200

// Statuses of an ask's turn (runtime.Status), in its structuredContent.
const (
	AskAnswered         = "answered"
	AskNotAnswered      = "not_answered"
	AskDelegationFailed = "delegation_failed"
	AskUnavailable      = "unavailable"
	AskFailed           = "failed"
)

// Statuses of a tool's error result that carries the person's answer to
// the confirmation it asked (structuredContent.action).
const (
	StatusDeclined     = "declined"
	StatusCancelled    = "cancelled"
	StatusNotConfirmed = "not confirmed"
)
