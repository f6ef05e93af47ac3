package studio

import (
	"net/http"
	"time"

	"github.com/switchboard-run/switchboard/internal/authstate"
	"github.com/switchboard-run/switchboard/internal/mcphttp"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// AuthState is the sign-in state of every OAuth server the agents'
// tools/mcp.json name (internal/authstate), read from the token store the
// agents' pools use (the studio gives them its environment and Env): what
// GET /api/auth, `switchboard status` and the page (package console,
// through its Options.Auth) show. It never holds a
// token. It reads one small file per server, so the page can call it on
// every render.
func (s *Studio) AuthState() authstate.Report {
	defs := make([]*agentdef.Definition, 0, len(s.names))
	for _, name := range s.names {
		defs = append(defs, s.agents[name].proc.Def())
	}
	return authstate.ForAgents(defs, authstate.StoreFor(s.opts.Env), time.Now())
}

func (s *Studio) serveAuth(w http.ResponseWriter, _ *http.Request) {
	mcphttp.WriteJSON(w, http.StatusOK, s.AuthState())
}
