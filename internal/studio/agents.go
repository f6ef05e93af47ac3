package studio

import (
	"context"
	"net/http"
	"sync"

	"github.com/switchboard-run/switchboard/internal/mcphttp"
	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/internal/supervisor"
	"github.com/switchboard-run/switchboard/pool"
)

// Agents returns every agent's state, sorted by name, without tools: it
// does no I/O.
func (s *Studio) Agents() []studioapi.AgentInfo {
	infos, _ := s.agentInfos()
	return infos
}

// agentInfos is Agents along with the status snapshot each entry was made
// from, so that a caller acting on an agent's state acts on the state shown.
func (s *Studio) agentInfos() ([]studioapi.AgentInfo, []supervisor.Status) {
	out := make([]studioapi.AgentInfo, 0, len(s.names))
	sts := make([]supervisor.Status, 0, len(s.names))
	for _, name := range s.names {
		m := s.agents[name]
		st := m.proc.Status()
		sts = append(sts, st)
		out = append(out, studioapi.AgentInfo{
			Name:        name,
			Description: m.proc.Def().Description,
			State:       st.State,
			Restarts:    st.Restarts,
			PID:         st.PID,
			URL:         s.AgentURL(name),
			Tools:       []string{},
			LastError:   st.LastErr,
			LastExit:    st.LastExit,
		})
		info := &out[len(out)-1]
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

// ListAgents is Agents with each running agent's tools, listed through the
// studio's pool (cached there for a minute), concurrently and each bounded by
// listToolsTimeout.
func (s *Studio) ListAgents(ctx context.Context) []studioapi.AgentInfo {
	infos, sts := s.agentInfos()
	var wg sync.WaitGroup
	for i, st := range sts {
		if st.State != studioapi.StateRunning || st.Upstream == nil {
			continue
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, listToolsTimeout)
			defer cancel()
			// Straight to the agent, not through the proxy: the studio is
			// not a client of its own routes.
			tools, err := s.pool.ListTools(ctx, &pool.Server{
				Name:            infos[i].Name,
				URL:             st.Upstream.String(),
				ProtocolVersion: pool.Protocol20251125,
			})
			if err != nil {
				infos[i].ToolsError = err.Error()
				return
			}
			for _, t := range tools {
				infos[i].Tools = append(infos[i].Tools, t.Name)
			}
			s.learnTools(infos[i].Name, infos[i].Tools, true)
		})
	}
	wg.Wait()
	return infos
}

func (s *Studio) serveAgents(w http.ResponseWriter, r *http.Request) {
	mcphttp.WriteJSON(w, http.StatusOK, s.ListAgents(r.Context()))
}
