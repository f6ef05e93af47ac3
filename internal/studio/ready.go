package studio

import (
	"fmt"
	"net/http"

	"github.com/switchboard-run/switchboard/internal/mcphttp"
	"github.com/switchboard-run/switchboard/internal/studioapi"
)

// Readiness: GET /readyz answers 200 while the studio takes new work, and
// 503 before every agent has had its first start, while an agent is not
// running (starting, restarting, given up), and from the moment Close
// begins. An agent stopped on request does not count against it: a person
// took it out, and the studio serves the others. The body says which, in
// counts only: /readyz is outside the gate (a probe has no token), and the
// agents' names are for the gated API.

// The statuses of /readyz's body, one word each (the reason is for people).
const (
	readyOK           = "ready"
	readyStarting     = "starting"      // an agent has not finished its first start
	readyAgentsDown   = "agents_down"   // an agent is starting again, restarting or given up
	readyShuttingDown = "shutting_down" // Close has begun
)

// readiness is the studio's answer to /readyz: its status, and why when
// it is not ready.
func (s *Studio) readiness() (status, reason string) {
	if s.closed.Load() {
		return readyShuttingDown, "the studio is shutting down"
	}
	starting, down := 0, 0
	for _, name := range s.names {
		m := s.agents[name]
		select {
		case <-m.proc.FirstDone():
		default:
			starting++
			continue
		}
		switch st := m.proc.Status(); {
		case st.State == studioapi.StateStopped:
		case st.State != studioapi.StateRunning || st.Upstream == nil:
			down++
		}
	}
	switch {
	case starting > 0:
		return readyStarting, fmt.Sprintf("%d of %d agents have not finished their first start", starting, len(s.names))
	case down > 0:
		return readyAgentsDown, fmt.Sprintf("%d of %d agents not running", down, len(s.names))
	}
	return readyOK, ""
}

func (s *Studio) serveReadyz(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET")
		mcphttp.WriteJSONError(w, http.StatusMethodNotAllowed, "GET /readyz is the studio's readiness")
		return
	}
	status, why := s.readiness()
	if status != readyOK {
		mcphttp.WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"status": status, "reason": why})
		return
	}
	mcphttp.WriteJSON(w, http.StatusOK, map[string]string{"status": status})
}
