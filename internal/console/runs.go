package console

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-run/switchboard/internal/mcphttp"
	"github.com/switchboard-run/switchboard/internal/observe"
	"github.com/switchboard-run/switchboard/internal/studioapi"
)

// runFilterFrom reads the run list's query parameters.
func runFilterFrom(r *http.Request) (observe.RunFilter, error) {
	q := r.URL.Query()
	f := observe.RunFilter{Agent: q.Get("agent"), Outcome: q.Get("outcome"), Query: q.Get("q")}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return f, fmt.Errorf("limit must be a positive integer, got %q", v)
		}
		f.Limit = min(n, 500)
	}
	if v := q.Get("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return f, fmt.Errorf("before must be a positive integer (a run's seq), got %q", v)
		}
		f.Before = n
	}
	switch f.Outcome {
	case "", "ok", "failed", "running", "recovered":
	default:
		return f, fmt.Errorf("outcome must be ok, failed, running or recovered, got %q", f.Outcome)
	}
	return f, nil
}

// hopsFrom reads a run's ?from=.
func hopsFrom(r *http.Request) (int, error) {
	v := r.URL.Query().Get("from")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("from must be a hop number (0 or more), got %q", v)
	}
	return n, nil
}

func (s *Console) serveRuns(w http.ResponseWriter, r *http.Request) {
	f, err := runFilterFrom(r)
	if err != nil {
		mcphttp.WriteJSONError(w, http.StatusBadRequest, err.Error())
		return
	}
	mcphttp.WriteJSON(w, http.StatusOK, s.Runs.Page(f))
}

func (s *Console) serveRun(w http.ResponseWriter, r *http.Request, id string) {
	from, err := hopsFrom(r)
	if err != nil {
		mcphttp.WriteJSONError(w, http.StatusBadRequest, err.Error())
		return
	}
	run, ok := s.Runs.RunFrom(id, from)
	if !ok {
		mcphttp.WriteJSONError(w, http.StatusNotFound, fmt.Sprintf("no run %q is recorded (the studio keeps the last %d calls)", id, observe.MaxCalls))
		return
	}
	mcphttp.WriteJSON(w, http.StatusOK, run)
}

// indentJSON indents JSON text for reading on the run page; other text is
// returned as it is.
func indentJSON(s string) string {
	var buf bytes.Buffer
	if json.Indent(&buf, []byte(s), "", "  ") != nil {
		return s
	}
	return buf.String()
}

// span is one bar beside a hop's in the waterfall: a model step of its
// ask's turn, or a tool call the turn reported that the proxy did not see
// (to a server the agent's tools/mcp.json names). X and W are in the
// SVG's 0..1000 units, like the hop's.
type span struct {
	Kind     string // "step" or "call"
	Indent   int    // one below its hop's
	Key      string // the <details> key the live refresh keeps open
	Label    string // "model step 2", or "fetch.get"
	Badge    string
	Tone     string
	Marks    []spanMark
	X, W     float64
	Duration string
	// What the click opens: the step's tokens, finish reason and chosen
	// tools, or the call's message.
	Usage        studioapi.Usage
	RequestBytes int
	FinishReason string
	ToolCalls    []string
	ToolsLeft    int
	// Truncated are the step's tool results sent cut; StepURL is where the
	// page fetches the step's messages and response when it is opened
	// (steps.go), empty when no journal can be asked (no run id).
	Truncated     []studioapi.Truncated
	TruncatedLeft int
	StepURL       string
	Message       string
}

// spanMark is a mark on a span's bar, with what it means.
type spanMark struct{ Text, Title string }

