package studio

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/switchboard-run/switchboard/internal/mcphttp"
	"github.com/switchboard-run/switchboard/pool"
)

// AgentInfo is one agent as /api/agents shows it.
type AgentInfo struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	State       State  `json:"state"`
	Restarts    int    `json:"restarts"`
	// PID is the agent process's id while it has one.
	PID int `json:"pid,omitempty"`
	// URL is the agent's MCP endpoint through the studio.
	URL string `json:"url"`
	// Tools are the names of the agent's tools, listed over MCP when it is
	// running; ToolsError says why they could not be.
	Tools      []string `json:"tools"`
	ToolsError string   `json:"tools_error,omitempty"`
	// LastError says why the agent last exited, and LastErrorAt when,
	// while it is not running; once it runs again both are empty and
	// LastExit keeps the reason, as history.
	LastError   string     `json:"last_error,omitempty"`
	LastErrorAt *time.Time `json:"last_error_at,omitempty"`
	LastExit    string     `json:"last_exit,omitempty"`
	// RetryAt is when a restarting agent's next start begins;
	// ConsecutiveFailures counts its failed runs in a row (it is given up
	// after GiveUpAfter).
	RetryAt             *time.Time `json:"retry_at,omitempty"`
	ConsecutiveFailures int        `json:"consecutive_failures,omitempty"`
}

// GiveUpAfter is how many failed runs in a row give an agent up.
const GiveUpAfter = giveUpAfter

// Agents returns every agent's state, sorted by name, without tools: it
// does no I/O.
func (s *Studio) Agents() []AgentInfo {
	infos, _ := s.agentInfos()
	return infos
}

// agentInfos is Agents along with the status snapshot each entry was made
// from, so that a caller acting on an agent's state acts on the state shown.
func (s *Studio) agentInfos() ([]AgentInfo, []agentStatus) {
	out := make([]AgentInfo, 0, len(s.names))
	sts := make([]agentStatus, 0, len(s.names))
	for _, name := range s.names {
		m := s.agents[name]
		st := m.proc.status()
		sts = append(sts, st)
		out = append(out, AgentInfo{
			Name:        name,
			Description: m.proc.def.Description,
			State:       st.state,
			Restarts:    st.restarts,
			PID:         st.pid,
			URL:         s.AgentURL(name),
			Tools:       []string{},
			LastError:   st.lastErr,
			LastExit:    st.lastExit,
		})
		info := &out[len(out)-1]
		if st.lastErr != "" && !st.lastErrAt.IsZero() {
			at := st.lastErrAt
			info.LastErrorAt = &at
		}
		if st.state == StateRestarting && !st.nextStart.IsZero() {
			at := st.nextStart
			info.RetryAt = &at
		}
		if st.state != StateRunning {
			info.ConsecutiveFailures = st.failures
		}
	}
	return out, sts
}

// ListAgents is Agents with each running agent's tools, listed through the
// studio's pool (cached there for a minute), concurrently and each bounded by
// listToolsTimeout.
func (s *Studio) ListAgents(ctx context.Context) []AgentInfo {
	infos, sts := s.agentInfos()
	var wg sync.WaitGroup
	for i, st := range sts {
		if st.state != StateRunning || st.upstream == nil {
			continue
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, listToolsTimeout)
			defer cancel()
			// Straight to the agent, not through the proxy: the studio is
			// not a client of its own routes.
			tools, err := s.pool.ListTools(ctx, &pool.Server{
				Name:            infos[i].Name,
				URL:             st.upstream.String(),
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
