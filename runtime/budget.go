package runtime

// The context budget: what a turn puts into the model's context is
// bounded, whatever the tools return and however many they are. Before it,
// a tool that returned 1 MB made a 1,044,558-byte request, which a model
// of 128k tokens refuses (or, on Ollama, silently truncates from the
// front, losing the instructions), and a server with thousands of tools
// sent all of them every step.
//
//   - Each tool result goes to the model cut to MaxToolResultBytes of text,
//     at a UTF-8 boundary, with a note that says how much was left out
//     and, when the tool's parameters page, how to ask for the rest.
//   - All the tool results of one request, earlier steps' included, share
//     MaxToolResultsBytes: this step's results split it (a small result
//     keeps all of its text, the large ones share the rest), and the
//     oldest results of earlier steps are left out, each replaced by a
//     note of its size, until the rest fits.
//   - At most MaxTools tools are offered, the agent's own first, then its
//     mcp.json servers' in order; the system prompt and Result.ToolsLeftOut
//     say how many of which server's were left out.
//   - A context_length_exceeded answer (ErrContextLength) is met once per
//     step by leaving out the oldest tool results until at most half of
//     the tool text remains, and asking again; a second one fails the turn,
//     naming the sizes and what to set.
//
// Only the model's copy is cut: the delegations, their events and the
// turn's record keep every result whole.
//
// The bounds are in bytes of text, what the model reads, not of the
// request's JSON: Go's encoder writes <, > and & as \u003c, so a result of
// HTML can take up to six times its text on the wire while costing the
// model no more tokens.

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sashabaranov/go-openai"
	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// The defaults of the context budget, for a model of 128k tokens (OpenAI's
// gpt-4o family; Llama 3.1; Qwen2.5 at its full length) with room to spare.
// Text runs at 3 to 4 bytes a token (JSON and code nearer 3), so:
const (
	// DefaultMaxToolResultBytes is 64 KiB of one result: some 16k to 22k
	// tokens, enough to read a long page or a large file's relevant part.
	DefaultMaxToolResultBytes = 64 << 10
	// DefaultMaxToolResultsBytes is 192 KiB of all of a request's results,
	// some 48k to 64k tokens: with 128 tools offered (at 100 to 300 tokens
	// a tool, up to about 38k) and the instructions and the task, that
	// leaves more than 20k tokens for the answer.
	DefaultMaxToolResultsBytes = 192 << 10
	// DefaultMaxTools is OpenAI's documented limit of tools in one chat
	// request (it answers 400 past it); no model chooses well among more.
	DefaultMaxTools = 128
)

// ErrContextLength is wrapped (with ErrModel) by the error of a model
// request the endpoint refused as longer than the model's context. A turn
// meets the first of a step by leaving out old tool results and asking
// again; a second fails the turn with it.
var ErrContextLength = errors.New("the request is longer than the model's context")

// budget is an agent's resolved context bounds.
type budget struct {
	resultBytes  int // of one tool result's text
	resultsBytes int // of all the tool results' text of one request
	tools        int // offered in one request
}

// resolveBudget resolves the bounds: Options, then agent.json's "context",
// then the defaults. One result may not be larger than all of them: it is
// held to their bound.
func resolveBudget(def *agentdef.Definition, opts *Options) budget {
	b := budget{
		resultBytes:  cmp.Or(max(opts.MaxToolResultBytes, 0), def.Context.MaxToolResultBytes, DefaultMaxToolResultBytes),
		resultsBytes: cmp.Or(max(opts.MaxToolResultsBytes, 0), def.Context.MaxToolResultsBytes, DefaultMaxToolResultsBytes),
		tools:        cmp.Or(max(opts.MaxTools, 0), def.Context.MaxTools, DefaultMaxTools),
	}
	b.resultBytes = min(b.resultBytes, b.resultsBytes)
	return b
}

// ToolsLeftOut is how many of a server's tools a turn did not offer the
// model, past the bound on tools per request (MaxTools).
type ToolsLeftOut struct {
	Server  string `json:"server"`
	Offered int    `json:"offered"`
	LeftOut int    `json:"left_out"`
}

