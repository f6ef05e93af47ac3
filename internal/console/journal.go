package console

// The agents' run journals, as the console shows and acts on them
// (docs/DURABILITY.md §3):
//
//	GET  /api/agents/<name>/runs               the agent's journaled runs (?state= &limit=), its GET /runs
//	GET  /api/agents/<name>/runs/<id>          one of them
//	POST /api/agents/<name>/runs/<id>/resume   resume it through the agent's ask, and answer what it answered
//	GET  /api/agents/<name>/runs/<id>/steps/<n> a model step's messages and response (the agent rebuilds them; steps.go)
//
// The agent owns its journal, so each is read from the agent, at its
// address beside its /mcp, with the credential the studio's own calls to
// it carry (the studio's token, or a remote agent's): the runs listed are
// the ones that credential started, which are the ones it may resume. The
// resume goes through the studio's proxy route, as a client's ask would,
// so it is observed and recorded as the run's next attempt.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/idempotency"
	"github.com/switchboard-run/switchboard/internal/mcphttp"
	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/pool"
)

// journalTimeout bounds one read of an agent's journal.
const journalTimeout = 5 * time.Second

// resumeTimeout bounds a resume asked from the page: the rest of a run.
// Past it (or when the page's request ends) the resume is cancelled and
// the run stays resumable.
const resumeTimeout = 10 * time.Minute

// maxJournalBody bounds what is read of an agent's journal answer.
const maxJournalBody = 4 << 20

// Errors of reading a journal, for errors.Is.
var (
	// ErrNoJournal: the agent is not running, or serves no /runs (an agent
	// that is not a switchboard agent serve, or an older one).
	ErrNoJournal = errors.New("the agent's run journal cannot be read")
	// ErrNoSuchRun: the agent's journal holds no such run of the studio's
	// credential.
	ErrNoSuchRun = errors.New("no such run in the agent's journal")
)

// journalURL is agent name's /runs endpoint plus rest, beside its MCP
// endpoint; ok is false when it has no address now.
func (s *Console) journalURL(name, rest string) (*url.URL, bool) {
	st := s.Procs[name].Status()
	if !st.Routable() || st.Upstream == nil {
		return nil, false
	}
	u := *st.Upstream
	dir := u.Path[:strings.LastIndexByte(u.Path, '/')+1]
	u.Path, u.RawPath, u.RawQuery = dir+"runs"+rest, "", ""
	return &u, true
}

// agentGet GETs rest under agent name's /runs into v.
func (s *Console) agentGet(ctx context.Context, name, rest, query string, v any) error {
	u, ok := s.journalURL(name, rest)
	if !ok {
		return fmt.Errorf("%w: agent %s is %s", ErrNoJournal, name, s.Procs[name].Status().State)
	}
	u.RawQuery = query
	ctx, cancel := context.WithTimeout(ctx, journalTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	for k, v := range s.Headers[name] {
		req.Header.Set(k, v)
	}
	if _, remote := s.Headers[name]; !remote && s.Token != "" {
		req.Header.Set("Authorization", "Bearer "+s.Token)
	}
	c := s.HTTP
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("%w: agent %s: %w", ErrNoJournal, name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJournalBody))
	if err != nil {
		return fmt.Errorf("%w: agent %s: %w", ErrNoJournal, name, err)
	}
	var msg struct {
		Error string `json:"error"`
	}
	json.Unmarshal(body, &msg)
	switch {
	case resp.StatusCode == http.StatusNotFound && rest != "":
		return fmt.Errorf("%w: %s", ErrNoSuchRun, s.scrub(msg.Error))
	case resp.StatusCode == http.StatusBadRequest:
		return &badQueryError{msg: msg.Error}
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("%w: agent %s answered GET %s with %s: %s", ErrNoJournal, name, u.Path, resp.Status, s.scrub(cutText(string(body), 200)))
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%w: agent %s: its GET %s does not parse: %w", ErrNoJournal, name, u.Path, err)
	}
	return nil
}