// hopSpans are the spans of hop h (an ask's steps and its unproxied
// calls), placed on the run's axis: start is the run's start, scale the
// SVG units per millisecond. A span without a start (an older agent's
// step_usage) has no bar.
func hopSpans(h studioapi.Hop, start time.Time, scale float64) []span {
	place := func(sp *span, at time.Time, ms float64) {
		sp.Duration = fmtMS(ms)
		if at.IsZero() {
			return
		}
		sp.X = min(max(float64(at.Sub(start))/float64(time.Millisecond)*scale, 0), 998)
		sp.W = min(max(ms*scale, 2), 1000-sp.X)
	}
	var out []span
	defer func() {
		for i := range out {
			out[i].Indent = min(h.Depth+1, 6)
		}
	}()
	for _, st := range h.StepUsage {
		sp := span{Kind: "step", Key: fmt.Sprintf("hop-%d-step-%d", h.ID, st.Step), Label: fmt.Sprintf("model step %d", st.Step),
			Badge: cmp.Or(st.FinishReason, "no answer"), Tone: "model", Usage: st.Usage, RequestBytes: st.RequestBytes,
			FinishReason: st.FinishReason, ToolCalls: st.ToolCalls, ToolsLeft: st.ToolCallsLeft,
			Truncated: st.Truncated, TruncatedLeft: st.TruncatedLeft}
		if run := cmp.Or(h.TurnRun, h.RunID); ValidName(h.Agent) && ValidName(run) {
			sp.StepURL = "/api/agents/" + url.PathEscape(h.Agent) + "/runs/" + url.PathEscape(run) + "/steps/" + strconv.Itoa(st.Step)
		}
		if st.FinishReason == "length" || st.FinishReason == "content_filter" {
			sp.Tone = "notanswered"
		}
		if st.Attempts > 1 {
			sp.Marks = append(sp.Marks, spanMark{fmt.Sprintf("%d attempts", st.Attempts), "the request was sent again after a failure that passes"})
		}
		if st.Trimmed > 0 {
			sp.Marks = append(sp.Marks, spanMark{fmt.Sprintf("%d results trimmed", st.Trimmed), "earlier tool results were left out of the request to fit the model's context"})
		}
		if st.Replayed {
			sp.Marks = append(sp.Marks, spanMark{"replayed", "answered from the run's journal on resume, not asked again"})
		}
		if n := len(st.Truncated) + st.TruncatedLeft; n > 0 {
			sp.Marks = append(sp.Marks, spanMark{"truncated", truncatedTitle(st)})
		}
		place(&sp, st.Start, st.DurationMS)
		out = append(out, sp)
	}
	for i, c := range h.Calls {
		if c.Proxied {
			continue // a hop of its own
		}
		sp := span{Kind: "call", Key: fmt.Sprintf("hop-%d-call-%d", h.ID, i), Label: c.Server + "." + c.Tool, Message: c.Message}
		sp.Badge, sp.Tone = observe.CallBadge(c)
		if c.RepairedFrom != "" {
			sp.Marks = append(sp.Marks, spanMark{"repaired", "the model wrote " + c.RepairedFrom + "; the agent routed it to this tool"})
		}
		if c.Retried {
			sp.Marks = append(sp.Marks, spanMark{"retried", "the pool re-initialized the server's session and sent the call once more"})
		}
		if c.Replayed {
			sp.Marks = append(sp.Marks, spanMark{"replayed", "the server answered from its record of an earlier send; the tool ran once"})
		}
		place(&sp, c.Start, c.DurationMS)
		out = append(out, sp)
	}
	return out
}

// truncatedTitle says which of a step's tool results the model was sent
// cut, and how much of each it read.
func truncatedTitle(st studioapi.StepUsage) string {
	parts := make([]string, 0, len(st.Truncated)+1)
	for _, tr := range st.Truncated {
		parts = append(parts, fmt.Sprintf("%s (%s): %s of %s", tr.Tool, tr.CallID, bytesText(tr.Sent), bytesText(tr.Original)))
	}
	if st.TruncatedLeft > 0 {
		parts = append(parts, fmt.Sprintf("and %d more", st.TruncatedLeft))
	}
	return "the model was sent these results of this step's calls cut to the agent's context budget (context.max_tool_result_bytes, max_tool_results_bytes): " + strings.Join(parts, "; ")
}