// offer cuts tb to the first n tools and says, per server, what was left
// out, in tb's order.
func offer(tb *delegation.Toolbox, n int) (*delegation.Toolbox, []ToolsLeftOut) {
	if tb.Len() <= n {
		return tb, nil
	}
	all := tb.Targets()
	var out []ToolsLeftOut
	for i, t := range all {
		if len(out) == 0 || out[len(out)-1].Server != t.Server.Name {
			out = append(out, ToolsLeftOut{Server: t.Server.Name})
		}
		if i < n {
			out[len(out)-1].Offered++
		} else {
			out[len(out)-1].LeftOut++
		}
	}
	out = slices.DeleteFunc(out, func(l ToolsLeftOut) bool { return l.LeftOut == 0 })
	return tb.First(n), out
}

// leftOutText tells the model (in the system prompt) which tools it is not
// offered.
func leftOutText(l ToolsLeftOut, max int) string {
	return fmt.Sprintf("agent %q: %s of its %s tools are not offered (an agent offers the model at most %d tools; context.max_tools in agent.json)",
		l.Server, group(l.LeftOut), group(l.Offered+l.LeftOut), max)
}

// toolMessage is one tool message of a turn's request.
type toolMessage struct {
	at    int // index in the request's messages
	full  int // bytes of the whole result
	shown int // bytes of its text in the message (the note aside); 0 once left out
}

// history keeps the tool messages of a turn's request within the budget.
type history struct {
	b    budget
	msgs []toolMessage
}

// Truncated is a tool result the model was sent cut, to its own bound
// (MaxToolResultBytes) or to its share of the request's
// (MaxToolResultsBytes): Sent bytes of its Original text went to the model,
// followed by a note of the cut. It is reported on the step that made the
// call (StepUsage.Truncated), so that a person reading the run sees that the
// model answered from part of the result, which the delegation's own record
// (kept whole) does not show.
type Truncated struct {
	CallID   string `json:"call_id"`
	Tool     string `json:"tool"` // as the turn called it (agent__tool)
	Sent     int    `json:"sent"`
	Original int    `json:"original"`
}

// maxStepTruncated bounds the cuts one StepUsage lists, as its tool calls
// are (maxStepToolCalls): the rest are counted in TruncatedLeft.
const maxStepTruncated = maxStepToolCalls

// add appends results to req as tool messages, each cut to its share of
// the budget, and leaves out the oldest earlier results as needed for the
// request's tool text to fit. tools is what the turn offers, for the
// paging hint. It records each result it cut in su, the step that made
// the calls.
func (h *history) add(req *openai.ChatCompletionRequest, results []delegation.Result, tools *delegation.Toolbox, su *StepUsage) {
	sizes := make([]int, len(results))
	for i, r := range results {
		sizes[i] = len(r.Content)
	}
	share := shares(sizes, h.b.resultBytes, h.b.resultsBytes)
	now := 0
	for _, s := range share {
		now += s
	}
	room := h.b.resultsBytes - now
	older := 0
	for _, m := range h.msgs {
		older += m.shown
	}
	for i := range h.msgs {
		if older <= room {
			break
		}
		older -= h.leaveOut(req, i)
	}
	for i, r := range results {
		text := r.Content
		if share[i] < len(text) {
			text = cut(text, share[i])
		}
		shown := len(text)
		if shown < len(r.Content) {
			text += cutNote(len(r.Content), shown, tools, r.Name)
			su.noteCut(Truncated{CallID: r.CallID, Tool: r.Name, Sent: shown, Original: len(r.Content)})
		}
		h.msgs = append(h.msgs, toolMessage{at: len(req.Messages), full: len(r.Content), shown: shown})
		req.Messages = append(req.Messages, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleTool, ToolCallID: r.CallID, Content: text})
	}
}

// noteCut records a cut result, within maxStepTruncated.
func (su *StepUsage) noteCut(t Truncated) {
	if su == nil {
		return
	}
	if len(su.Truncated) == maxStepTruncated {
		su.TruncatedLeft++
		return
	}
	su.Truncated = append(su.Truncated, t)
}

