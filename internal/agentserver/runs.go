package agentserver

// GET /runs, /runs/<id> and /runs/<id>/steps/<n> (steps.go): the run journal, read through the agent that
// owns it (a data directory belongs to one process), for a person who
// wants to know what may be resumed (switchboard runs, status, the
// console). Plain HTTP beside /healthz and /readyz rather than an MCP tool:
// every tool of an agent is offered to every model that delegates to it,
// and no model should list or resume runs. Behind the same checks as /mcp
// (Host and Origin against DNS rebinding, then the bearer token when the
// agent has one), and a caller sees only the runs started with its own
// credential, the ones a resume by run id finds (openRun).

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/switchboard-run/switchboard/internal/journal"
	"github.com/switchboard-run/switchboard/internal/mcphttp"
	"github.com/switchboard-run/switchboard/internal/studioapi"
)

// Bounds of what a listing shows of a run.
const (
	listTask   = 120 // characters of the task
	listWhy    = 300 // characters of why it ended
	listLimit  = 100 // runs, unless ?limit= says
	resumeHint = "a keyed retry of its ask or a resume goes on with it"
)

// resumableStates are the states a resume goes on from.
var resumableStates = []journal.State{journal.StateInterrupted, journal.StateFailed}

// RunsHandler serves GET /runs, GET /runs/<id> and GET
// /runs/<id>/steps/<n>, mounted at /runs/ and
// /runs by Serve.
func (s *Server) RunsHandler() http.Handler {
	return mcphttp.Guard(s.token, http.HandlerFunc(s.serveRuns))
}

func (s *Server) serveRuns(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET")
		mcphttp.WriteJSONError(w, http.StatusMethodNotAllowed, "GET "+r.URL.Path+" lists agent "+s.def.Name+"'s journaled runs")
		return
	}
	cred := credentialOf(r.Header.Get("Authorization"))
	if id, ok := strings.CutPrefix(r.URL.Path, "/runs/"); ok {
		if id, n, ok := strings.Cut(id, "/steps/"); ok {
			s.serveStep(w, r, id, n, cred)
			return
		}
		run, err := s.journalRun(r.Context(), id, cred)
		switch {
		case errors.Is(err, journal.ErrNotFound):
			mcphttp.WriteJSONError(w, http.StatusNotFound, fmt.Sprintf("agent %s: no run %q in its journal (never run here, another caller's, or older than the journal keeps runs)", s.def.Name, cut(id, 64)))
		case err != nil:
			mcphttp.WriteJSONError(w, http.StatusInternalServerError, fmt.Sprintf("agent %s: %v", s.def.Name, err))
		default:
			mcphttp.WriteJSON(w, http.StatusOK, run)
		}
		return
	}
	if r.URL.Path != "/runs" {
		mcphttp.WriteJSONError(w, http.StatusNotFound, "no such endpoint "+r.URL.Path+": the runs are at /runs and /runs/<id>")
		return
	}
	f, err := runsFilter(r)
	if err != nil {
		mcphttp.WriteJSONError(w, http.StatusBadRequest, err.Error())
		return
	}
	f.Credential = cred
	list, err := s.journalRuns(r.Context(), f)
	if err != nil {
		mcphttp.WriteJSONError(w, http.StatusInternalServerError, fmt.Sprintf("agent %s: %v", s.def.Name, err))
		return
	}
	mcphttp.WriteJSON(w, http.StatusOK, list)
}

// runsFilter reads ?state= (states, comma-separated) and ?limit=.
func runsFilter(r *http.Request) (journal.ListFilter, error) {
	q := r.URL.Query()
	f := journal.ListFilter{Limit: listLimit}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > studioapi.MaxJournalRuns {
			return f, fmt.Errorf("limit must be a whole number from 1 to %d, got %q", studioapi.MaxJournalRuns, v)
		}
		f.Limit = n
	}
	if v := q.Get("state"); v != "" {
		for st := range strings.SplitSeq(v, ",") {
			switch s := journal.State(strings.TrimSpace(st)); s {
			case journal.StateRunning, journal.StateInterrupted, journal.StateFailed, journal.StateDone, journal.StateBroken:
				f.States = append(f.States, s)
			default:
				return f, fmt.Errorf("state must be running, interrupted, failed, done or broken (comma-separated), got %q", st)
			}
		}
	}
	return f, nil
}

// journalRuns lists the runs f selects, and counts the resumable ones of
// its credential.
func (s *Server) journalRuns(ctx context.Context, f journal.ListFilter) (studioapi.JournalRuns, error) {
	out := studioapi.JournalRuns{Agent: s.def.Name, Runs: []studioapi.JournalRun{}}
	list, err := s.journal.Summaries(ctx, f)
	if err != nil {
		return out, err
	}
	for _, sm := range list {
		out.Runs = append(out.Runs, s.ask.listed(sm))
	}
	resumable, err := s.journal.Summaries(ctx, journal.ListFilter{Credential: f.Credential, States: resumableStates})
	if err != nil {
		return out, err
	}
	out.Resumable = len(resumable)
	return out, nil
}

// journalRun is the newest run with run id id of credential cred.
func (s *Server) journalRun(ctx context.Context, id, cred string) (studioapi.JournalRun, error) {
	list, err := s.journal.Summaries(ctx, journal.ListFilter{RunID: id, Credential: cred, Limit: 1})
	if err != nil {
		return studioapi.JournalRun{}, err
	}
	if len(list) == 0 {
		return studioapi.JournalRun{}, fmt.Errorf("run %s: %w", id, journal.ErrNotFound)
	}
	return s.ask.listed(list[0]), nil
}

// listed is sm as a listing shows it: the task shortened and redacted,
// why it ended in words.
func (a *asker) listed(sm journal.Summary) studioapi.JournalRun {
	run := studioapi.JournalRun{
		ID: sm.RunID, Agent: a.def.Name, State: string(sm.State),
		Resumable: sm.State == journal.StateInterrupted || sm.State == journal.StateFailed,
		Task:      shorten(a.scrub(strings.Join(strings.Fields(sm.Task), " ")), listTask),
		Steps:     sm.Steps, Delegations: sm.Delegations, Attempts: sm.Attempts,
		Started: sm.Created.UTC(), Updated: sm.Updated.UTC(), Status: sm.Status, Keyed: sm.Key != "",
	}
	if a.journal != nil && sm.State == journal.StateRunning && !a.journal.Running(sm.ID) {
		// Left running by this process's own shutdown (cutJournal): the
		// next process marks it interrupted.
		run.State, run.Resumable = string(journal.StateInterrupted), true
	}
	// Errors span lines and quote bodies: one line, redacted, bounded,
	// with what a person can do after it.
	line := func(s string) string { return shorten(a.scrub(strings.Join(strings.Fields(s), " ")), listWhy) }
	switch journal.State(run.State) {
	case journal.StateRunning:
		run.Why = fmt.Sprintf("running now (attempt %d)", sm.Attempts)
	case journal.StateInterrupted:
		run.Why = "its process ended while it ran (a crash, a kill, or a shutdown that cut it off); " + resumeHint
	case journal.StateFailed:
		run.Why = line(sm.Error) + "; " + resumeHint
	case journal.StateDone:
		run.Why = line(cmp.Or(sm.Reason, sm.Error))
		if run.Why == "" {
			run.Why = sm.Status
		}
	case journal.StateBroken:
		run.Why = line(sm.Error) + "; it is never resumed"
	}
	return run
}

// shorten cuts s to n characters, marking the cut.
func shorten(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
