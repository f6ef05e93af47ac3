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
// "and then", " then ", ";" and sentence ends (". ", "! ", "? "), and at
// an "and" that begins a step (below). A leading "please", "can you",
// "could you" or "would you" is dropped. Each step is read by the first of
// these rules that applies:
//
//  1. TOOL ARGS: the step starts with a tool's name, in full
//     ("packrat__store_note") or the part after "__" when only one server
//     has it ("store_note"). ARGS is a JSON object, or name=value pairs
//     (quote a value with spaces: title="weekly plan"), or words, read by
//     the argument rules below.
//  2. "tell me what you know about X", "what do you know about X", "tell
//     me about X": a search for X (without a leading "the", "a", "an") by
//     the one tool with search, find, recall or lookup in its name (else
//     among its description's verbs), tried in that order.
//  3. The questions the date and unit tools' descriptions ask, to the one
//     tool whose parameters fit (a string "date" and an enum listing the
//     operation; a number, "from" and "to"):
//     "how many days between A and B" (also "from A to B", "the number of
//     days between"), "how many days until B" (from today), "how many days
//     since A" (to today): operation between;
//     "what weekday is D", "what day of the week is D" (also was, will be,
//     "which weekday does D fall on", "the weekday of D"): weekday;
//     "what date is N days after D" (weeks, months, years; after, from,
//     before), "N weeks before D", "add N days to D", "subtract N months
//     from D", "D plus N days": add or subtract, N a whole number;
//     "how many grams in 3.5 pounds" (also "are in", "are there in", "how
//     many miles is 5 km"), "convert 5 km to mi" (change, turn; to, into,
//     in), "what is 100 °F in °C", "5 km in miles": value, from and to,
//     the units verbatim and in their case (Mb is a megabit, MB a
//     megabyte) for the tool to judge; "a", "an" and "one" are 1.
//     A date is passed as the tool reads it, YYYY-MM-DD or "today", from
//     any of: 2026-03-01, 2026/03/01, March 1, 2026, Mar 1 2026, March
//     1st, 2026, 1 March 2026, the 1st of March 2026, a numeric date whose
//     reading is certain (13/04/2026, 04/04/2026), and "it" or "the
//     result" for the previous step's date. A numeric date that reads two
//     ways (03/04/2026: March 4 or April 3), a date without its year
//     ("March 1"), a day the month does not have, and anything else
//     ("next Friday") are refused, naming the date.
//  4. Arithmetic: "what is E", "what's E", "how much is E", "calculate E",
//     "compute E", "evaluate E", "work out E", "figure out E", a bare
//     expression ("2+2"), and the word forms "add A and B", "sum of A and
//     B", "subtract A from B", "multiply A by B", "divide A by B", "the
//     product of A and B", "the difference between A and B", "the
//     quotient of A and B", "the average of A, B and C" (or mean), "round
//     X to N decimal places" (round(X, N)), "what percent of N is M",
//     "what percent is M of N" and "M is what percent of N" (M / N * 100).
//     Inside E: "P% of N" and "P percent of N" become P/100*N (the tool's
//     % is the remainder), "square root of N" becomes sqrt(N), "squared"
//     and "cubed" become ^2 and ^3, and plus, minus, times, multiplied by,
//     divided by and to the power of become operators. The expression must
//     be complete (numbers, pi, e, function calls, + - * / % ^,
//     parentheses): "calculate 2 +" is refused, naming what is wrong. It
//     goes to the one tool with a string parameter named "expression" (or
//     described as one).
//  5. VERB REST: the first word is a verb exactly one tool offers: a word
//     of its name, else one of its description's verbs, which are the
//     description's first word and the words of a parenthesis opening
//     within its first three words ("Save (remember, record, archive) a
//     piece of text" offers save, remember, record and archive). Not every
//     word of a description: it also says "pass" and "text", and "text
//     Bob" is not a request to store "Bob". Question words, pronouns,
//     joining words (and, or, to, of, ...), numbers and "today" are never
//     verbs. "remember that X" and "note that X" drop the "that", and
//     "note that X" is read as "remember that X" when "note" names several
//     tools (store_note, get_note, ...).
//
// Two tools that fit a rule equally make the step ambiguous: it is refused,
// naming both, and a tool's name at the start of the step settles it.
//
// # "and"
//
// A plain "and" is part of the text around it unless the words after it
// begin a step of their own: a tool's name, a tool's verb, or one of the
// phrases of rules 2 to 4 other than a bare expression. So "remember that
// the launch moved to Friday and work out 17% of 2340" is two steps, a note
// "the launch moved to Friday" and the arithmetic, while "remember that
// Alice and Bob met", "remember the numbers 3 and 4", "add 2 and 3" and
// "how many days between March 1, 2026 and March 9, 2026" are one step
// each. Each "and" that begins a step splits ("add 2 and 3 and remember
// the result" is two steps); one inside quotes or a JSON object never
// does. Once split, each side must read as a whole step on its own, or the
// task is refused (next section). A step with more than 32 "and"s is
// refused: its steps are to be separated with "then" or ";".
//
// # Certain or refused
//
// The whole task is read before any of it is done. A part that cannot be
// read with certainty (no rule applies, a rule applies but its words do
// not read completely, two tools fit equally, a date is ambiguous) is
// refused: the answer, as the chat API's "refusal", is "I can't tell what
// to do with "PART": why." for each such part, and when the task has other
// parts, "I did none of the task, so that no part of it is done without
// the rest", naming them. No tool is called: a note is not stored while
// the arithmetic beside it is dropped. The runtime reports such a turn as
// not answered, with the refusal as the reason. A step that uses the
// previous step's result is read, up front, with a stand-in number (or
// date); read
// again with the real result when its turn comes, it may still turn out
// unreadable, and is then refused in the answer beside what was done. A
// task longer than 16 KiB is refused whole: the grammar is for short
// tasks, and the bound keeps the cost of reading one small.
//
// # Arguments
//
// Rule 3's phrases fill their tool's parameters by role (operation, date,
// end_date, amount, unit; value, from, to), optional ones included. For the
// other rules only required parameters are filled, in the order the schema
// lists them; optional ones are left out unless given as name=value.
//
//   - an expression parameter: the step's arithmetic (rule 4);
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
// "agent.tool failed: ...", and a later step that cannot be read without
// its result is not done: "I did not do ...: it may depend on the step
// before, which failed". Whenever a step is not done the response also
// carries those lines as its "refusal", followed by the siblings the
// system prompt lists as unavailable.
//
// tool_choice "none" is a refusal (the model works only through tools); a
// named function restricts the tools to it; "required" plans as "auto".
// "n" above 1 is refused.
//
// Equal requests give byte-identical responses: "created" is 0 and the
// completion and tool-call ids derive from a hash of the request body.
package builtin
