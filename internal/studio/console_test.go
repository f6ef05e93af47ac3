package studio

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/observe"
	"github.com/switchboard-run/switchboard/internal/projecttest"
	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/pool"
)

// apiClient talks to a studio's console API over real HTTP.
type apiClient struct {
	t     *testing.T
	base  string
	token string
	hc    *http.Client
}

func newAPIClient(t *testing.T, s *Studio, token string) *apiClient {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &apiClient{t: t, base: s.URL(), token: token, hc: &http.Client{Transport: tr}}
}

// do sends a request; hdr are extra headers ("" values delete the default).
func (c *apiClient) do(method, path, body string, hdr map[string]string) (int, []byte) {
	c.t.Helper()
	req, err := http.NewRequestWithContext(c.t.Context(), method, c.base+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (c *apiClient) getJSON(path string, v any) {
	c.t.Helper()
	code, b := c.do("GET", path, "", nil)
	if code != http.StatusOK {
		c.t.Fatalf("GET %s: %d %s", path, code, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		c.t.Fatalf("GET %s: %v: %s", path, err, b)
	}
}

// callThroughProxy calls tool on agent through the studio's proxy with a
// pool, as an MCP client outside the fleet does.
func callThroughProxy(t *testing.T, s *Studio, token, agent, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	p := pool.New(&pool.Options{Transport: tr})
	defer p.Close()
	srv := &pool.Server{Name: agent, URL: s.AgentURL(agent)}
	if token != "" {
		srv.Headers = map[string]string{"Authorization": "Bearer " + token}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	res, err := p.CallTool(ctx, srv, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s.%s: %v", agent, tool, err)
	}
	return res
}

// TestConsoleAPI covers the run list, a run, an agent's page data and a
// tool call from the page, over real HTTP against real agents.
func TestConsoleAPI(t *testing.T) {
	s := startStudio(t, projecttest.New(t, "oracle", "abacus"), nil)
	c := newAPIClient(t, s, "")
	res := callThroughProxy(t, s, "", "oracle", "ask", map[string]any{"task": "calculate 17 * 3"})
	if res.IsError {
		t.Fatalf("ask: %+v", res)
	}

	var list studioapi.RunList
	c.getJSON("/api/runs", &list)
	if len(list.Runs) != 1 {
		t.Fatalf("runs %+v, want one", list.Runs)
	}
	r := list.Runs[0]
	if r.Task != "calculate 17 * 3" || r.Agent != "oracle" || r.Tool != "ask" || r.Outcome != "ok" || r.Badge != "ok" || r.Delegations != 1 || r.Failures != 0 || r.Steps < 1 || r.DurationMS <= 0 || r.Start.IsZero() {
		t.Errorf("run %+v", r)
	}

	var run studioapi.Run
	c.getJSON("/api/runs/"+r.ID, &run)
	if !strings.Contains(run.Answer, "51") {
		t.Errorf("answer %q", run.Answer)
	}
	if len(run.Hops) != 2 {
		t.Fatalf("hops %+v, want 2", run.Hops)
	}
	ask, calc := run.Hops[0], run.Hops[1]
	if ask.Agent != "oracle" || ask.Tool != "ask" || ask.From != "" || ask.Depth != 0 || ask.OffsetMS != 0 || !strings.Contains(ask.Arguments, "calculate 17 * 3") {
		t.Errorf("first hop %+v", ask)
	}
	if calc.Agent != "abacus" || calc.Tool != "calculate" || calc.From != "oracle" || calc.Depth != 1 || calc.RunID != r.ID ||
		!strings.Contains(calc.Arguments, `"expression"`) || !strings.Contains(calc.Result, "51") || calc.Text == "" ||
		calc.OffsetMS < 0 || calc.OffsetMS+calc.DurationMS > ask.DurationMS+1 {
		t.Errorf("second hop %+v", calc)
	}

	for _, f := range []struct {
		query string
		n     int
	}{
		{"agent=abacus", 1}, {"agent=oracle", 1}, {"q=17", 1}, {"q=CALCULATE", 1}, {"q=nothing+like+it", 0},
		{"outcome=ok", 1}, {"outcome=failed", 0}, {"outcome=recovered", 0}, {"limit=1", 1},
	} {
		var l studioapi.RunList
		c.getJSON("/api/runs?"+f.query, &l)
		if len(l.Runs) != f.n {
			t.Errorf("/api/runs?%s: %d runs, want %d", f.query, len(l.Runs), f.n)
		}
	}
	for _, bad := range []string{"/api/runs?limit=0", "/api/runs?limit=x", "/api/runs?outcome=bogus", "/api/runs?before=-1"} {
		if code, b := c.do("GET", bad, "", nil); code != http.StatusBadRequest || !strings.Contains(string(b), "must be") {
			t.Errorf("GET %s: %d %s, want 400 naming what is wrong", bad, code, b)
		}
	}
	if code, _ := c.do("GET", "/api/runs/nosuch", "", nil); code != http.StatusNotFound {
		t.Errorf("GET /api/runs/nosuch: %d", code)
	}
	if code, _ := c.do("POST", "/api/runs", `{}`, nil); code != http.StatusMethodNotAllowed {
		t.Errorf("POST /api/runs: %d", code)
	}

	var d studioapi.AgentDetail
	c.getJSON("/api/agents/abacus", &d)
	if d.Name != "abacus" || d.State != studioapi.StateRunning || d.PID == 0 || len(d.Logs) == 0 || len(d.Series) != observe.SeriesMinutes {
		t.Errorf("agent detail: name %q state %s pid %d, %d log lines, %d minutes", d.Name, d.State, d.PID, len(d.Logs), len(d.Series))
	}
	var schema struct {
		Properties map[string]any `json:"properties"`
		Required   []string       `json:"required"`
	}
	for _, tool := range d.ToolSchemas {
		if tool.Name == "calculate" {
			json.Unmarshal(tool.InputSchema, &schema)
		}
	}
	if schema.Properties["expression"] == nil || fmt.Sprint(schema.Required) != "[expression]" {
		t.Errorf("calculate's schema %+v among %d tools", schema, len(d.ToolSchemas))
	}
	// No initialize is required: the oracle's pool reaches abacus in the
	// sessionless era (2026-07-28), which has none.
	if last := d.Series[len(d.Series)-1]; last.Calls < 1 || last.P50MS <= 0 {
		t.Errorf("the last minute %+v: want the calculate call", last)
	}
	if len(d.Calls) != 1 || d.Calls[0].Tool != "calculate" {
		t.Errorf("abacus's calls %+v", d.Calls)
	}
	if code, _ := c.do("GET", "/api/agents/nosuch", "", nil); code != http.StatusNotFound {
		t.Errorf("GET /api/agents/nosuch: %d", code)
	}

	// A tool call from the page goes through the proxy: it is a new run.
	code, b := c.do("POST", "/api/agents/abacus/call", `{"tool":"calculate","arguments":{"expression":"6*7"}}`, nil)
	var cr studioapi.CallResult
	if json.Unmarshal(b, &cr); code != http.StatusOK || cr.IsError || !strings.Contains(cr.Text, "42") {
		t.Fatalf("POST call: %d %s", code, b)
	}
	c.getJSON("/api/runs", &list)
	if len(list.Runs) != 2 || list.Runs[0].Agent != "abacus" || list.Runs[0].Tool != "calculate" || !strings.Contains(list.Runs[0].Task, "6*7") {
		t.Errorf("runs after the page's call %+v", list.Runs)
	}
	// A tool's own error is a result, shown as one.
	code, b = c.do("POST", "/api/agents/abacus/call", `{"tool":"calculate","arguments":{"expression":"1/"}}`, nil)
	if json.Unmarshal(b, &cr); code != http.StatusOK || !cr.IsError {
		t.Errorf("POST call of a failing expression: %d %s", code, b)
	}
	for _, bad := range []struct{ body, want string }{
		{`{"arguments":{}}`, `the body needs`},
		{`{"tool":"calculate","arguments":[1]}`, `must be a JSON object`},
		{`{"tool":"calculate","nonsense":1}`, `unknown field`},
		{`not json`, `must be a JSON object`},
	} {
		if code, b := c.do("POST", "/api/agents/abacus/call", bad.body, nil); code != http.StatusBadRequest || !strings.Contains(string(b), bad.want) {
			t.Errorf("POST call %s: %d %s, want 400 with %q", bad.body, code, b, bad.want)
		}
	}
	if code, b := c.do("POST", "/api/agents/abacus/call", `{"tool":"no_such_tool"}`, nil); code != http.StatusBadGateway || !strings.Contains(string(b), "no_such_tool") {
		t.Errorf("POST call of an unknown tool: %d %s", code, b)
	}

	// The pages render with what the API says.
	for path, want := range map[string]string{
		"/":                             "calculate 17 * 3",
		"/runs/" + r.ID:                 `data-tool="calculate"`,
		"/agents/abacus":                `data-tool="calculate"`,
		"/?q=17&fragment=1":             "calculate 17 * 3",
		"/runs/" + r.ID + "?fragment=1": "17 * 3 = 51",
		// The page's own call has no run id: its run is known by the call.
		"/agents/abacus?fragment=1": `<a href="/runs/call-`,
	} {
		code, b := c.do("GET", path, "", nil)
		if code != http.StatusOK || !strings.Contains(string(b), want) {
			t.Errorf("GET %s: %d, want %q in:\n%.3000s", path, code, want, b)
		}
	}
	for _, path := range []string{"/runs/nosuch", "/agents/nosuch", "/runs/..", "/agents/"} {
		if code, _ := c.do("GET", path, "", nil); code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, code)
		}
	}
	// An unchanged page is not sent again.
	req, _ := http.NewRequestWithContext(t.Context(), "GET", s.URL()+"/runs/"+r.ID+"?fragment=1", nil)
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	req.Header.Set("If-None-Match", resp.Header.Get("ETag"))
	if resp, err = c.hc.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// The ETag moves every 10 s, so a boundary may fall in between.
	if resp.StatusCode != http.StatusNotModified && resp.StatusCode != http.StatusOK {
		t.Errorf("If-None-Match: %d", resp.StatusCode)
	}
}

// TestConsoleActionsGuarded: restart, stop, start and call need the token
// in token mode, a POST with a JSON body, and the studio's own origin; and
// they do what they say, in the agent's history.
func TestConsoleActionsGuarded(t *testing.T) {
	const token = "console-token-0123456789"
	s := startStudio(t, projecttest.New(t, "abacus"), &Options{Token: token})
	c := newAPIClient(t, s, token)
	host := strings.TrimPrefix(s.URL(), "http://")

	for _, action := range []string{"restart", "stop", "start", "call"} {
		path := "/api/agents/abacus/" + action
		for _, bad := range []struct {
			name   string
			method string
			hdr    map[string]string
			body   string
			want   int
		}{
			{"no token", "POST", map[string]string{"Authorization": ""}, `{}`, http.StatusUnauthorized},
			{"a wrong token", "POST", map[string]string{"Authorization": "Bearer nope"}, `{}`, http.StatusUnauthorized},
			{"GET", "GET", nil, "", http.StatusMethodNotAllowed},
			{"a form body", "POST", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, `reason=x`, http.StatusUnsupportedMediaType},
			{"text/plain (a simple cross-site request)", "POST", map[string]string{"Content-Type": "text/plain"}, `{}`, http.StatusUnsupportedMediaType},
			{"another site's Origin", "POST", map[string]string{"Origin": "https://evil.example"}, `{}`, http.StatusForbidden},
			{"another local page's Origin", "POST", map[string]string{"Origin": "http://127.0.0.1:1"}, `{}`, http.StatusForbidden},
			{"Sec-Fetch-Site cross-site", "POST", map[string]string{"Sec-Fetch-Site": "cross-site"}, `{}`, http.StatusForbidden},
			{"Sec-Fetch-Site same-site", "POST", map[string]string{"Sec-Fetch-Site": "same-site"}, `{}`, http.StatusForbidden},
			{"a foreign Host (DNS rebinding)", "POST", map[string]string{"Host": "evil.example"}, `{}`, http.StatusForbidden},
		} {
			code, b := c.do(bad.method, path, bad.body, bad.hdr)
			if code != bad.want {
				t.Errorf("%s %s with %s: %d %s, want %d", bad.method, path, bad.name, code, b, bad.want)
			}
		}
	}
	if h := s.agents["abacus"].proc.History(); len(h) != 0 {
		t.Fatalf("refused requests changed the history: %+v", h)
	}

	same := map[string]string{"Origin": "http://" + host, "Sec-Fetch-Site": "same-origin"}
	pid := s.agents["abacus"].proc.Status().PID
	if code, b := c.do("POST", "/api/agents/abacus/restart", `{"reason":"testing the restart"}`, same); code != http.StatusAccepted {
		t.Fatalf("restart: %d %s", code, b)
	}
	a := waitAgent(t, s, "abacus", func(a studioapi.AgentInfo) bool { return a.State == studioapi.StateRunning && a.PID != pid })
	if a.Restarts != 1 {
		t.Errorf("restarts %d after one restart", a.Restarts)
	}
	var d studioapi.AgentDetail
	c.getJSON("/api/agents/abacus", &d)
	if len(d.History) != 1 || d.History[0].Event != studioapi.EventRestarted || d.History[0].Reason != "testing the restart" || d.History[0].Time.IsZero() {
		t.Errorf("history after a restart %+v", d.History)
	}

	if code, b := c.do("POST", "/api/agents/abacus/stop", `{}`, nil); code != http.StatusAccepted {
		t.Fatalf("stop: %d %s", code, b)
	}
	waitAgent(t, s, "abacus", func(a studioapi.AgentInfo) bool { return a.State == studioapi.StateStopped && a.PID == 0 })
	if code, b := c.do("POST", "/api/agents/abacus/restart", `{}`, nil); code != http.StatusConflict || !strings.Contains(string(b), "stopped") {
		t.Errorf("restart while stopped: %d %s, want 409", code, b)
	}
	if code, b := c.do("POST", "/api/agents/abacus/stop", `{}`, nil); code != http.StatusConflict {
		t.Errorf("stop while stopped: %d %s, want 409", code, b)
	}
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`
	if code, _ := c.do("POST", "/api/agents/abacus/mcp", init, map[string]string{"Accept": "application/json, text/event-stream"}); code != http.StatusServiceUnavailable {
		t.Errorf("MCP while stopped: %d, want 503", code)
	}
	if code, b := c.do("POST", "/api/agents/abacus/start", `{"reason":"back to work"}`, nil); code != http.StatusAccepted {
		t.Fatalf("start: %d %s", code, b)
	}
	waitAgent(t, s, "abacus", func(a studioapi.AgentInfo) bool { return a.State == studioapi.StateRunning })
	if code, b := c.do("POST", "/api/agents/abacus/start", `{}`, nil); code != http.StatusConflict {
		t.Errorf("start while running: %d %s, want 409", code, b)
	}
	c.getJSON("/api/agents/abacus", &d)
	var events []string
	for _, e := range d.History {
		events = append(events, e.Event+":"+e.Reason)
	}
	if got := strings.Join(events, ","); got != "started:back to work,stopped:asked from the studio page,restarted:testing the restart" {
		t.Errorf("history %s", got)
	}

	// Nothing secret is rendered: not the token in a call's arguments, not
	// a value under a credential's key, not in a log line.
	callThroughProxy(t, s, token, "abacus", "calculate", map[string]any{"expression": "1+" + token, "api_key": "sk-live-abcdefgh"})
	secrets := []string{token, "sk-live-abcdefgh"}
	for k := range s.agentKeys {
		secrets = append(secrets, k)
	}
	for _, path := range []string{"/api/runs", "/", "/agents/abacus", "/api/agents/abacus", "/api/overview"} {
		code, b := c.do("GET", path, "", nil)
		for _, secret := range secrets {
			if code != http.StatusOK || strings.Contains(string(b), secret) {
				t.Errorf("GET %s: %d; a secret is in it", path, code)
			}
		}
	}
	var list studioapi.RunList
	c.getJSON("/api/runs", &list)
	var run studioapi.Run
	c.getJSON("/api/runs/"+list.Runs[0].ID, &run)
	if len(run.Hops) != 1 || !strings.Contains(run.Hops[0].Arguments, "[REDACTED]") {
		t.Errorf("the call's arguments %q: want them redacted", run.Hops[0].Arguments)
	}

	// Left stopped, the agent does not hold up the studio's Close (the
	// cleanup's).
	if code, b := c.do("POST", "/api/agents/abacus/stop", `{}`, nil); code != http.StatusAccepted {
		t.Fatalf("stop: %d %s", code, b)
	}
	waitAgent(t, s, "abacus", func(a studioapi.AgentInfo) bool { return a.State == studioapi.StateStopped })
}

// TestConsoleMarksHeld: a call that the studio held while its agent
// restarted says so on its hop. The call is sent on a session made before
// the crash, with plain HTTP, so that it is the call (not a new session's
// initialize) that arrives while the agent restarts.
//
// The test is about the mark, not about how long a call is held: the hold
// and the start are given as long as waitAgent waits, since on a loaded
// machine the restarted agent has taken 12 s to listen, past the default
// 10 s RestartWait, and the held call got a 503 with nothing wrong.
func TestConsoleMarksHeld(t *testing.T) {
	s := startStudio(t, projecttest.New(t, "abacus"), &Options{
		MinBackoff:   300 * time.Millisecond,
		RestartWait:  90 * time.Second,
		StartTimeout: 90 * time.Second,
	})
	c := newAPIClient(t, s, "")
	mcpHdr := map[string]string{"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`
	req, _ := http.NewRequestWithContext(t.Context(), "POST", s.AgentURL("abacus"), strings.NewReader(init))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range mcpHdr {
		req.Header.Set(k, v)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	session := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || session == "" {
		t.Fatalf("initialize: %d, session %q", resp.StatusCode, session)
	}

	before := waitAgent(t, s, "abacus", func(a studioapi.AgentInfo) bool { return a.State == studioapi.StateRunning })
	if err := killPID(before.PID); err != nil {
		t.Fatal(err)
	}
	waitAgent(t, s, "abacus", func(a studioapi.AgentInfo) bool { return a.State == studioapi.StateRestarting })
	mcpHdr["Mcp-Session-Id"] = session
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"calculate","arguments":{"expression":"2+2"}}}`
	// The new process does not know the session; the studio re-establishes
	// it (proxy/continuity.go) and the held call lands.
	if code, b := c.do("POST", "/api/agents/abacus/mcp", call, mcpHdr); code != http.StatusOK || !strings.Contains(string(b), `"result":4`) {
		t.Fatalf("the held call: %d %s, want it answered on the kept session", code, b)
	}
	var list studioapi.RunList
	c.getJSON("/api/runs", &list)
	if len(list.Runs) != 1 {
		t.Fatalf("runs %+v", list.Runs)
	}
	var run studioapi.Run
	c.getJSON("/api/runs/"+list.Runs[0].ID, &run)
	if h := run.Hops[0]; h.HeldMS <= 0 || h.Outcome != "ok" {
		t.Errorf("hop %+v: want it marked held, and answered", h)
	}
	var d studioapi.AgentDetail
	c.getJSON("/api/agents/abacus", &d)
	if len(d.History) != 1 || d.History[0].Event != studioapi.EventExited || d.History[0].Reason == "" || d.History[0].NextStart.IsZero() {
		t.Errorf("history after a crash %+v", d.History)
	}
	// Running again, the crash is history: last_exit, not last_error.
	running := waitAgent(t, s, "abacus", func(a studioapi.AgentInfo) bool { return a.State == studioapi.StateRunning })
	c.getJSON("/api/agents/abacus", &d)
	if d.LastError != "" || d.LastExit == "" {
		t.Errorf("running again (pid %d): last error %q, last exit %q; want the crash in last_exit only", running.PID, d.LastError, d.LastExit)
	}
}

// TestPagesShowTruthfulBadges: the fleet and run pages, as the server
// renders them, show a call whose session expired and was retried as
// recovered, not as a red session_not_found; an ask that answered nothing
// as having done nothing; every time with its date and zone.
func TestPagesShowTruthfulBadges(t *testing.T) {
	s := startStudio(t, projecttest.New(t, "abacus"), nil)
	c := newAPIClient(t, s, "")
	f := &pageCalls{ob: s.observer, now: time.Now().Add(-time.Minute)}
	first := f.begin("abacus", "calculate", "", 0, "", map[string]string{"expression": "1"})
	f.end(first, time.Millisecond, "session_not_found", "", nil)
	retry := f.begin("abacus", "calculate", "", 0, "", map[string]string{"expression": "1"})
	f.end(retry, time.Millisecond, "", "", textResult("1"))
	empty := f.begin("abacus", "ask", "", 0, "", map[string]string{"task": "nothing at all"})
	f.end(empty, time.Millisecond, "", "R-EMPTY", askResult("", "R-EMPTY"))
	// A call whose chain names oracle, without oracle's key.
	claimed := f.begin("abacus", "calculate", "oracle", 1, "R-CLAIM", map[string]string{"expression": "2"})
	f.end(claimed, time.Millisecond, "", "", textResult("2"))

	_, page := c.do("GET", "/", "", nil)
	for _, want := range []string{
		`<span class="badge tone-muted" title="">session expired · retried</span>`,
		`<span class="badge tone-recovered" title="">recovered</span>`,
		`<span class="badge tone-empty">did nothing</span>`,
		`1 recovered`,
		`<td>oracle <span class="mark" title="only the call's delegation chain says so: the call did not carry that agent's key">claimed</span></td>`,
	} {
		if !strings.Contains(string(page), want) {
			t.Errorf("the fleet page lacks %s", want)
		}
	}
	if strings.Contains(string(page), "tone-bad") {
		t.Error("the fleet page shows a failure; nothing failed")
	}
	times := regexp.MustCompile(`<td class="time">([^<]*)</td>`).FindAllStringSubmatch(string(page), -1)
	if len(times) < 4 {
		t.Fatalf("%d times on the page", len(times))
	}
	for _, m := range times {
		if !regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [A-Z+\-0-9]+$`).MatchString(m[1]) {
			t.Errorf("time %q has no date or zone", m[1])
		}
	}
	_, run := c.do("GET", "/runs/R-EMPTY", "", nil)
	if !strings.Contains(string(run), `<span id="run-outcome" class="badge tone-empty">did nothing</span>`) || !strings.Contains(string(run), "(no answer)") {
		t.Errorf("the empty ask's page:\n%.2000s", run)
	}
}

