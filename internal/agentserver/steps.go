package agentserver

// GET /runs/<id>/steps/<n>: one model step of a journaled run, the
// messages its request carried and the response it got, for the console's
// run page. The journal keeps the responses, not the requests; the request
// is rebuilt the way a resume rebuilds it (runtime.Agent.JournaledStep:
// the turn loop with every step and delegation answered from the journal,
// asking nothing and calling nothing), so the page shows what the model
// was sent, and says so only when the fingerprint journaled for the step
// matches. Behind the checks of /runs (RunsHandler), and the same
// credential rule: another caller's run is not found.
//
// Everything is redacted as the ask tool's results are (scrubResult: the
// environment's credentials and the ones tools/mcp.json configures), each
// text cut at studioapi.MaxStepText with a mark that says how much was
// left out, and the whole bounded by studioapi.MaxStepContent.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"time"
	"unicode/utf8"

	"encoding/json"
	"github.com/sashabaranov/go-openai"

	"github.com/switchboard-run/switchboard/internal/journal"
	"github.com/switchboard-run/switchboard/internal/logging"
	"github.com/switchboard-run/switchboard/internal/mcphttp"
	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/runtime"
)

// stepTimeout bounds a step's rebuild: it discovers the siblings' tools
// again (from the pool's cache while it is fresh).
const stepTimeout = 30 * time.Second

// serveStep answers GET /runs/<id>/steps/<n> (rest is "<n>").
func (s *Server) serveStep(w http.ResponseWriter, r *http.Request, id, rest, cred string) {
	name := s.def.Name
	n, err := strconv.Atoi(rest)
	if err != nil || n < 1 || strconv.Itoa(n) != rest {
		mcphttp.WriteJSONError(w, http.StatusNotFound, fmt.Sprintf("agent %s: no step %q: a step is a number from 1 (GET /runs/<id>/steps/<n>)", name, cut(rest, 32)))
		return
	}
	if s.journal == nil {
		mcphttp.WriteJSONError(w, http.StatusNotFound, fmt.Sprintf("agent %s keeps no run journal, so its runs' steps cannot be shown", name))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), stepTimeout)
	defer cancel()
	out, err := s.ask.journaledStep(ctx, s.journal, id, n, cred)
	switch {
	case errors.Is(err, journal.ErrNotFound):
		mcphttp.WriteJSONError(w, http.StatusNotFound, fmt.Sprintf("agent %s: no run %q in its journal (never run here, another caller's, or older than the journal keeps runs), so its steps cannot be shown", name, cut(id, 64)))
	case errors.Is(err, runtime.ErrStepNotJournaled):
		mcphttp.WriteJSONError(w, http.StatusNotFound, s.ask.scrub(fmt.Sprintf("agent %s: %v", name, err)))
	case errors.Is(err, runtime.ErrStepNotRebuilt), errors.Is(err, journal.ErrCorrupt):
		mcphttp.WriteJSONError(w, http.StatusUnprocessableEntity, s.ask.scrub(fmt.Sprintf("agent %s: run %s, step %d: %v", name, cut(id, 64), n, err)))
	case err != nil:
		mcphttp.WriteJSONError(w, http.StatusInternalServerError, s.ask.scrub(fmt.Sprintf("agent %s: run %s, step %d: %v", name, cut(id, 64), n, err)))
	default:
		mcphttp.WriteJSON(w, http.StatusOK, out)
	}
}

