// Package builtin is the default model: an offline, deterministic planner
// behind the OpenAI chat-completions wire format. It is not a language
// model. It reads a task written in a small grammar, maps each step to one
// of the tools it is offered by their names, descriptions and JSON
// schemas, fills the arguments from the step's words, and answers with
// what each tool returned. When it cannot read a step with certainty it
// does not guess: it says what it could not read, as the chat API's
// "refusal". It lets an agent run, and the real OpenAI client code path be
// exercised end to end, on a machine that can reach no model.
//
// Serve it over HTTP with [Handler], or in-process, without a socket, with
// [Transport] and [BaseURL]. Requests and responses are the OpenAI ones:
// tools of type "function", assistant messages with tool_calls, tool
// messages with tool_call_id, "stream": true as server-sent events, errors as
// {"error":{"message":...,"type":"invalid_request_error"}}.
//
// # The grammar
//
// The task is the latest user message. It is split into steps at ", then",
// "and then", " then ", ";" and sentence ends (". ", "! ", "? "); a plain
// "and" never splits ("Alice and Bob" stays whole). A leading "please",
// "can you", "could you" or "would you" is dropped. Each step is read by
// the first of these rules that applies:
//
//  1. TOOL ARGS: the step starts with a tool's name, in full
//     ("packrat__store_note") or the part after "__" when only one server
//     has it ("store_note"). ARGS is a JSON object, or name=value pairs
//     (quote a value with spaces: title="weekly plan"), or words, read by
//     the argument rules below.
//  2. "tell me what you know about X", "what do you know about X", "tell
//     me about X": a search for X (without a leading "the", "a", "an") by
//     the one tool with search, find, recall or lookup in its name (else
//     its description), tried in that order.
//  3. Arithmetic: "what is E", "what's E", "how much is E", "calculate E",
//     "compute E", "evaluate E", a bare expression ("2+2"), and the word
//     forms "add A and B", "sum of A and B", "subtract A from B", "multiply
//     A by B", "divide A by B". Inside E: "P% of N" and "P percent of N"
//     become P/100*N, and plus, minus, times, multiplied by, divided by,
//     to the power of and square root of become operators. The expression
//     must be complete (numbers, pi, e, function calls, + - * / % ^,
//     parentheses): "calculate 2 +" is refused, naming what is wrong. It
//     goes to the one tool with a string parameter named "expression" (or
//     described as one).
//  4. VERB REST: the first word is a word of exactly one tool's name (else
//     of exactly one tool's description): "remember that X" reaches a tool
//     described as "Save (remember, ...)". Question words and pronouns
//     (what, how, is, tell, ...) are never verbs. "remember that X" and
//     "note that X" drop the "that".
//
// Two tools that fit a rule equally make the step ambiguous: it is refused,
// naming both, and a tool's name at the start of the step settles it.
//
// # Arguments
//
// Only required parameters are filled, in the order the schema lists them;
// optional ones are left out unless given as name=value.
//
//   - an expression parameter: the step's arithmetic (rule 3);
//   - a number or integer: the next number in the step's words;
//   - a string with an enum: the one enum value the words contain;
//   - the one string left: the rest of the words, verbatim; with several
//     strings left, each is "NAME value" in the words ("to mi" for a
//     parameter "to") and the last takes the rest;
//   - any other type (array, object, boolean): only as name=value or JSON.
//
// "the result", "that result", "the answer", "it", "that" and "this" (as
// the whole text of a step, or anywhere in its arithmetic) stand for the
// previous step's figure: the value after
// its last " = " ("2+2 = 4" gives 4), else its only number, else its first
// line. So "what is 2+2, then remember the result" stores "4". A required
// parameter the words cannot give is a refusal that names the parameter
// and its description.
//
// # Answers
//
// Steps run in order, one tool call per response, the next after the
// previous tool message arrives. The handler is stateless: the calls and
// tool messages after the latest user message say which steps are done.
// The answer has one line per step, "agent.tool: what it returned", so each
// figure names the tool that produced it; a tool message starting with
// "Error:" (how the runtime renders every failed delegation) is reported as
// "agent.tool failed: ...", and a later step that depends on its result is
// not done. A step not done is a line "I did not do ...: why", and then the
// response also carries that text as its "refusal", followed by the
// siblings the system prompt lists as unavailable.
//
// tool_choice "none" is a refusal (the model works only through tools); a
// named function restricts the tools to it; "required" plans as "auto".
// "n" above 1 is refused.
//
// Equal requests give byte-identical responses: "created" is 0 and the
// completion and tool-call ids derive from a hash of the request body.
package builtin
