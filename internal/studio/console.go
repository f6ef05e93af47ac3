package studio

import (
	"net/http"
	"os"
	"strings"

	"github.com/switchboard-run/switchboard/internal/logging"
	"github.com/switchboard-run/switchboard/internal/mcphttp"
)

// The console: what the studio records for its pages beyond the overview
// (runs with arguments and results, per-minute series, agents' log tails)
// and its routes:
//
//	GET  /runs, /runs/<id>            the run list and a run's page (page.go)
//	GET  /agents/<name>               an agent's page
//	GET  /api/runs                    the run list: ?agent= &outcome= &q= &limit= &before=
//	GET  /api/runs/<id>               one run: task, answer, every hop
//	GET  /api/agents/<name>           one agent in full (agentpage.go)
//	POST /api/agents/<name>/restart   restart it        } checkMutation: POST, JSON,
//	POST /api/agents/<name>/stop      stop it           } same origin; and the token
//	POST /api/agents/<name>/start     start it again    } in token mode, as all /api/
//	POST /api/agents/<name>/call      call a tool through the proxy
//
// /api/agents/<name>/mcp stays the agent's MCP endpoint (routes.go).

type console struct {
	scrub  *logging.Scrubber
	calls  *callLog
	series *seriesLog // set once the agents are known
	logs   *logTails
}

// newConsole makes the console's records; what they keep is scrubbed of
// the credentials in the environment, the token and the agents' keys (by
// agent name).
func newConsole(o Options, deleg *delegationLog, agentKeys map[string]string) console {
	secrets := logging.SecretsFromEnv(append(os.Environ(), o.Env...))
	if o.Token != "" {
		secrets = append(secrets, o.Token)
	}
	for _, k := range agentKeys {
		secrets = append(secrets, k)
	}
	scrub := logging.NewScrubber(secrets)
	return console{scrub: scrub, calls: newCallLog(scrub, deleg), logs: newLogTails(scrub)}
}

// serveConsoleAPI serves the console's part of /api/ and reports whether
// path was one of its routes.
func (s *Studio) serveConsoleAPI(w http.ResponseWriter, r *http.Request, path string) bool {
	get := func(serve func()) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET")
			mcphttp.WriteJSONError(w, http.StatusMethodNotAllowed, "GET "+path+" only")
			return
		}
		serve()
	}
	if path == "/api/runs" {
		get(func() { s.serveRuns(w, r) })
		return true
	}
	if id, ok := strings.CutPrefix(path, "/api/runs/"); ok {
		if !validName(id) {
			notFound(w, path)
			return true
		}
		get(func() { s.serveRun(w, r, id) })
		return true
	}
	rest, ok := strings.CutPrefix(path, "/api/agents/")
	if !ok {
		return false
	}
	name, action, slash := strings.Cut(rest, "/")
	switch {
	case !slash: // /api/agents/<name>: the agent's page data
	case action == "restart", action == "stop", action == "start", action == "call":
	default:
		// The MCP route, or a 404 there: "/api/agents/<name>/" included,
		// as every route here is matched exactly.
		return false
	}
	if _, known := s.agents[name]; !known || !validName(name) {
		mcphttp.WriteJSONError(w, http.StatusNotFound, "unknown agent "+quote(name)+"; known agents: "+strings.Join(s.names, ", "))
		return true
	}
	if action == "" {
		get(func() {
			d, _ := s.AgentDetail(r.Context(), name)
			mcphttp.WriteJSON(w, http.StatusOK, d)
		})
		return true
	}
	s.serveAgentAction(w, r, name, action)
	return true
}

func quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"`
}

// isConsolePage reports whether path is one of the console's pages.
func isConsolePage(path string) bool {
	return path == "/runs" || strings.HasPrefix(path, "/runs/") || strings.HasPrefix(path, "/agents/")
}