// badQueryError is the agent's word on a bad ?state= or ?limit=.
type badQueryError struct{ msg string }

func (e *badQueryError) Error() string { return e.msg }

// JournalRuns lists agent name's journaled runs (query: the agent's
// ?state= and ?limit=).
func (s *Console) JournalRuns(ctx context.Context, name, query string) (studioapi.JournalRuns, error) {
	var list studioapi.JournalRuns
	err := s.agentGet(ctx, name, "", query, &list)
	return list, err
}

// JournalRun is one run of agent name's journal.
func (s *Console) JournalRun(ctx context.Context, name, id string) (studioapi.JournalRun, error) {
	var run studioapi.JournalRun
	err := s.agentGet(ctx, name, "/"+url.PathEscape(id), "", &run)
	return run, err
}

// writeJournalError answers err of a journal read.
func writeJournalError(w http.ResponseWriter, err error) {
	var bad *badQueryError
	switch {
	case errors.As(err, &bad):
		mcphttp.WriteJSONError(w, http.StatusBadRequest, bad.msg)
	case errors.Is(err, ErrNoSuchRun):
		mcphttp.WriteJSONError(w, http.StatusNotFound, err.Error())
	default:
		mcphttp.WriteJSONError(w, http.StatusBadGateway, err.Error())
	}
}

// serveJournal is GET /api/agents/<name>/runs[/<id>] and POST
// .../runs/<id>/resume; rest is what follows "runs".
func (s *Console) serveJournal(w http.ResponseWriter, r *http.Request, name, rest string) {
	if rest == "" {
		if !isGet(w, r, "lists agent "+name+"'s journaled runs") {
			return
		}
		list, err := s.JournalRuns(r.Context(), name, r.URL.RawQuery)
		if err != nil {
			writeJournalError(w, err)
			return
		}
		mcphttp.WriteJSON(w, http.StatusOK, list)
		return
	}
	id, action, _ := strings.Cut(strings.TrimPrefix(rest, "/"), "/")
	if n, ok := strings.CutPrefix(action, "steps/"); ok && ValidName(id) {
		if !isGet(w, r, "is a model step of one of agent "+name+"'s journaled runs") {
			return
		}
		s.serveStep(w, r, name, id, n)
		return
	}
	if !ValidName(id) || (action != "" && action != "resume") {
		NotFound(w, r.URL.EscapedPath())
		return
	}
	if action == "" {
		if !isGet(w, r, "is one of agent "+name+"'s journaled runs") {
			return
		}
		run, err := s.JournalRun(r.Context(), name, id)
		if err != nil {
			writeJournalError(w, err)
			return
		}
		mcphttp.WriteJSON(w, http.StatusOK, run)
		return
	}
	if code, err := checkMutation(r); err != nil {
		if code == http.StatusMethodNotAllowed {
			w.Header().Set("Allow", "POST")
		}
		mcphttp.WriteJSONError(w, code, err.Error())
		return
	}
	var body struct{}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxActionBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil && !errors.Is(err, io.EOF) {
		mcphttp.WriteJSONError(w, http.StatusBadRequest, fmt.Sprintf("the body of %s must be a JSON object, {} (it takes no fields): %v", r.URL.Path, err))
		return
	}
	s.serveResume(w, r, name, id)
}

func isGet(w http.ResponseWriter, r *http.Request, what string) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET")
		mcphttp.WriteJSONError(w, http.StatusMethodNotAllowed, "GET "+r.URL.EscapedPath()+" "+what)
		return false
	}
	return true
}

