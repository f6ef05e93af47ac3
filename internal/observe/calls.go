package observe

import (
	"strings"
	"time"
	"unicode/utf8"

	"github.com/switchboard-run/switchboard/internal/studioapi"
)

// What an ask's turn says of itself in its result (runtime.Result, its
// structuredContent), beyond its answer and usage: how it ended (status,
// reason) and every tool call it made. The proxy sees only the calls that
// pass the studio (siblings' tools); the calls to the servers an agent's
// tools/mcp.json names directly (stdio, or HTTP elsewhere, third-party
// included) are known only from here, and a run without them would show
// "delegations: 0" for a turn that made eight.

// turnReport is the part of an ask's structuredContent read for the run.
type turnReport struct {
	Status      string `json:"status"`
	Reason      string `json:"reason"`
	Resumed     bool   `json:"resumed"`
	Delegations []struct {
		CallID     string    `json:"call_id"`
		Agent      string    `json:"agent"`
		Tool       string    `json:"tool"`
		Time       time.Time `json:"time"`
		DurationMS float64   `json:"duration_ms"`
		Outcome    string    `json:"outcome"`
		Message    string    `json:"message"`
		Retried    bool      `json:"retried"`
		Recovered  bool      `json:"recovered"`
		Replayed   bool      `json:"replayed"`
	} `json:"delegations"`
	NameRepairs []struct {
		CallID string `json:"call_id"`
		From   string `json:"from"`
	} `json:"name_repairs"`
}

// maxReason bounds an ask's reason as kept.
const maxReason = 2 << 10

// calls is the report's tool calls as the run keeps them, redacted and
// bounded (at most studioapi.MaxAgentCalls; left says how many more).
// A finish event's time is when the call ended (delegation.Event), so
// its start is that less its duration.
func (r *turnReport) calls(redact func(string) string) (out []studioapi.AgentCall, left int) {
	scrub := func(s string) string { return Printable(redact(s)) }
	repaired := make(map[string]string, len(r.NameRepairs))
	for _, n := range r.NameRepairs {
		repaired[n.CallID] = n.From
	}
	for i, e := range r.Delegations {
		if i == studioapi.MaxAgentCalls {
			return out, len(r.Delegations) - i
		}
		c := studioapi.AgentCall{
			Server: Elide(scrub(e.Agent), 256), Tool: Elide(scrub(e.Tool), 256), DurationMS: max(e.DurationMS, 0),
			Outcome: Elide(e.Outcome, 64), Message: Elide(scrub(e.Message), 1<<10),
			Retried: e.Retried, Recovered: e.Recovered, Replayed: e.Replayed,
		}
		if !e.Time.IsZero() {
			c.Start = e.Time.Add(-time.Duration(c.DurationMS * float64(time.Millisecond)))
		}
		if from, ok := repaired[e.CallID]; ok && e.CallID != "" {
			c.RepairedFrom = Elide(scrub(from), 256)
		}
		out = append(out, c)
	}
	return out, 0
}

// callsBytes is what calls cost the payload budget, about.
func callsBytes(calls []studioapi.AgentCall) int {
	n := 0
	for _, c := range calls {
		n += 96 + len(c.Server) + len(c.Tool) + len(c.Message) + len(c.RepairedFrom)
	}
	return n
}

// markProxied marks the calls of each ask among hops that the studio's
// proxy also saw, as hops of their own (a call from that ask's agent, one
// level down, to that server and tool), so that the run counts each call
// once. The proxy's hops are matched by count, not by id: the agent's
// call ids are the model's and do not travel with the call.
func markProxied(hops []studioapi.Hop) {
	type key struct{ from, agent, tool string }
	seen := make(map[key]int)
	for i := range hops {
		if h := &hops[i]; h.From != "" {
			seen[key{h.From, h.Agent, h.Tool}]++
		}
	}
	for i := range hops {
		h := &hops[i]
		for j := range h.Calls {
			c := &h.Calls[j]
			k := key{h.Agent, c.Server, c.Tool}
			if seen[k] > 0 {
				seen[k]--
				c.Proxied = true
			}
		}
	}
}

// Badges of an ask's turn by its status: an ask whose turn did not answer
// fully is a tool_error on the wire (isError), which says nothing of why.
var askBadges = map[string][2]string{
	studioapi.AskNotAnswered:      {"not answered", "notanswered"},
	studioapi.AskDelegationFailed: {"delegation failed", "warn"},
	studioapi.AskUnavailable:      {"unavailable", "unavailable"},
	studioapi.AskFailed:           {"failed", "bad"},
	studioapi.StatusDeclined:      {"declined", "declined"},
	studioapi.StatusCancelled:     {"cancelled", "declined"},
	studioapi.StatusNotConfirmed:  {"not confirmed", "declined"},
}

// confirmStatus is the Status of a tool's error result that carries the
// person's answer to the confirmation it asked (structuredContent.action,
// an elicitation's action: packrat's delete_notes): the tool did nothing
// because the person said no, which is not a failure.
func confirmStatus(action string) string {
	switch action {
	case "":
		return ""
	case "decline":
		return studioapi.StatusDeclined
	case "cancel":
		return studioapi.StatusCancelled
	}
	return studioapi.StatusNotConfirmed
}

// callBadge is how a call a turn reported ended, as the page shows it.
func callBadge(c studioapi.AgentCall) (label, tone string) {
	switch c.Outcome {
	case "ok":
		if c.Recovered {
			return "recovered", "recovered"
		}
		return "ok", "ok"
	case "tool_error":
		return "refused", "refused"
	case "bad_arguments":
		return "bad arguments", "warn"
	case "unknown_tool":
		return "unknown tool", "warn"
	case "canceled", "interrupted":
		return c.Outcome, "warn"
	}
	return c.Outcome, "bad"
}

// CallBadge is callBadge, for the page.
func CallBadge(c studioapi.AgentCall) (label, tone string) { return callBadge(c) }

// Printable replaces the control characters of s (but newlines and tabs)
// with visible ones: ESC with ␛, the rest with U+FFFD. A server's strings
// are shown on the page and in `switchboard status` on a terminal, where
// an ANSI sequence in a tool's message would repaint the screen or hide
// a line.
func Printable(s string) string {
	clean := true
	for _, r := range s {
		if isControl(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		switch {
		case r == 0x1b:
			b.WriteRune('␛')
		case isControl(r):
			b.WriteRune(utf8.RuneError)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func isControl(r rune) bool {
	return (r < 0x20 && r != '\n' && r != '\t' && r != '\r') || (r >= 0x7f && r < 0xa0)
}
