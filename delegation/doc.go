// Package delegation turns sibling agents' MCP tools into model tools and
// runs the model's tool calls through the pool: stable namespaced names,
// bounded concurrent fan-out, the delegation chain in _meta, and failures
// rendered as tool results a model can act on. Package runtime uses it for
// every turn; use it directly to drive a model loop of your own.
//
// # Discovering tools
//
// [Discover] lists the tools of every server of an mcp.json (and of
// [DiscoverOptions.Servers]) concurrently, through a [Caller] (a
// [*pool.Pool]), and returns a [Toolbox]: each tool as a [Target] with its
// model tool name and its input schema mapped for a chat API
// ([Parameters]), and what could not be offered, and why
// ([Toolbox.Unavailable], as [*DiscoveryError]s). Model tool names are
// <agent>__<tool> within ^[a-zA-Z0-9_-]{1,64}$ ([ToolName]); names that
// would collide get a hash suffix that depends only on the set of tools, so
// a name is the same in every run and process.
//
// # Running tool calls
//
// An [Executor] runs one model response's [Call]s: at most
// [Executor.Limit] at a time, each with the turn's context (cancelling it
// sends the sibling notifications/cancelled), each bounded by its server's
// mcp.json "timeout". Results come back in the model's order. Run never
// fails: a failure is a [Result] with IsError set, an [Outcome], and a
// Content written for the model that names the agent, the tool, the
// JSON-RPC code and message, and what the pool did about it (a session
// re-initialized and the call sent once more, an outcome unknown and not
// resent). [Executor.OnEvent] hears each delegation start and finish, as an
// [Event] whose JSON is one line. Each delegation to a sibling that
// advertises idempotency carries a key, stable across the pool's resends;
// under [WithParentKey] it is derived from the caller's key, so that a turn
// run again for the same request is answered from the siblings' records.
//
// # The delegation chain
//
// A task's path through agents is a [Chain]: its run id and the agents it
// has passed through. An agent enters the chain before it delegates
// ([Chain.Enter] refuses a cycle, [ErrCycle], and a chain past the agent's
// max_depth, [ErrDepth]); the Executor sends it in the _meta of every
// tools/call under [MetaKey]; an agent serving a call reads it back with
// [FromMeta] (or [RefuseUnreadable] on the raw bytes, before decoding) and
// refuses a chain it cannot read ([ErrMalformed]). The checks are bounded
// ([MaxChainDepth], [MaxChainBytes]), whatever a caller sends.
package delegation
