package console

// A model step's messages and response, behind a click on the run page:
// GET /api/agents/<name>/runs/<id>/steps/<n>, the agent's GET
// /runs/<id>/steps/<n> read with the studio's credential as the rest of the
// journal is (journal.go), and redacted again with the console's scrubber
// (the studio's token and the credentials of its environment), which knows
// secrets the agent may not. The page fetches it when a step is opened,
// and renders it as text (page/studio.js).

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/switchboard-run/switchboard/internal/mcphttp"
	"github.com/switchboard-run/switchboard/internal/studioapi"
)

// JournalStep is step n of run id in agent name's journal.
func (s *Console) JournalStep(r *http.Request, name, id string, n int) (studioapi.StepContent, error) {
	var sc studioapi.StepContent
	if err := s.agentGet(r.Context(), name, "/"+url.PathEscape(id)+"/steps/"+strconv.Itoa(n), "", &sc); err != nil {
		return sc, err
	}
	sc.Strings(s.scrub)
	return sc, nil
}

// serveStep answers GET /api/agents/<name>/runs/<id>/steps/<n>.
func (s *Console) serveStep(w http.ResponseWriter, r *http.Request, name, id, step string) {
	n, err := strconv.Atoi(step)
	if err != nil || n < 1 || strconv.Itoa(n) != step {
		mcphttp.WriteJSONError(w, http.StatusNotFound, fmt.Sprintf("no step %q of run %s: a step is a number from 1", cutText(step, 32), id))
		return
	}
	sc, err := s.JournalStep(r, name, id, n)
	var bad *badQueryError
	switch {
	case err == nil:
		mcphttp.WriteJSON(w, http.StatusOK, sc)
	case errors.Is(err, ErrNoSuchRun):
		mcphttp.WriteJSONError(w, http.StatusNotFound, err.Error())
	case errors.As(err, &bad):
		mcphttp.WriteJSONError(w, http.StatusBadRequest, bad.msg)
	default:
		mcphttp.WriteJSONError(w, http.StatusBadGateway, err.Error())
	}
}