// serveResume resumes run id of agent name with its ask, as
// `switchboard ask --resume` does, and answers what it answered. What the
// journal says of the run decides the refusals, each its own status: no
// such run 404, running 409, broken 422 (with why).
func (s *Console) serveResume(w http.ResponseWriter, r *http.Request, name, id string) {
	run, err := s.JournalRun(r.Context(), name, id)
	if err != nil {
		writeJournalError(w, err)
		return
	}
	if code, msg := refusal(name, run); code != 0 {
		mcphttp.WriteJSONError(w, code, msg)
		return
	}
	srv := &pool.Server{Name: name, URL: s.AgentURL(name), ProtocolVersion: pool.Protocol20251125}
	if s.Token != "" {
		srv.Headers = map[string]string{"Authorization": "Bearer " + s.Token}
	}
	ctx, cancel := context.WithTimeout(r.Context(), resumeTimeout)
	defer cancel()
	res, err := s.Pool.CallTool(ctx, srv, &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"task": "", "resume": id}})
	var pe *pool.Error
	switch {
	case errors.As(err, &pe) && pe.Kind == pool.KindRPC && pe.Code == idempotency.CodeStillRunning:
		mcphttp.WriteJSONError(w, http.StatusConflict, s.scrub(fmt.Sprintf("run %s of agent %s is running (another resume, or its attempt is still ending): %v", id, name, err)))
		return
	case err != nil:
		mcphttp.WriteJSONError(w, http.StatusBadGateway, s.scrub(fmt.Sprintf("resuming run %s on agent %s: %v", id, name, err)))
		return
	}
	out := studioapi.ResumeResult{Agent: name, Run: id, IsError: res.IsError, Text: s.scrub(resultText(res))}
	if b, err := json.Marshal(res.StructuredContent); err == nil {
		json.Unmarshal(b, &out)
		out.Agent, out.Run = name, id
		out.Answer = s.scrub(out.Answer)
	}
	if res.IsError && out.Status == "" {
		// Refused before it ran (no turn, no result): the journal says
		// why, if it changed its mind since (a corrupt entry found now).
		if now, err := s.JournalRun(r.Context(), name, id); err == nil {
			if code, msg := refusal(name, now); code != 0 {
				mcphttp.WriteJSONError(w, code, msg+": "+out.Text)
				return
			}
		}
		mcphttp.WriteJSONError(w, http.StatusUnprocessableEntity, out.Text)
		return
	}
	mcphttp.WriteJSON(w, http.StatusOK, out)
}

// refusal is why run is not resumed now: its status and message, or 0.
func refusal(name string, run studioapi.JournalRun) (int, string) {
	switch run.State {
	case studioapi.JournalRunning:
		return http.StatusConflict, fmt.Sprintf("run %s of agent %s is running now (attempt %d): it is not resumed twice at once", run.ID, name, run.Attempts)
	case studioapi.JournalBroken:
		return http.StatusUnprocessableEntity, fmt.Sprintf("run %s of agent %s cannot be resumed: %s", run.ID, name, run.Why)
	}
	return 0, ""
}

func resultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// cutText cuts s to n bytes.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// resumedAttempt is an ask of a run that went on from its journal, as its
// result says (runtime.Result's resumed, replayed_steps,
// replayed_delegations).
type resumedAttempt struct {
	Hop         int // the hop's number on the page
	Agent       string
	Steps       int
	Delegations int
}

// resumedAttempts reads, from the asks among hops, those that resumed. A
// result the studio did not keep whole (cut to its payload bound) says
// nothing.
func resumedAttempts(from int, hops []studioapi.Hop) []resumedAttempt {
	var out []resumedAttempt
	for i, h := range hops {
		if h.Tool != "ask" || h.Result == "" {
			continue
		}
		var res struct {
			Structured struct {
				Resumed             bool `json:"resumed"`
				ReplayedSteps       int  `json:"replayed_steps"`
				ReplayedDelegations int  `json:"replayed_delegations"`
			} `json:"structuredContent"`
		}
		if json.Unmarshal([]byte(h.Result), &res) != nil || !res.Structured.Resumed {
			continue
		}
		out = append(out, resumedAttempt{Hop: from + i + 1, Agent: h.Agent, Steps: res.Structured.ReplayedSteps, Delegations: res.Structured.ReplayedDelegations})
	}
	return out
}
