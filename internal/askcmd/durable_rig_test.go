package askcmd

// The parts the durable fault rows (durable_faults_test.go) are made of,
// besides the real studio, agents and `switchboard ask`:
//
//   - durableModel, the scripted model of every agent in the project,
//     answering by step so that a step asked again gets the same reply,
//     and counting, per agent and step, the requests that reached it, the
//     ones it answered and the ones it refused (503). It can hold the
//     first request of a step (in flight at the model), hold it at a gate
//     in front of the model (sent, never seen by the model), or refuse a
//     step while the endpoint is "down".
//   - toolGate, a reverse proxy in front of packrat and abacus on oracle's
//     side (oracle's tools/mcp.json points there), counting every
//     tools/call by its idempotency key and whether the sibling ran it or
//     answered from its record (the result's replay mark, set by the
//     sibling), and able to hold one call before or after the sibling ran
//     it.
//
// Counts come from these parts and from packrat's own archive, never from
// the runtime under test.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sashabaranov/go-openai"

	"github.com/switchboard-run/switchboard/internal/idempotency"
	"github.com/switchboard-run/switchboard/internal/studio"
	"github.com/switchboard-run/switchboard/internal/waittest"
	"github.com/switchboard-run/switchboard/pool"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// stepKey names one model step of one agent's run.
type stepKey struct {
	agent string
	step  int
}

// modelHold holds the first request of one step.
type modelHold struct {
	// front: held at the gate in front of the model, so the model never
	// sees it (not counted as asked); otherwise held at the model, asked.
	front   bool
	used    bool          // guarded by durableModel.mu
	arrived chan struct{} // closed when the held request arrives
}

// durableModel is the scripted model of every agent of a durable row.
type durableModel struct {
	t       *testing.T
	URL     string
	scripts map[string][]openai.ChatCompletionMessage

	mu       sync.Mutex // guards following
	holds    map[stepKey]*modelHold
	down     map[stepKey]bool // refused with 503 while set
	asked    map[stepKey]int  // reached the model (refused ones included)
	answered map[stepKey]int
	refused  map[stepKey]int
}

func newDurableModel(t *testing.T, scripts map[string][]openai.ChatCompletionMessage) *durableModel {
	m := &durableModel{t: t, scripts: scripts, holds: map[stepKey]*modelHold{}, down: map[stepKey]bool{},
		asked: map[stepKey]int{}, answered: map[stepKey]int{}, refused: map[stepKey]int{}}
	ts := httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(ts.Close)
	m.URL = ts.URL + "/v1"
	return m
}

// hold makes the first request of agent's step wait until the process
// that sent it goes away; its arrived channel says when it came.
func (m *durableModel) hold(agent string, step int, front bool) *modelHold {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := &modelHold{front: front, arrived: make(chan struct{})}
	m.holds[stepKey{agent, step}] = h
	return h
}

// reset gives the model new scripts and forgets its holds, outages and
// counts: a new row on the same studio.
func (m *durableModel) reset(scripts map[string][]openai.ChatCompletionMessage) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.scripts = scripts
	m.holds, m.down = map[stepKey]*modelHold{}, map[stepKey]bool{}
	m.asked, m.answered, m.refused = map[stepKey]int{}, map[stepKey]int{}, map[stepKey]int{}
}

// setDown refuses (or, down false, serves again) every request of agent's
// step with 503, as an overloaded provider does.
func (m *durableModel) setDown(agent string, step int, down bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.down[stepKey{agent, step}] = down
}