// journaledStep rebuilds step n of run id of credential cred.
func (a *asker) journaledStep(ctx context.Context, j *journal.Journal, id string, n int, cred string) (*studioapi.StepContent, error) {
	info, rp, err := j.Entries(ctx, id)
	if err != nil {
		return nil, err
	}
	if info.Credential != cred {
		// Another caller's run is not found either: its id says nothing.
		return nil, fmt.Errorf("run %s: %w", id, journal.ErrNotFound)
	}
	if n > len(rp.Steps) {
		return nil, fmt.Errorf("run %s journaled %d model steps (it is %s): step %d: %w", id, len(rp.Steps), info.State, n, runtime.ErrStepNotJournaled)
	}
	var st runSettings
	if err := json.Unmarshal(info.Settings, &st); err != nil {
		return nil, fmt.Errorf("run %s: its settings in the journal do not parse: %v: %w", id, err, journal.ErrCorrupt)
	}
	agent, err := a.runtimeAgent()
	if err != nil {
		return nil, err
	}
	got, err := agent.JournaledStep(ctx, info.Task, st.Chain, rp, n)
	if err != nil {
		return nil, err
	}
	out := &studioapi.StepContent{Agent: a.def.Name, Run: info.RunID, Step: n, Steps: len(rp.Steps), State: string(info.State),
		Exact: got.Exact, Tools: len(got.Request.Tools)}
	if model, endpoint := agent.Model(); !got.Exact {
		out.Note = fmt.Sprintf("rebuilt from the journal, but not the request the model was sent: the agent's instructions, tools or model (now %s at %s) changed since, or a sibling is unavailable now; the messages from the journal (the task, responses and tool results) are as sent, the system prompt and tools may not be", model, endpoint)
	}
	secrets := append(logging.SecretsFromEnv(os.Environ()), a.secrets...)
	b := &stepBounds{left: studioapi.MaxStepContent, scrub: func(s string) string { return logging.Scrub(s, secrets...) }}
	// The response first: it is what the step is, and is never left out.
	if len(got.Response.Choices) > 0 {
		c := got.Response.Choices[0]
		out.FinishReason = b.scrub(string(c.FinishReason))
		out.Response = b.message(c.Message)
	}
	out.Messages = make([]studioapi.StepMessage, 0, len(got.Request.Messages))
	for _, m := range got.Request.Messages {
		out.Messages = append(out.Messages, b.message(m))
	}
	out.LeftOut = b.leftOut
	return out, nil
}

// stepBounds cuts the texts of a StepContent: each at MaxStepText, all of
// them at MaxStepContent.
type stepBounds struct {
	left    int // bytes the answer may still hold
	leftOut int // bytes left out past MaxStepContent
	scrub   func(string) string
}

// message is m redacted and cut.
func (b *stepBounds) message(m openai.ChatCompletionMessage) studioapi.StepMessage {
	out := studioapi.StepMessage{Role: m.Role, ToolCallID: b.scrub(m.ToolCallID)}
	content := m.Content
	if content == "" && m.Refusal != "" {
		content = m.Refusal
	}
	out.Content, out.Cut = b.text(content, out.Cut)
	out.Reasoning, out.Cut = b.text(m.ReasoningContent, out.Cut)
	for _, tc := range m.ToolCalls {
		args, cut := b.text(tc.Function.Arguments, out.Cut)
		out.Cut = cut
		out.ToolCalls = append(out.ToolCalls, studioapi.StepToolCall{ID: b.scrub(tc.ID), Name: b.scrub(tc.Function.Name), Arguments: args})
	}
	return out
}

// text is s redacted (before it is cut: a cut must not split a secret
// into a part the scrubber no longer knows) and cut, with cut plus the
// bytes left out.
func (b *stepBounds) text(s string, cut int) (string, int) {
	if s == "" {
		return "", cut
	}
	s = b.scrub(s)
	if b.left <= 0 {
		b.leftOut += len(s)
		return fmt.Sprintf("[left out: %d bytes, past the %d KiB one step's answer holds]", len(s), studioapi.MaxStepContent>>10), cut + len(s)
	}
	n := min(len(s), studioapi.MaxStepText, b.left)
	byBound := b.left < min(len(s), studioapi.MaxStepText) // cut by the whole's bound, not the text's
	if n == len(s) {
		b.left -= n
		return s, cut
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	b.left -= n
	if byBound {
		b.leftOut += len(s) - n
	}
	return s[:n] + fmt.Sprintf("\n… [cut, %d bytes left out]", len(s)-n), cut + len(s) - n
}
