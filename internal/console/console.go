// Package console is the studio's pages and the API behind them: the
// fleet at /, the runs at /runs and /runs/<id>, an agent's page at
// /agents/<name> (page.go, with the templates, script and style embedded
// from page/), and the console's part of /api/:
//
//	GET  /api/agents                  the agents, their state and tools (agents.go)
//	GET  /api/overview                what the fleet page shows: agents, pools, recent delegations
//	GET  /api/delegations             the most recent tools/calls through the proxy (delegations.go)
//	GET  /api/runs                    the run list: ?agent= &outcome= &q= &limit= &before= (runs.go)
//	GET  /api/runs/<id>               one run: task, answer, every hop
//	GET  /api/agents/<name>           one agent in full (agentpage.go)
//	POST /api/agents/<name>/restart   restart it        } checkMutation: POST, JSON,
//	POST /api/agents/<name>/stop      stop it           } same origin; and the token
//	POST /api/agents/<name>/start     start it again    } in token mode, as all /api/
//	POST /api/agents/<name>/call      call a tool through the proxy
//	GET  /api/agents/<name>/runs[/<id>]       the agent's run journal (journal.go)
//	POST /api/agents/<name>/runs/<id>/resume  resume a run of it           } checkMutation too
//	POST /api/agents/<name>/ask       start a task from the page   } checkMutation too (ask.go)
//	POST /api/runs/<id>/rerun         the same task again          }
//	GET  /api/asks/<id>[/events]      an ask so far; its server-sent events
//	POST /api/asks/<id>/elicit        the person's answer to an elicitation } checkMutation
//	GET  /api/agents/<name>/servers[/<server>[/rpc]]  the inspector (inspector.go)
//	POST /api/agents/<name>/servers/<server>/{read,prompt}  resources/read, prompts/get } checkMutation
//	GET  /login, POST /login, POST /logout  sign-in in token mode (auth.go)
//
// It renders what package observe recorded and what the supervisor says;
// it records nothing itself. Routing, the gate in front (Host, Origin,
// token) and /api/agents/<name>/mcp are the studio's.
package console

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/switchboard-run/switchboard/internal/authstate"
	"github.com/switchboard-run/switchboard/internal/logging"
	"github.com/switchboard-run/switchboard/internal/mcphttp"
	"github.com/switchboard-run/switchboard/internal/observe"
	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/internal/supervisor"
	"github.com/switchboard-run/switchboard/pool"
)

// Options are what the console shows and acts on; all are required.
type Options struct {
	// URL is the studio's base URL.
	URL string
	// Names are the agents, sorted; Procs their supervisors (or, for an
	// agent on another host, what stands in for one), by name.
	Names []string
	Procs map[string]supervisor.Member
	// Token is the studio's bearer token, sent by the tool calls made from
	// the page; "" without one.
	Token string
	// Pool lists the agents' tools and makes the page's tool calls.
	Pool *pool.Pool
	// Tools learns the tools /api/agents lists, for the metrics' labels.
	Tools *observe.Tools
	// Pools are the studio's and every running agent's pool.
	Pools func(ctx context.Context) []studioapi.PoolInfo

	Delegations *observe.Delegations
	Runs        *observe.Runs
	Series      *observe.Series
	Logs        *observe.Logs
	// Scrub redacts what a tool call from the page answers.
	Scrub  *logging.Scrubber
	Logger *slog.Logger
	// Auth is the sign-in state of the agents' OAuth servers, for the
	// fleet page's Sign-in section; nil: the section is left out.
	Auth func() authstate.Report
	// Models is the model each agent runs, by name, for the agent
	// listing; an agent missing from it is listed without one.
	Models map[string]*studioapi.AgentModel
	// Headers, by agent name, are sent with the tools/list made straight
	// to an agent's address (a remote agent's bearer token); optional.
	Headers map[string]map[string]string
	// HTTP reads the agents' run journals at their addresses (journal.go);
	// default http.DefaultClient.
	HTTP *http.Client
}