func (m *durableModel) serve(w http.ResponseWriter, r *http.Request) {
	var req openai.ChatCompletionRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) < 2 || len(req.Messages)%2 != 0 {
		m.t.Errorf("durable model: bad request (%d messages): %v", len(req.Messages), err)
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	agent := agentOf(req.Messages[0].Content)
	k := stepKey{agent, len(req.Messages) / 2}
	m.mu.Lock()
	script := m.scripts[agent]
	if k.step > len(script) {
		m.mu.Unlock()
		m.t.Errorf("durable model: %s step %d is beyond its script", agent, k.step)
		http.Error(w, "beyond the script", http.StatusInternalServerError)
		return
	}
	h := m.holds[k]
	held := h != nil && !h.used
	if held {
		h.used = true
	}
	if held && h.front {
		// The gate in front of the model: the request waits here, unseen by
		// the model, until the process that sent it is killed.
		m.mu.Unlock()
		close(h.arrived)
		<-r.Context().Done()
		return
	}
	m.asked[k]++
	if m.down[k] {
		m.refused[k]++
		m.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error":{"message":"The server is overloaded or not ready yet.","type":"server_error","code":null}}`)
		return
	}
	m.mu.Unlock()
	if held {
		close(h.arrived)
		<-r.Context().Done()
		return
	}
	reply := script[k.step-1]
	reply.Role = openai.ChatMessageRoleAssistant
	finish := openai.FinishReasonStop
	if len(reply.ToolCalls) > 0 {
		finish = openai.FinishReasonToolCalls
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(openai.ChatCompletionResponse{
		ID: "chatcmpl-durable", Object: "chat.completion", Model: req.Model,
		Choices: []openai.ChatCompletionChoice{{Message: reply, FinishReason: finish}},
	})
	m.mu.Lock()
	m.answered[k]++
	m.mu.Unlock()
}

// modelCounts is what the model saw of one agent, by step.
type modelCounts struct{ asked, answered, refused map[int]int }

func (m *durableModel) counts(agent string) modelCounts {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := modelCounts{map[int]int{}, map[int]int{}, map[int]int{}}
	for k, v := range m.asked {
		if k.agent == agent {
			c.asked[k.step] = v
		}
	}
	for k, v := range m.answered {
		if k.agent == agent {
			c.answered[k.step] = v
		}
	}
	for k, v := range m.refused {
		if k.agent == agent {
			c.refused[k.step] = v
		}
	}
	return c
}

// askedAgain lists the steps of agent whose request reached the model
// more than once (a refused attempt counts), as "step 4 (2)".
func (c modelCounts) askedAgain() []string {
	var out []string
	for step := 1; step <= 20; step++ {
		if n := c.asked[step]; n > 1 {
			out = append(out, fmt.Sprintf("step %d (%d)", step, n))
		}
	}
	return out
}

// gateHold holds one tools/call at the tool gate.
type gateHold struct {
	tool, contains string // the call matched: its tool, and a substring of its arguments
	// after: forwarded, and its answer held once the sibling has it;
	// otherwise held before it reaches the sibling.
	after   bool
	used    bool          // guarded by toolGate.mu
	arrived chan struct{} // closed when the call is held
}

// gateCall is one tools/call the gate saw, by key.
type gateCall struct {
	Tool, Args string
	Sends      int // POSTs of this key that the gate saw
	Ran        int // answers the sibling marked as a first execution
	Replayed   int // answers the sibling marked as a replay of its record
}

// toolGate is the reverse proxy in front of oracle's siblings.
type toolGate struct {
	t     *testing.T
	URL   string
	ready chan struct{} // closed once target is set
	// target is the studio's base URL: the gate is written into oracle's
	// tools/mcp.json before the studio starts.
	target *url.URL

	mu    sync.Mutex // guards following
	hold  *gateHold
	calls map[string]*gateCall // by idempotency key
	// pure are the siblings' read-only tools (readOnlyHint): their guard
	// keeps no record of them (ledger.Guard.Pure), so a resend under the
	// same key computes the answer again, with no effect to repeat. Such
	// a recompute is counted apart, never as a call executed twice.
	pure map[string]bool
}

func newToolGate(t *testing.T) *toolGate {
	g := &toolGate{t: t, ready: make(chan struct{}), calls: map[string]*gateCall{}}
	ts := httptest.NewServer(g)
	t.Cleanup(ts.Close)
	g.URL = ts.URL
	return g
}

// reset forgets the gate's calls and hold: a new row on the same studio.
func (g *toolGate) reset() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.hold, g.calls = nil, map[string]*gateCall{}
}

// learnPure lists the tools of the siblings behind base and remembers the
// read-only ones.
func (g *toolGate) learnPure(t *testing.T, ctx context.Context, p *pool.Pool, base string, siblings ...string) {
	t.Helper()
	pure := map[string]bool{}
	for _, name := range siblings {
		tools, err := p.ListTools(ctx, &pool.Server{Name: name, URL: base + "/api/agents/" + name + "/mcp"})
		if err != nil {
			t.Fatal(err)
		}
		for _, tool := range tools {
			if tool.Annotations != nil && tool.Annotations.ReadOnlyHint {
				pure[tool.Name] = true
			}
		}
	}
	if len(pure) == 0 {
		t.Fatalf("no read-only tool among %v: the gate would count nothing apart", siblings)
	}
	g.mu.Lock()
	g.pure = pure
	g.mu.Unlock()
}

func (g *toolGate) start(st *studio.Studio) {
	u, err := url.Parse(st.URL())
	if err != nil {
		g.t.Fatal(err)
	}
	g.target = u
	close(g.ready)
}

// holdCall holds the first tools/call of tool whose arguments contain
// contains.
func (g *toolGate) holdCall(tool, contains string, after bool) *gateHold {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.hold = &gateHold{tool: tool, contains: contains, after: after, arrived: make(chan struct{})}
	return g.hold
}

// pointOracle makes oracle in project dir delegate to packrat and abacus
// through the gate, with the headers the bundled mcp.json sends.
func (g *toolGate) pointOracle(t *testing.T, dir string) {
	t.Helper()
	srv := func(name string) string {
		return fmt.Sprintf(`%q: {"url": "%s/api/agents/%s/mcp", "headers": {"Authorization": "Bearer ${SWITCHBOARD_TOKEN:-}", "X-Switchboard-Agent-Key": "${SWITCHBOARD_AGENT_KEY:-}"}}`, name, g.URL, name)
	}
	writeFile(t, filepath.Join(dir, "agents", "oracle", agentdef.MCPFile), `{"mcpServers": {`+srv("packrat")+`, `+srv("abacus")+`}}`)
}