// TestConsoleActionsDuringBackoff: between runs, while the supervisor waits
// out the backoff after an exit, restart starts the agent now instead of at
// its retry time and stop cancels the pending start; both are guarded as
// at any other time and recorded in the history. The backoff is an hour,
// so an agent that runs again before the test ends was started by the
// request, not by the timer.
func TestConsoleActionsDuringBackoff(t *testing.T) {
	const token = "console-token-0123456789"
	dir := projecttest.New(t)
	// Every start of this agent exits 1: it names a toolset that does not
	// exist.
	writeAgent(t, dir, "abacus", "broken", func(d map[string]any) { d["tools"] = []string{"nope"} })
	s := startStudio(t, dir, &Options{Token: token, MinBackoff: time.Hour, MaxBackoff: time.Hour})
	c := newAPIClient(t, s, token)
	host := strings.TrimPrefix(s.URL(), "http://")
	same := map[string]string{"Origin": "http://" + host, "Sec-Fetch-Site": "same-origin"}

	history := func() string {
		var d studioapi.AgentDetail
		c.getJSON("/api/agents/broken", &d)
		var events []string
		for _, e := range d.History {
			events = append(events, e.Event+":"+e.Reason)
		}
		return strings.Join(events, ",")
	}
	// waitHistory polls until the history has n entries.
	waitHistory := func(n int) []studioapi.ControlEvent {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			h := s.agents["broken"].proc.History()
			if len(h) >= n {
				return h
			}
			if time.Now().After(deadline) {
				t.Fatalf("history never reached %d entries: %+v", n, h)
			}
			time.Sleep(20 * time.Millisecond) // polling with a deadline
		}
	}

	first := waitHistory(1)
	if first[0].Event != studioapi.EventExited || first[0].NextStart.IsZero() {
		t.Fatalf("after the first exit: %+v", first)
	}
	waiting := waitAgent(t, s, "broken", func(a studioapi.AgentInfo) bool { return a.State == studioapi.StateRestarting && a.RetryAt != nil })

	// Refused requests stay refused while the agent waits, and change
	// nothing.
	for _, action := range []string{"restart", "stop"} {
		for _, bad := range []struct {
			name string
			hdr  map[string]string
			want int
		}{
			{"no token", map[string]string{"Authorization": ""}, http.StatusUnauthorized},
			{"another site's Origin", map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden},
			{"Sec-Fetch-Site cross-site", map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		} {
			if code, b := c.do("POST", "/api/agents/broken/"+action, `{}`, bad.hdr); code != bad.want {
				t.Errorf("%s during the backoff with %s: %d %s, want %d", action, bad.name, code, b, bad.want)
			}
		}
	}
	if h := history(); h != "exited:"+first[0].Reason {
		t.Fatalf("refused requests changed the history: %s", h)
	}

	// Restart: the agent is started now, fails again, and waits again.
	if code, b := c.do("POST", "/api/agents/broken/restart", `{"reason":"try it now"}`, same); code != http.StatusAccepted {
		t.Fatalf("restart during the backoff: %d %s, want 202", code, b)
	}
	h := waitHistory(3)
	if h[1].Event != studioapi.EventRestarted || h[1].Reason != "try it now" || h[0].Event != studioapi.EventExited {
		t.Errorf("history after a restart during the backoff: %+v", h)
	}
	again := waitAgent(t, s, "broken", func(a studioapi.AgentInfo) bool { return a.State == studioapi.StateRestarting && a.RetryAt != nil })
	if again.Restarts != waiting.Restarts+1 {
		t.Errorf("restarts %d after one restart from %d: the restart was counted twice or not at all", again.Restarts, waiting.Restarts)
	}
	if again.ConsecutiveFailures != 1 {
		t.Errorf("consecutive failures %d after a restart on request: want a fresh count", again.ConsecutiveFailures)
	}

	// Stop: the pending start is cancelled; the agent stays stopped.
	if code, b := c.do("POST", "/api/agents/broken/stop", `{"reason":"enough"}`, same); code != http.StatusAccepted {
		t.Fatalf("stop during the backoff: %d %s, want 202", code, b)
	}
	stopped := waitAgent(t, s, "broken", func(a studioapi.AgentInfo) bool { return a.State == studioapi.StateStopped })
	if stopped.RetryAt != nil || stopped.Restarts != again.Restarts-1 {
		t.Errorf("stopped during the backoff: %+v (retry time kept, or the cancelled restart still counted)", stopped)
	}
	if got := history(); !strings.HasPrefix(got, "stopped:enough,exited:") {
		t.Errorf("history after a stop during the backoff: %s", got)
	}
	if code, b := c.do("POST", "/api/agents/broken/restart", `{}`, same); code != http.StatusConflict || !strings.Contains(string(b), "stopped") {
		t.Errorf("restart while stopped: %d %s, want 409", code, b)
	}

	// Started again, it runs (and fails) at once.
	if code, b := c.do("POST", "/api/agents/broken/start", `{"reason":"once more"}`, same); code != http.StatusAccepted {
		t.Fatalf("start: %d %s", code, b)
	}
	h = waitHistory(6)
	if h[1].Event != studioapi.EventStarted || h[1].Reason != "once more" || h[0].Event != studioapi.EventExited {
		t.Errorf("history after a start: %+v", h)
	}
}

