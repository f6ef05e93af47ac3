// Package builtin is the default model: an offline, deterministic planner
// behind the OpenAI chat-completions wire format. It is not a language
// model. It reads a task, picks tools by matching words, fills their
// arguments by pattern, and reports what the tools returned. It lets an
// agent run, and the real OpenAI client code path be exercised end to end,
// on a machine that can reach no model.
//
// Serve it over HTTP with [Handler], or in-process, without a socket, with
// [Transport] and [BaseURL]. Requests and responses are the OpenAI ones:
// tools of type "function", assistant messages with tool_calls, tool
// messages with tool_call_id, "stream": true as server-sent events, errors as
// {"error":{"message":...,"type":"invalid_request_error"}}.
//
// # How it plans
//
// The task is the latest user message. It is split into steps at "then",
// "and then", ";", ", and" and sentence ends; a piece that does not start
// with a command ("remember", "search", "what is", a word of a tool's name)
// stays part of the step before it, so content like "Alice and Bob" is not
// cut. Each step gets the tool scoring highest on: the step's words (lightly
// stemmed) found in the tool's name (3 each), description and parameter
// names (1), parameter descriptions (0.5), plus a bonus when the step's
// command means what the tool's name does, through a small synonym table
// (remember/save/note → store, what do you know/find/look up → search,
// calculate/what is 2+2 → calculate, convert/5 km to miles → convert,
// days between/weekday → date). A step scoring under 3 calls nothing.
//
// Arguments come from the step by parameter: text/content → the step
// without its command ("remember that X" → "X"); query → the subject
// without stopwords ("tell me what you know about the launch" → "launch");
// expression → the arithmetic ("what is 12*(3+4)?" → "12*(3+4)", "multiply
// that by 2" → "84 * 2" after a result of 84); value/from/to → "5 km to
// miles"; dates and day counts by pattern; enums → the value the step
// names; id → "note 3", "#3", or the id in an earlier result; title and
// tags → "titled ...", "tagged ...". Optional parameters the step does not
// mention are left out; required ones are always filled, except that an id
// is never guessed: a step needing one that neither its words nor an
// earlier result give is not called, and the answer says why.
//
// Steps run in order, one tool call per response, the next after the
// previous tool message arrives. Steps joined by a plain "and" go out
// together as parallel tool calls when they are independent: the later one
// does not refer back ("it", "that") and they do not both go to one agent
// while one of them changes state. The handler is stateless: the calls and
// tool messages after the latest user message say which steps are done.
// When all are, the answer (finish_reason "stop") is built from the tool
// results, failures quoted as "agent.tool failed: message".
//
// tool_choice ("none", "required", a named function) and
// "parallel_tool_calls": false are honoured; "n" above 1 is refused.
//
// Equal requests give byte-identical responses: "created" is 0 and the
// completion and tool-call ids derive from a hash of the request body.
package builtin