// Console serves the pages and their API.
type Console struct {
	Options
	asks     asks     // the asks started from the page (ask.go)
	sessions sessions // the page's sign-ins in token mode (auth.go)
	rpc      rpcLog   // the inspector's recent requests (inspector.go)
}

// New returns the console of o.
func New(o *Options) *Console { return &Console{Options: *o} }

// ServeAPI serves the console's part of /api/ and reports whether path
// (r's escaped path) was one of its routes.
func (s *Console) ServeAPI(w http.ResponseWriter, r *http.Request, path string) bool {
	get := func(serve func()) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET")
			mcphttp.WriteJSONError(w, http.StatusMethodNotAllowed, "GET "+path+" only")
			return
		}
		serve()
	}
	// The overview and the delegations say what they are when asked with
	// another method.
	getIs := func(what string, serve func()) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET")
			mcphttp.WriteJSONError(w, http.StatusMethodNotAllowed, "GET "+path+" "+what)
			return
		}
		serve()
	}
	switch path {
	case "/api/overview":
		getIs("is the studio page's data", func() { mcphttp.WriteJSON(w, http.StatusOK, s.Overview(r.Context())) })
		return true
	case "/api/delegations":
		getIs("lists the most recent delegations", func() { s.serveDelegations(w, r) })
		return true
	}
	if rest, ok := strings.CutPrefix(path, "/api/asks/"); ok {
		s.serveAsks(w, r, rest)
		return true
	}
	if id, ok := strings.CutSuffix(strings.TrimPrefix(path, "/api/runs/"), "/rerun"); ok && strings.HasPrefix(path, "/api/runs/") && ValidName(id) {
		s.serveRerun(w, r, id)
		return true
	}
	if path == "/api/runs" {
		get(func() { s.serveRuns(w, r) })
		return true
	}
	if id, ok := strings.CutPrefix(path, "/api/runs/"); ok {
		if !ValidName(id) {
			NotFound(w, path)
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
	case action == "restart", action == "stop", action == "start", action == "call", action == "ask":
	case action == "runs", strings.HasPrefix(action, "runs/"):
	case action == "servers", strings.HasPrefix(action, "servers/"):
	default:
		// The MCP route, or a 404 there: "/api/agents/<name>/" included,
		// as every route here is matched exactly.
		return false
	}
	if _, known := s.Procs[name]; !known || !ValidName(name) {
		mcphttp.WriteJSONError(w, http.StatusNotFound, "unknown agent "+quote(name)+"; known agents: "+strings.Join(s.Names, ", "))
		return true
	}
	if action == "" {
		get(func() {
			d, _ := s.AgentDetail(r.Context(), name)
			mcphttp.WriteJSON(w, http.StatusOK, d)
		})
		return true
	}
	if action == "ask" {
		s.serveStartAsk(w, r, name)
		return true
	}
	if rest, ok := strings.CutPrefix(action, "servers"); ok {
		s.serveInspector(w, r, name, rest)
		return true
	}
	if rest, ok := strings.CutPrefix(action, "runs"); ok {
		s.serveJournal(w, r, name, rest)
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

// IsPage reports whether path is one of the console's pages.
func IsPage(path string) bool {
	return path == "/runs" || strings.HasPrefix(path, "/runs/") || strings.HasPrefix(path, "/agents/")
}

// NotFound answers 404 for path, a route the studio does not have,
// saying where the agents are.
func NotFound(w http.ResponseWriter, path string) {
	mcphttp.WriteJSONError(w, http.StatusNotFound, fmt.Sprintf("no such endpoint %s: agents are at /api/agents/<name>/mcp, the list at /api/agents", path))
}

// ValidName accepts what an agent folder name may be; anything else
// (percent-encoding, dots alone) cannot be an agent.
func ValidName(name string) bool {
	if name == "" || name == "." || name == ".." {
		return false
	}
	for _, c := range name {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
		default:
			return false
		}
	}
	return true
}
