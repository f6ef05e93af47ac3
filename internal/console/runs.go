package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/switchboard-run/switchboard/internal/mcphttp"
	"github.com/switchboard-run/switchboard/internal/observe"
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
