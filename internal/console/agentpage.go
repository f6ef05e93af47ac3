package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/mcphttp"
	"github.com/switchboard-run/switchboard/internal/observe"
	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/internal/supervisor"
	"github.com/switchboard-run/switchboard/pool"
)

// The agent page's data and actions: GET /api/agents/<name> (state,
// history, tools with their schemas, recent calls, the log tail, the pool,
// the last hour), and POST /api/agents/<name>/{restart,stop,start,call}.
//
// A tool called from the page goes through the studio's own proxy route,
// /api/agents/<name>/mcp, with the studio's pool, as any MCP client's call
// would: it is observed, recorded as a run and counted like the others.

// callTimeout bounds a tool call made from the page.
const callTimeout = 2 * time.Minute

// maxActionBody bounds a mutating request's body.
const maxActionBody = 1 << 20

// AgentDetail gathers what the agent page shows; ok is false for an
// unknown agent.
func (s *Console) AgentDetail(ctx context.Context, name string) (studioapi.AgentDetail, bool) {
	m, ok := s.Procs[name]
	if !ok {
		return studioapi.AgentDetail{}, false
	}
	var d studioapi.AgentDetail
	info, st := s.agent(name)
	d.AgentInfo = info
	d.History = m.History()
	d.ToolSchemas = []studioapi.ToolInfo{}
	var wg sync.WaitGroup
	if st.Routable() {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, listToolsTimeout)
			defer cancel()
			tools, err := s.Pool.ListTools(ctx, &pool.Server{Name: name, URL: st.Upstream.String(), ProtocolVersion: pool.Protocol20251125, Headers: s.Headers[name]})
			if err != nil {
				d.ToolsError = s.scrub(err.Error())
				return
			}
			for _, t := range tools {
				d.Tools = append(d.Tools, t.Name)
				schema, _ := json.Marshal(t.InputSchema)
				d.ToolSchemas = append(d.ToolSchemas, studioapi.ToolInfo{Name: t.Name, Description: t.Description, InputSchema: schema})
			}
		})
	}
	wg.Go(func() {
		for _, p := range s.Pools(ctx) {
			if p.Process == name {
				d.Pool = &p
			}
		}
	})
	for _, c := range s.Delegations.Recent(observe.RecentDelegations) {
		if c.Agent == name || c.From == name {
			d.Calls = append(d.Calls, c)
		}
		if len(d.Calls) == 20 {
			break
		}
	}
	d.Logs, _ = s.Logs.Tail(name)
	d.Series = s.Series.Minutes(name)
	wg.Wait()
	return d, true
}

// agentVersion changes when anything the agent page shows but the calls
// changes.
func (s *Console) agentVersion(name string) string {
	m := s.Procs[name]
	st := m.Status()
	_, lines := s.Logs.Tail(name)
	v := fmt.Sprintf("%s.%d.%d.%d.%d", st.State, st.PID, st.Restarts, len(m.History()), lines)
	if r := st.Remote; r != nil {
		v += fmt.Sprintf(".%t.%s.%s", r.Reachable, r.Error, r.Metrics)
	}
	return v
}

// checkMutation admits a state-changing request only from a client that is
// not a browser page of another site: it must be a POST with a JSON body
// (a cross-site form cannot send one, and a cross-site fetch of one needs
// a CORS preflight that the studio never grants), and any Origin or
// Sec-Fetch-Site must say it comes from the studio itself. The token (in
// token mode) was checked with every /api/ request; it travels in a
// header, never a cookie, so a browser never adds it on its own.
func checkMutation(r *http.Request) (int, error) {
	if r.Method != http.MethodPost {
		return http.StatusMethodNotAllowed, fmt.Errorf("%s needs POST, not %s", r.URL.Path, r.Method)
	}
	ct := r.Header.Get("Content-Type")
	if mt, _, _ := strings.Cut(ct, ";"); !strings.EqualFold(strings.TrimSpace(mt), "application/json") {
		return http.StatusUnsupportedMediaType, fmt.Errorf("%s needs Content-Type: application/json, got %q", r.URL.Path, ct)
	}
	if o := r.Header.Get("Origin"); o != "" {
		if o != "http://"+r.Host && o != "https://"+r.Host {
			return http.StatusForbidden, fmt.Errorf("%w: Origin %q is not this studio (%s); actions are taken only from the studio's own page", mcphttp.ErrForeignOrigin, o, r.Host)
		}
	}
	switch v := r.Header.Get("Sec-Fetch-Site"); v {
	case "", "same-origin", "none":
	default:
		return http.StatusForbidden, fmt.Errorf("%w: Sec-Fetch-Site %q; actions are taken only from the studio's own page", mcphttp.ErrForeignOrigin, v)
	}
	return 0, nil
}

