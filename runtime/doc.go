// Package runtime runs an agent's model turn: messages to an
// OpenAI-compatible chat API, tool calls delegated through the pool, tool
// results back, until the model answers or the step limit is reached.
//
// # Running a turn
//
// An agent is a folder (package [agentdef]); its MCP client is a
// [pool.Pool], which the caller owns and closes; a turn runs as part of a
// [delegation.Chain] that the agent has entered:
//
//	def, err := agentdef.Load("agents/oracle")
//	if err != nil {
//		return err // a *mcpconfig.ConfigError naming the file and field
//	}
//	p := pool.New(nil)
//	defer p.Close()
//	agent, err := runtime.New(def, p, nil)
//	if err != nil {
//		return err
//	}
//	chain, err := delegation.Chain{}.Enter(def.Name, def.MaxDepth)
//	if err != nil {
//		return err
//	}
//	res, err := agent.Run(ctx, "what is 6 times 7?", chain)
//
// An [Agent] is safe for concurrent use; each Run is an independent turn.
// An agent serving a tools/call continues its caller's chain instead
// ([delegation.FromMeta], then [delegation.Chain.Enter]), so that cycles and
// depth are refused across processes.
//
// # What a turn returns
//
// A turn discovers the tools of the agent's siblings (its tools/mcp.json,
// and [Options.Servers] first) through the pool, offers them to the model
// under delegation's names (<agent>__<tool>), and runs each response's tool
// calls concurrently through a [delegation.Executor]. A failed delegation
// is a tool message the model reads, never an error of the turn: it shows
// in [Result.Status] ([StatusDelegationFailed], [StatusUnavailable],
// [StatusNotAnswered]; [StatusAnswered] only when the task was done with
// every delegation succeeding) and [Result.Delegations]. Run returns an
// error only when the turn itself could not go on: the model settings are
// incomplete ([ErrNoModel]), the chat API failed ([ErrModel], with
// [ErrModelTimeout] for a request that got no answer in time; a failure
// that passes, such as a 429, a 5xx or a reset connection, is first sent
// again up to [Options.MaxRetries] times, see [DefaultMaxRetries]), the model
// kept calling tools for max_steps completions ([ErrStepLimit]), or ctx
// ended. The Result is returned with the error, saying what the turn did
// before it ended.
//
// Some endpoints speak the wire format in their own way; a turn takes
// what they mean. Tool-call arguments sent as a JSON object, an error
// object in a 200 answer, an empty choices list, tool names written as
// "abacus.calculate" or "functions.abacus__calculate" (routed to the one
// offered tool they spell, and listed in [Result.NameRepairs]). An answer
// that is empty, cut at the output limit, filtered or refused is
// [StatusNotAnswered], saying which. What the model thought
// (reasoning_content, <think> blocks) is in [Result.Reasoning], never in
// [Result.Answer]; reasoning_content goes back to the model within the
// turn. docs/FAULTS.md ("Model endpoints") has the whole table.
//
// # The model
//
// Each setting is taken from the first place that has it:
//
//	base URL: Options.BaseURL, $OPENAI_BASE_URL, agent.json model.base_url
//	name:     Options.Model, $OPENAI_MODEL, agent.json model.name
//	API key:  Options.APIKey, $OPENAI_API_KEY, $<agent.json model.api_key_env>
//
// ([Options.Getenv] replaces the environment). No base URL, or the base URL
// [BuiltinModel], selects package [builtin]: a deterministic offline planner
// served in-process behind the same OpenAI wire format, so the go-openai
// client code runs the same for every model. Any other base URL is an
// OpenAI-compatible endpoint (OpenAI, Ollama, vLLM, a scripted test
// server). The API key is only ever sent as the bearer token; it is scrubbed
// from errors and never logged.
//
// # Watching a turn
//
// [Options.OnEvent] and a context from [WithEventHandler] are told of each
// delegation as it starts and finishes ([delegation.Event]);
// [WithNoteHandler] hears what the caller should know before the answer
// (a sibling that could not be offered); [Options.Logger] gets one line per
// step and delegation. Each model request is an OpenTelemetry client span
// "chat <model>" under the caller's span, and each delegation a span
// "execute_tool <name>", from the global tracer provider.
package runtime