// trim leaves out the oldest tool results until at most half of the tool
// text remains, for a request the endpoint found too long; it returns how
// many results it left out, and their bytes as shown.
func (h *history) trim(req *openai.ChatCompletionRequest) (n, bytes int) {
	total := 0
	for _, m := range h.msgs {
		total += m.shown
	}
	for i := range h.msgs {
		if n > 0 && total-bytes <= total/2 {
			break
		}
		if freed := h.leaveOut(req, i); freed > 0 {
			bytes += freed
			n++
		}
	}
	return n, bytes
}

// leaveOut replaces the text of tool message i with a note of its size
// and returns the bytes it took. A result no longer than its note is kept:
// leaving it out would free nothing.
func (h *history) leaveOut(req *openai.ChatCompletionRequest, i int) int {
	m := &h.msgs[i]
	note := fmt.Sprintf("[switchboard: this result (%s bytes) was left out here to fit the model's context; call the tool again if you need it]", group(m.full))
	freed := m.shown
	if freed <= len(note) {
		return 0
	}
	req.Messages[m.at].Content = note
	m.shown = 0
	return freed
}

// shares splits total among results of sizes, none above each: the
// smallest first keep all they have, the rest share what is left evenly.
func shares(sizes []int, each, total int) []int {
	order := make([]int, len(sizes))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(sizes[a], sizes[b]) })
	out := make([]int, len(sizes))
	left := total
	for k, i := range order {
		out[i] = min(sizes[i], each, left/(len(order)-k))
		left -= out[i]
	}
	return out
}

// cut returns the longest prefix of s of at most n bytes that ends at a
// rune boundary.
func cut(s string, n int) string {
	if n >= len(s) {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// cutNote is what follows a cut result in its tool message.
func cutNote(full, kept int, tools *delegation.Toolbox, name string) string {
	note := fmt.Sprintf("\n\n[switchboard: %s of %s bytes of this result were left out to fit the model's context]", group(full-kept), group(full))
	if t, ok := tools.Lookup(name); ok {
		if p := pagers(t.Parameters); len(p) > 0 {
			note += fmt.Sprintf(" The tool takes %s: call it again with %s to read the rest.", quotedList(p), plural(len(p), "it", "them"))
		}
	}
	return note
}

// pagerNames are the parameter names by which tools page their results:
// MCP's own cursor, and what REST-style and database tools call it.
var pagerNames = []string{"cursor", "next_cursor", "offset", "start", "skip", "page", "page_token", "page_size", "per_page", "limit", "max_results"}

// pagers returns the parameters of a tool's schema that page, in
// pagerNames' order.
func pagers(schema json.RawMessage) []string {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return nil
	}
	var out []string
	for _, p := range pagerNames {
		for name := range s.Properties {
			if strings.EqualFold(name, p) || strings.EqualFold(strings.ReplaceAll(name, "_", ""), strings.ReplaceAll(p, "_", "")) {
				out = append(out, name)
			}
		}
	}
	return out
}

// quotedList renders names for a sentence: "a", "b" and "c".
func quotedList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " and " + q[len(q)-1]
}

// group writes n with thousands separators: 1,048,576.
func group(n int) string {
	s := strconv.Itoa(n)
	if n < 0 {
		return "-" + group(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// contextExceeded reports whether a 400 answer says the request is longer
// than the model's context, by each provider's own word for it:
//
//	error.code "context_length_exceeded"         OpenAI, Azure OpenAI, Groq
//	error.type "exceed_context_size_error"       llama.cpp server
//	a message with "maximum context length"      vLLM (both its error shapes), DeepSeek,
//	                                             OpenRouter: they have no code of their own
//	                                             and write OpenAI's sentence
//
// The last row reads the provider's message, which is data from the wire,
// and only on a 400. Ollama answers no error: it cuts the prompt to its
// num_ctx from the front (so the tool-result bounds are its only guard).
func contextExceeded(err error) bool {
	if httpStatus(err) != http.StatusBadRequest {
		return false
	}
	if apiErr, ok := errors.AsType[*openai.APIError](err); ok {
		if code, _ := apiErr.Code.(string); code == "context_length_exceeded" || apiErr.Type == "exceed_context_size_error" {
			return true
		}
	}
	return strings.Contains(strings.ToLower(apiMessage(err)), "maximum context length")
}
