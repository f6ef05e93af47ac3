package console

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/switchboard-run/switchboard/internal/mcphttp"
	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/internal/supervisor"
	"github.com/switchboard-run/switchboard/pool"
)

// listToolsTimeout bounds one agent's tools/list for /api/agents.
const listToolsTimeout = 5 * time.Second

// Agents returns every agent's state, sorted by name, without tools: it
// does no I/O.
func (s *Console) Agents() []studioapi.AgentInfo {
	infos, _ := s.agentInfos()
	return infos
}

// agentInfos is Agents along with the status snapshot each entry was made
// from, so that a caller acting on an agent's state acts on the state shown.
func (s *Console) agentInfos() ([]studioapi.AgentInfo, []supervisor.Status) {
	out := make([]studioapi.AgentInfo, 0, len(s.Names))
	sts := make([]supervisor.Status, 0, len(s.Names))
	for _, name := range s.Names {
		m := s.Procs[name]
		st := m.Status()
		sts = append(sts, st)
		out = append(out, studioapi.AgentInfo{
			Name:        name,
			Description: m.Def().Description,
			State:       st.State,
			Restarts:    st.Restarts,
			PID:         st.PID,
			URL:         s.AgentURL(name),
			Tools:       []string{},
			LastError:   st.LastErr,
			LastExit:    st.LastExit,
			Model:       s.model(name),
		})
		info := &out[len(out)-1]
		if st.Remote != nil {
			r := *st.Remote
			info.Remote = &r
		}
		if st.LastErr != "" && !st.LastErrAt.IsZero() {
			at := st.LastErrAt
			info.LastErrorAt = &at
		}
		if st.State == studioapi.StateRestarting && !st.NextStart.IsZero() {
			at := st.NextStart
			info.RetryAt = &at
		}
		if st.State != studioapi.StateRunning {
			info.ConsecutiveFailures = st.Failures
		}
	}
	return out, sts
}

// model is a copy of name's Models entry, so that no listing's reader can
// change what the next one shows; nil without one.
func (s *Console) model(name string) *studioapi.AgentModel {
	m, ok := s.Models[name]
	if !ok || m == nil {
		return nil
	}
	c := *m
	return &c
}

// ListAgents is Agents with each running (or remote) agent's tools, listed through the
// studio's pool (cached there for a minute), concurrently and each bounded by
// listToolsTimeout.
func (s *Console) ListAgents(ctx context.Context) []studioapi.AgentInfo {
	infos, sts := s.agentInfos()
	var wg sync.WaitGroup
	for i, st := range sts {
		if !st.Routable() {
			continue
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, listToolsTimeout)
			defer cancel()
			// Straight to the agent, not through the proxy: the studio is
			// not a client of its own routes.
			tools, err := s.Pool.ListTools(ctx, &pool.Server{
				Name:            infos[i].Name,
				URL:             st.Upstream.String(),
				ProtocolVersion: pool.Protocol20251125,
				Headers:         s.Headers[infos[i].Name],
			})
			if err != nil {
				infos[i].ToolsError = s.scrub(err.Error())
				return
			}
			for _, t := range tools {
				infos[i].Tools = append(infos[i].Tools, t.Name)
			}
			s.Tools.Learn(infos[i].Name, infos[i].Tools, true)
		})
	}
	wg.Wait()
	return infos
}

// scrub redacts the studio's secrets from text the listing shows: an
// error naming an agent's URL may carry a remote agent's token in its
// query.
func (s *Console) scrub(text string) string {
	if s.Scrub == nil {
		return text
	}
	return s.Scrub.String(text)
}

// ServeAgents answers GET /api/agents.
func (s *Console) ServeAgents(w http.ResponseWriter, r *http.Request) {
	mcphttp.WriteJSON(w, http.StatusOK, s.ListAgents(r.Context()))
}

// AgentURL is the proxied MCP endpoint of agent name.
func (s *Console) AgentURL(name string) string { return s.URL + "/api/agents/" + name + "/mcp" }

// agent is agentInfos' entry for name, with its status.
func (s *Console) agent(name string) (studioapi.AgentInfo, supervisor.Status) {
	infos, sts := s.agentInfos()
	for i := range infos {
		if infos[i].Name == name {
			return infos[i], sts[i]
		}
	}
	return studioapi.AgentInfo{}, supervisor.Status{}
}
