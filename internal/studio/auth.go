package studio

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/switchboard-run/switchboard/internal/authstate"
	"github.com/switchboard-run/switchboard/internal/mcphttp"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// AuthState is the sign-in state of every OAuth server the agents'
// tools/mcp.json name (internal/authstate), read from the token store the
// agents' pools use (the studio gives them its environment and Env): what
// GET /api/auth, `switchboard status` and the page show. It never holds a
// token. It reads one small file per server, so the page can call it on
// every render.
func (s *Studio) AuthState() authstate.Report {
	defs := make([]*agentdef.Definition, 0, len(s.names))
	for _, name := range s.names {
		defs = append(defs, s.agents[name].proc.def)
	}
	return authstate.ForAgents(defs, authstate.StoreFor(s.opts.Env), time.Now())
}

func (s *Studio) serveAuth(w http.ResponseWriter, _ *http.Request) {
	mcphttp.WriteJSON(w, http.StatusOK, s.AuthState())
}

// authVersion is what of r the page shows, for its ETag.
func authVersion(r authstate.Report) string {
	b, _ := json.Marshal(r) // by value: fmt would print the pointers' addresses
	return string(b)
}