// pageCalls records calls in a studio's records the way its proxy does,
// without HTTP (observe.Observer.Begin), for tests of what the pages show.
type pageCalls struct {
	ob  *observe.Observer
	now time.Time
}

// begin starts a tools/call of tool on agent; from and depth describe the
// chain, runID the chain's run (empty for a client's own call).
func (f *pageCalls) begin(agent, tool, from string, depth int, runID string, args any) *observe.Recording {
	f.now = f.now.Add(time.Millisecond)
	raw, _ := json.Marshal(args)
	return f.ob.Begin(observe.Call{Agent: agent, Tool: tool, From: from, Depth: depth, RunID: runID, Start: f.now, Args: raw, ArgsDigest: string(raw)})
}

// end finishes the call after d with kind ("" for success) and result.
func (f *pageCalls) end(r *observe.Recording, d time.Duration, kind, runID string, result any) {
	var raw []byte
	if result != nil {
		raw, _ = json.Marshal(result)
	}
	r.End(d, kind, "", runID, raw)
}

func askResult(answer, runID string) map[string]any {
	return map[string]any{
		"content":           []any{map[string]any{"type": "text", "text": answer}},
		"structuredContent": map[string]any{"answer": answer, "run_id": runID, "steps": 2},
	}
}

func textResult(text string) map[string]any {
	return map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}}
}