// readJSON checks a state-changing request (checkMutation) and reads its
// body, one JSON object of at most maxActionBody bytes with no unknown
// member, into v. fields names what the body holds, for the error. It
// answers the request itself when it returns false.
func readJSON(w http.ResponseWriter, r *http.Request, v any, fields string) bool {
	if code, err := checkMutation(r); err != nil {
		if code == http.StatusMethodNotAllowed {
			w.Header().Set("Allow", "POST")
		}
		mcphttp.WriteJSONError(w, code, err.Error())
		return false
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxActionBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		mcphttp.WriteJSONError(w, http.StatusBadRequest, fmt.Sprintf("the body of %s must be a JSON object (%s): %v", r.URL.Path, fields, err))
		return false
	}
	return true
}

// actionRequest is the body of a POST to an agent's action.
type actionRequest struct {
	Reason    string          `json:"reason"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
}

func (s *Console) serveAgentAction(w http.ResponseWriter, r *http.Request, name, action string) {
	var req actionRequest
	if !readJSON(w, r, &req, "reason, tool, arguments") {
		return
	}
	reason := strings.TrimSpace(req.Reason)
	if reason == "" {
		reason = "asked from the studio page"
	}
	reason = observe.Elide(reason, 200)
	var err error
	switch action {
	case "restart":
		err = s.Procs[name].Restart(reason)
	case "stop":
		err = s.Procs[name].Stop(reason)
	case "start":
		err = s.Procs[name].Start(reason)
	case "call":
		s.serveCall(w, r, name, req)
		return
	}
	switch {
	case errors.Is(err, supervisor.ErrNoProcess), errors.Is(err, supervisor.ErrNotStopped), errors.Is(err, supervisor.ErrNotSupervised):
		mcphttp.WriteJSONError(w, http.StatusConflict, fmt.Sprintf("cannot %s agent %s: %v", action, name, err))
		return
	case err != nil:
		mcphttp.WriteJSONError(w, http.StatusInternalServerError, err.Error())
		return
	}
	mcphttp.WriteJSON(w, http.StatusAccepted, map[string]any{"agent": name, "action": action, "reason": reason})
}

func (s *Console) serveCall(w http.ResponseWriter, r *http.Request, name string, req actionRequest) {
	if req.Tool == "" {
		mcphttp.WriteJSONError(w, http.StatusBadRequest, "the body needs \"tool\": the name of the tool to call")
		return
	}
	args := map[string]any{}
	if len(req.Arguments) > 0 && string(req.Arguments) != "null" {
		if err := json.Unmarshal(req.Arguments, &args); err != nil {
			mcphttp.WriteJSONError(w, http.StatusBadRequest, fmt.Sprintf("\"arguments\" must be a JSON object: %v", err))
			return
		}
	}
	srv := &pool.Server{Name: name, URL: s.AgentURL(name), ProtocolVersion: pool.Protocol20251125}
	if s.Token != "" {
		srv.Headers = map[string]string{"Authorization": "Bearer " + s.Token}
	}
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	res, err := s.Pool.CallTool(ctx, srv, &mcp.CallToolParams{Name: req.Tool, Arguments: args})
	if err != nil {
		mcphttp.WriteJSONError(w, http.StatusBadGateway, s.Scrub.String(fmt.Sprintf("calling %s on agent %s: %v", req.Tool, name, err)))
		return
	}
	raw, _ := json.Marshal(res)
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	mcphttp.WriteJSON(w, http.StatusOK, studioapi.CallResult{
		Tool: req.Tool, IsError: res.IsError,
		Text:   s.Scrub.String(strings.Join(parts, "\n")),
		Result: s.Scrub.JSON(raw),
	})
}