func (g *toolGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	select {
	case <-g.ready:
	case <-r.Context().Done():
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var msg struct {
		Method string `json:"method"`
		Params struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
			Meta      map[string]any  `json:"_meta"`
		} `json:"params"`
	}
	var c *gateCall
	var h *gateHold
	if r.Method == http.MethodPost && json.Unmarshal(body, &msg) == nil && msg.Method == "tools/call" {
		key, _, _ := idempotency.KeyFromMeta(msg.Params.Meta)
		g.mu.Lock()
		c = g.calls[key]
		if c == nil {
			c = &gateCall{Tool: msg.Params.Name, Args: string(msg.Params.Arguments)}
			g.calls[key] = c
		}
		c.Sends++
		if gh := g.hold; gh != nil && !gh.used && gh.tool == msg.Params.Name && strings.Contains(string(msg.Params.Arguments), gh.contains) {
			gh.used = true
			h = gh
		}
		g.mu.Unlock()
	}
	if h != nil && !h.after {
		close(h.arrived)
		<-r.Context().Done() // never forwarded: the sibling never gets it
		return
	}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(g.target) },
		FlushInterval: -1,
		ModifyResponse: func(resp *http.Response) error {
			if c == nil {
				return nil
			}
			// Read the whole answer (one JSON body or an SSE stream that
			// ends with the call's response) to learn how the sibling
			// answered, then hand it on.
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				return err
			}
			resp.Body = io.NopCloser(bytes.NewReader(b))
			if ran, replayed, ok := answerOf(b); ok {
				g.mu.Lock()
				if replayed {
					c.Replayed++
				} else if ran {
					c.Ran++
				}
				g.mu.Unlock()
			}
			if h != nil {
				// The sibling has done it; its answer never reaches oracle,
				// which is killed while it waits.
				close(h.arrived)
				<-r.Context().Done()
				return r.Context().Err()
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() == nil {
				w.WriteHeader(http.StatusBadGateway)
			}
		},
	}
	rp.ServeHTTP(w, r)
}

// answerOf reads a tools/call answer (JSON or SSE): ran is a result the
// sibling produced now, replayed one it answered from its record.
func answerOf(b []byte) (ran, replayed, ok bool) {
	var bodies [][]byte
	if bytes.HasPrefix(bytes.TrimSpace(b), []byte("{")) {
		bodies = append(bodies, b)
	} else {
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			if data, found := bytes.CutPrefix(sc.Bytes(), []byte("data:")); found {
				bodies = append(bodies, bytes.Clone(bytes.TrimSpace(data)))
			}
		}
	}
	for _, body := range bodies {
		var resp struct {
			Result *struct {
				IsError bool           `json:"isError"`
				Meta    map[string]any `json:"_meta"`
			} `json:"result"`
		}
		if json.Unmarshal(body, &resp) != nil || resp.Result == nil {
			continue
		}
		if resp.Result.Meta[idempotency.ReplayMetaKey] == true {
			return false, true, true
		}
		return !resp.Result.IsError, false, true
	}
	return false, false, false
}

// twice is every call the siblings ran more than once: by key, and by
// tool and arguments (a call made again under another key runs again).
func (g *toolGate) twice() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	byArgs := map[string]int{}
	for key, c := range g.calls {
		if g.pure[c.Tool] {
			continue // recomputed, not executed twice (see pure)
		}
		if c.Ran > 1 {
			out = append(out, fmt.Sprintf("%s %s ran %d times under key %s", c.Tool, c.Args, c.Ran, key))
		}
		byArgs[c.Tool+" "+c.Args] += c.Ran
	}
	for call, n := range byArgs {
		if n > 1 {
			out = append(out, fmt.Sprintf("%s ran %d times", call, n))
		}
	}
	return out
}

// totals sums the gate's calls: sends, first executions, replays, and
// the recomputes of read-only tools' calls (see pure).
func (g *toolGate) totals() (sends, ran, replayed, recomputed int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range g.calls {
		sends += c.Sends
		replayed += c.Replayed
		if g.pure[c.Tool] && c.Ran > 1 {
			ran++
			recomputed += c.Ran - 1
			continue
		}
		ran += c.Ran
	}
	return sends, ran, replayed, recomputed
}

// waitRestarted waits until the studio runs a process of agent other
// than old.
func waitRestarted(t *testing.T, st *studio.Studio, agent string, old int) {
	t.Helper()
	waittest.Until(t, 30*time.Second, agent+" to run a new process", func() bool {
		info := agentInfo(t, st, agent)
		return info.PID != 0 && info.PID != old
	})
}

// waitFor waits for ch, or fails naming what.
func waitFor(t *testing.T, ctx context.Context, ch <-chan struct{}, what string, a *askProcess) {
	t.Helper()
	select {
	case <-ch:
	case <-ctx.Done():
		t.Fatalf("%s never happened; ask stderr:\n%s", what, a.stderr)
	}
}
