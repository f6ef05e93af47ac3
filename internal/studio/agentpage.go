package studio

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

	"github.com/switchboard-run/switchboard/internal/logging"
	"github.com/switchboard-run/switchboard/internal/mcphttp"
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

// logTailLines is how many of an agent's log lines the page keeps.
const logTailLines = 200

// maxLogLine bounds one kept line.
const maxLogLine = 2 << 10

// callTimeout bounds a tool call made from the page.
const callTimeout = 2 * time.Minute

// maxActionBody bounds a mutating request's body.
const maxActionBody = 1 << 20

type logTails struct {
	scrub *logging.Scrubber

	mu    sync.Mutex // protects lines and total
	lines map[string][]studioapi.LogLine
	total map[string]int // lines ever seen per agent, for pollers
}

func newLogTails(scrub *logging.Scrubber) *logTails {
	return &logTails{scrub: scrub, lines: make(map[string][]studioapi.LogLine), total: make(map[string]int)}
}

// add keeps a line the supervisor relays from agent name.
func (t *logTails) add(name, line string) {
	l := studioapi.LogLine{Time: time.Now(), Line: elide(t.scrub.String(line), maxLogLine)}
	t.mu.Lock()
	defer t.mu.Unlock()
	ls := t.lines[name]
	if len(ls) >= logTailLines {
		ls = append(ls[:0], ls[1:]...)
	}
	t.lines[name] = append(ls, l)
	t.total[name]++
}

// tail returns name's kept lines, oldest first, and how many it ever wrote.
func (t *logTails) tail(name string) ([]studioapi.LogLine, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]studioapi.LogLine(nil), t.lines[name]...), t.total[name]
}

// AgentDetail gathers what the agent page shows; ok is false for an
// unknown agent.
func (s *Studio) AgentDetail(ctx context.Context, name string) (studioapi.AgentDetail, bool) {
	m, ok := s.agents[name]
	if !ok {
		return studioapi.AgentDetail{}, false
	}
	infos, sts := s.agentInfos()
	var d studioapi.AgentDetail
	var st supervisor.Status
	for i := range infos {
		if infos[i].Name == name {
			d.AgentInfo, st = infos[i], sts[i]
		}
	}
	d.History = m.proc.History()
	d.ToolSchemas = []studioapi.ToolInfo{}
	var wg sync.WaitGroup
	if st.State == studioapi.StateRunning && st.Upstream != nil {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, listToolsTimeout)
			defer cancel()
			tools, err := s.pool.ListTools(ctx, &pool.Server{Name: name, URL: st.Upstream.String(), ProtocolVersion: pool.Protocol20251125})
			if err != nil {
				d.ToolsError = err.Error()
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
	for _, c := range s.delegations.Recent(recentDelegations) {
		if c.Agent == name || c.From == name {
			d.Calls = append(d.Calls, c)
		}
		if len(d.Calls) == 20 {
			break
		}
	}
	d.Logs, _ = s.logs.tail(name)
	d.Series = s.series.Series(name)
	wg.Wait()
	return d, true
}

// agentVersion changes when anything the agent page shows but the calls
// changes.
func (s *Studio) agentVersion(name string) string {
	m := s.agents[name]
	st := m.proc.Status()
	_, lines := s.logs.tail(name)
	return fmt.Sprintf("%s.%d.%d.%d.%d", st.State, st.PID, st.Restarts, len(m.proc.History()), lines)
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

// actionRequest is the body of a POST to an agent's action.
type actionRequest struct {
	Reason    string          `json:"reason"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
}

func (s *Studio) serveAgentAction(w http.ResponseWriter, r *http.Request, name, action string) {
	if code, err := checkMutation(r); err != nil {
		if code == http.StatusMethodNotAllowed {
			w.Header().Set("Allow", "POST")
		}
		mcphttp.WriteJSONError(w, code, err.Error())
		return
	}
	var req actionRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxActionBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		mcphttp.WriteJSONError(w, http.StatusBadRequest, fmt.Sprintf("the body of %s must be a JSON object (reason, tool, arguments): %v", r.URL.Path, err))
		return
	}
	reason := strings.TrimSpace(req.Reason)
	if reason == "" {
		reason = "asked from the studio page"
	}
	reason = elide(reason, 200)
	var err error
	switch action {
	case "restart":
		err = s.Restart(name, reason)
	case "stop":
		err = s.Stop(name, reason)
	case "start":
		err = s.StartAgent(name, reason)
	case "call":
		s.serveCall(w, r, name, req)
		return
	}
	switch {
	case errors.Is(err, supervisor.ErrNoProcess), errors.Is(err, supervisor.ErrNotStopped):
		mcphttp.WriteJSONError(w, http.StatusConflict, fmt.Sprintf("cannot %s agent %s: %v", action, name, err))
		return
	case err != nil:
		mcphttp.WriteJSONError(w, http.StatusInternalServerError, err.Error())
		return
	}
	mcphttp.WriteJSON(w, http.StatusAccepted, map[string]any{"agent": name, "action": action, "reason": reason})
}

func (s *Studio) serveCall(w http.ResponseWriter, r *http.Request, name string, req actionRequest) {
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
	if s.opts.Token != "" {
		srv.Headers = map[string]string{"Authorization": "Bearer " + s.opts.Token}
	}
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	res, err := s.pool.CallTool(ctx, srv, &mcp.CallToolParams{Name: req.Tool, Arguments: args})
	if err != nil {
		mcphttp.WriteJSONError(w, http.StatusBadGateway, s.scrub.String(fmt.Sprintf("calling %s on agent %s: %v", req.Tool, name, err)))
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
		Text:   s.scrub.String(strings.Join(parts, "\n")),
		Result: s.scrub.JSON(raw),
	})
}
