package studio

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/switchboard-run/switchboard/internal/mcptest"
	"github.com/switchboard-run/switchboard/internal/proctest"
	"github.com/switchboard-run/switchboard/internal/projecttest"
	"github.com/switchboard-run/switchboard/internal/proxy"
	"github.com/switchboard-run/switchboard/internal/statuscmd"
	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/internal/waittest"
	"github.com/switchboard-run/switchboard/pool"
	"github.com/switchboard-run/switchboard/pool/mcpconfig"
)

// serveRemote runs the bundled abacus as `switchboard agent serve` on
// listen (127.0.0.1:0 for a free port), from a project folder of its own:
// an agent on "another host", which the studio does not start. It returns
// the process and its MCP endpoint.
func serveRemote(t *testing.T, agentDir, dataDir, listen string) (*proctest.Process, string) {
	t.Helper()
	// The agent's own continuity off: what these tests show is the
	// studio's, which would otherwise never see the restarted agent's 404.
	p := proctest.StartProcess(t, t.TempDir(), []string{proxy.EnvContinuity + "=0"}, 30*time.Second, "switchboard agent abacus listening on ",
		switchboardBin, "agent", "serve", "--agent", agentDir, "--listen", listen, "--data-dir", dataDir)
	return p, strings.TrimSpace(p.Ready)
}

// writeRemote writes agents/<name>/agent.json in dir: only a name, a
// description and a url (and token_env, when not empty).
func writeRemote(t *testing.T, dir, name, url, tokenEnv string) {
	t.Helper()
	def := map[string]any{"name": name, "description": "runs elsewhere", "url": url}
	if tokenEnv != "" {
		def["token_env"] = tokenEnv
	}
	out, _ := json.Marshal(def)
	if err := os.MkdirAll(filepath.Join(dir, "agents", name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "agents", name, "agent.json"), out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// remoteSeen records the Authorization of every request the studio sent
// to host (after its checks and its credential swap), and signals refused
// when a tools/call's connection there was refused.
type remoteSeen struct {
	host    string
	mu      sync.Mutex
	auths   map[string]int
	refused chan struct{} // buffered; see watchRefusal
	watch   bool
}

func (u *remoteSeen) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := next.RoundTrip(r)
		if r.URL.Host != u.host {
			return resp, err
		}
		u.mu.Lock()
		defer u.mu.Unlock()
		u.auths[r.Header.Get("Authorization")]++
		if err != nil && dialFailed(err) && u.watch && r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") != "" {
			u.watch = false
			u.refused <- struct{}{}
		}
		return resp, err
	})
}

// watchRefusal arms refused for the next session request refused at host.
func (u *remoteSeen) watchRefusal() {
	u.mu.Lock()
	u.watch = true
	u.mu.Unlock()
}

func (u *remoteSeen) authorizations() map[string]int {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := map[string]int{}
	for k, v := range u.auths {
		out[k] = v
	}
	return out
}

// TestRemoteAgent: a studio with one agent it runs (packrat) and one on
// "another host" (abacus, a real `agent serve` the test started, whose
// folder the studio never sees: its own holds only an agent.json giving
// the url and the variable of its token). Calls through
// /api/agents/abacus/mcp work in both eras; the listing, /metrics and
// `switchboard status` show it as remote with its URL and never a
// credential; the remote gets its own token, never the studio's. Killed,
// it shows unreachable, and a session-era call made while it is down is
// held until it listens again on the same port, then answered on the
// client's same session (continuity re-established it).
func TestRemoteAgent(t *testing.T) {
	remoteProject := projecttest.New(t, "abacus")
	agentDir, dataDir := filepath.Join(remoteProject, "agents", "abacus"), t.TempDir()
	proc, endpoint := serveRemote(t, agentDir, dataDir, "127.0.0.1:0")
	host := strings.TrimSuffix(strings.TrimPrefix(endpoint, "http://"), "/mcp")
	_, port, _ := net.SplitHostPort(host)

	const remoteToken, studioToken = "remote-s3cret-7f3a", "studio-s3cret-c21d"
	t.Setenv("ABACUS_PORT", port)
	t.Setenv("ABACUS_TOKEN", remoteToken)
	dir := projecttest.New(t, "packrat")
	writeRemote(t, dir, "abacus", "http://127.0.0.1:${ABACUS_PORT}/mcp?tenant=${ABACUS_TOKEN}", "ABACUS_TOKEN")

	seen := &remoteSeen{host: host, auths: map[string]int{}, refused: make(chan struct{}, 1)}
	s := startStudio(t, dir, &Options{Token: studioToken, RemoteCheckInterval: 100 * time.Millisecond, wrapUpstream: seen.wrap})
	if err := s.WaitReady(t.Context()); err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
	api := newAPIClient(t, s, studioToken)
	auth := map[string]string{"Authorization": "Bearer " + studioToken}
	shownURL := "http://" + host + "/mcp" // no query: it may carry a credential

	t.Run("listing", func(t *testing.T) {
		code, body := api.do("GET", "/api/agents", "", nil)
		if code != http.StatusOK {
			t.Fatalf("GET /api/agents: %d %s", code, body)
		}
		if bytes.Contains(body, []byte(remoteToken)) {
			t.Fatalf("/api/agents shows the remote's token: %s", body)
		}
		agents := listAgents(t, s.URL(), auth)
		a := agents["abacus"]
		if a.State != studioapi.StateRemote || a.PID != 0 || a.URL != s.AgentURL("abacus") || a.Remote == nil {
			t.Fatalf("remote agent listed as %+v", a)
		}
		if r := a.Remote; r.URL != shownURL || !r.Reachable || r.CheckedAt == nil || r.TokenEnv != "ABACUS_TOKEN" || r.Error != "" {
			t.Errorf("remote %+v, want reachable at %s with token_env ABACUS_TOKEN", r, shownURL)
		}
		if !contains(a.Tools, "calculate") {
			t.Errorf("remote tools %v (%s), want calculate listed through the studio's pool", a.Tools, a.ToolsError)
		}
		if p := agents["packrat"]; p.State != studioapi.StateRunning || p.Remote != nil {
			t.Errorf("local agent listed as %+v", p)
		}
		var d studioapi.AgentDetail
		api.getJSON("/api/agents/abacus", &d)
		if d.Remote == nil || d.Remote.URL != shownURL {
			t.Errorf("agent page data %+v", d.AgentInfo)
		}
		code, body = api.do("GET", "/agents/abacus", "", nil)
		if code != http.StatusOK || !bytes.Contains(body, []byte(shownURL)) || bytes.Contains(body, []byte(remoteToken)) {
			t.Errorf("agent page: %d, shows the URL %t, shows the token %t", code, bytes.Contains(body, []byte(shownURL)), bytes.Contains(body, []byte(remoteToken)))
		}
		code, body = api.do("POST", "/api/agents/abacus/restart", `{}`, nil)
		if code != http.StatusConflict || !strings.Contains(string(body), "another host") {
			t.Errorf("restart of a remote agent: %d %s, want 409 saying the studio does not run it", code, body)
		}
	})

	// The session era, with a go-sdk client and no recovery of its own.
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	cl := mcp.NewClient(&mcp.Implementation{Name: "remote-test", Version: "0"}, nil)
	cs, err := cl.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: s.AgentURL("abacus"),
		HTTPClient: &http.Client{Transport: &bearerRT{tr, studioToken}}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	id := cs.ID()
	calc := func(expr, want string) error {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "calculate", Arguments: map[string]any{"expression": expr}})
		if err != nil {
			return err
		}
		if res.IsError || !strings.Contains(toolText(res), want) {
			return fmt.Errorf("calculate %s: %s", expr, toolText(res))
		}
		return nil
	}

	t.Run("both eras", func(t *testing.T) {
		if err := calc("6*7", "42"); err != nil {
			t.Fatalf("session era: %v", err)
		}
		code, _, body := sessionless(t, &http.Client{Transport: tr}, s.AgentURL("abacus"), "tools/call", calculate("2+3"), auth, false)
		if code != http.StatusOK || !strings.Contains(resultText(t, body), "= 5") {
			t.Errorf("sessionless era: %d %s", code, body)
		}
		if res := callThroughProxy(t, s, studioToken, "abacus", "calculate", map[string]any{"expression": "10/4"}); !strings.Contains(toolText(res), "2.5") {
			t.Errorf("through a pool: %s", toolText(res))
		}
	})

	t.Run("metrics and status", func(t *testing.T) {
		fams := scrapeMetricsAuth(t, s.URL(), studioToken)
		for _, c := range []struct {
			name   string
			labels map[string]string
			want   float64
		}{
			{studioapi.MetricAgentState, map[string]string{"agent": "abacus", "state": "remote"}, 1},
			{studioapi.MetricAgentUp, map[string]string{"agent": "abacus"}, 1},
			{studioapi.MetricAgentMetricsUp, map[string]string{"agent": "abacus"}, 1},
			{studioapi.MetricAgentState, map[string]string{"agent": "packrat", "state": "running"}, 1},
		} {
			if v, ok := metricValue(fams, c.name, c.labels); !ok || v != c.want {
				t.Errorf("%s%v = %v (found %t), want %v", c.name, c.labels, v, ok, c.want)
			}
		}
		// The remote's own families, federated: it is an agent serve.
		if _, ok := metricValue(fams, "switchboard_pool_dials_total", map[string]string{"process": "abacus"}); !ok {
			t.Errorf("no family of the remote's own /metrics (process=abacus) in the studio's")
		}
		var out, errOut bytes.Buffer
		t.Setenv(studioapi.EnvToken, studioToken)
		if code := statuscmd.Main(t.Context(), []string{"--studio", s.URL()}, nil, &out, &errOut); code != 0 {
			t.Fatalf("switchboard status: %d %s", code, errOut.String())
		}
		text := out.String()
		for _, want := range []string{"1 on other hosts", "remote (reachable)", "abacus runs at " + shownURL} {
			if !strings.Contains(text, want) {
				t.Errorf("switchboard status does not say %q:\n%s", want, text)
			}
		}
		if strings.Contains(text, remoteToken) {
			t.Errorf("switchboard status shows the remote's token:\n%s", text)
		}
	})

	t.Run("credentials", func(t *testing.T) {
		got := seen.authorizations()
		if got["Bearer "+remoteToken] == 0 {
			t.Errorf("the remote never got its own token: %v", got)
		}
		for a := range got {
			if a != "Bearer "+remoteToken {
				t.Errorf("the remote got Authorization %q, want only its own token", a)
			}
		}
	})

	parent := t // the new process outlives the subtest
	t.Run("restart on the same port", func(t *testing.T) {
		proc.Signal(syscall.SIGKILL)
		if _, err := proc.Wait(10 * time.Second); err != nil {
			t.Fatal(err)
		}
		var down studioapi.AgentInfo
		waittest.Until(t, 10*time.Second, "the remote to show unreachable", func() bool {
			down = listAgents(t, s.URL(), auth)["abacus"]
			return down.Remote != nil && !down.Remote.Reachable && down.Remote.Error != ""
		})
		if down.State != studioapi.StateRemote {
			t.Errorf("down remote listed as %+v / %+v", down, down.Remote)
		}
		if code, body := api.do("GET", "/api/agents", "", nil); code != http.StatusOK || bytes.Contains(body, []byte(remoteToken)) {
			t.Errorf("/api/agents while the remote is down: %d, shows its token: %s", code, body)
		}

		// A call made while it is down is held, not failed: once its
		// connection was refused, the remote comes back on its port.
		seen.watchRefusal()
		done := make(chan error, 1)
		go func() { done <- calc("7*8", "56") }()
		select {
		case <-seen.refused:
		case err := <-done:
			t.Fatalf("the call ended before the remote came back: %v", err)
		case <-time.After(30 * time.Second):
			t.Fatal("the call never reached the remote's port")
		}
		serveRemote(parent, agentDir, dataDir, host)
		if err := <-done; err != nil {
			t.Fatalf("the call held across the remote's restart: %v", err)
		}
		if err := calc("1+1", "2"); err != nil {
			t.Fatalf("after the restart: %v", err)
		}
		if cs.ID() != id {
			t.Errorf("the session id changed from %s to %s", id, cs.ID())
		}
		if _, renewals := s.agents["abacus"].continuity.Kept(); renewals != 1 {
			t.Errorf("continuity renewed %d upstream sessions, want 1", renewals)
		}
		waittest.Until(t, 10*time.Second, "the remote to show reachable again", func() bool {
			a := listAgents(t, s.URL(), auth)["abacus"]
			return a.Remote != nil && a.Remote.Reachable
		})
		var d studioapi.AgentDetail
		api.getJSON("/api/agents/abacus", &d)
		var events []string
		for _, e := range d.History {
			events = append(events, e.Event)
		}
		if len(events) < 2 || events[0] != eventReachable || !contains(events, eventUnreachable) {
			t.Errorf("history %v, want the outage and the return, newest first", events)
		}
	})
}

// TestRemoteAgentDown: a remote agent whose host refuses connections, and
// one that answers MCP but serves neither /healthz (go-sdk's handler
// answers there as at any path) nor /metrics (404), and one that refuses
// the studio's credentials (401). A request for the first is
// answered at once (RestartWait negative: no hold) with a 503, Retry-After
// and a JSON-RPC error saying nothing was sent, which our pool reports as
// a *pool.Error with that status; the listing shows it unreachable and
// WaitReady names it. The second shows metrics "none", metrics_up 0, and
// is not asked for /metrics again on the next scrape.
func TestRemoteAgentDown(t *testing.T) {
	refusing := refusingAddr(t)
	var mu sync.Mutex
	metricsAsked := 0
	srv := mcptest.Start(t, nil)
	srv.SetIntercept(func(w http.ResponseWriter, r *http.Request, _ mcptest.RPCInfo) bool {
		switch r.URL.Path {
		case "/metrics":
			mu.Lock()
			metricsAsked++
			mu.Unlock()
			http.NotFound(w, r)
			return true
		}
		return false
	})

	locked := mcptest.Start(t, nil) // refuses the studio's credentials
	locked.SetIntercept(func(w http.ResponseWriter, r *http.Request, _ mcptest.RPCInfo) bool {
		http.Error(w, "invalid token", http.StatusUnauthorized)
		return true
	})

	dir := projecttest.New(t)
	writeRemote(t, dir, "locked", locked.URL(), "")
	const goneToken = "gone-s3cret-90e1"
	t.Setenv("GONE_TOKEN", goneToken)
	writeRemote(t, dir, "gone", "http://"+refusing+"/mcp?key=${GONE_TOKEN}", "GONE_TOKEN")
	writeRemote(t, dir, "plain", srv.URL(), "")
	s := startStudio(t, dir, &Options{RestartWait: -1})
	if err := s.WaitReady(t.Context()); err == nil || !strings.Contains(err.Error(), "gone (remote at http://"+refusing+"/mcp, unreachable") || strings.Contains(err.Error(), "plain") || !strings.Contains(err.Error(), "locked") {
		t.Errorf("WaitReady: %v, want an error naming the unreachable remote only", err)
	}
	agents := listAgents(t, s.URL(), nil)
	if g := agents["gone"]; g.State != studioapi.StateRemote || g.Remote == nil || g.Remote.Reachable || g.Remote.CheckedAt == nil || g.Remote.Error == "" || g.ToolsError == "" {
		t.Errorf("refusing remote listed as %+v (%+v)", g, g.Remote)
	}
	if l := agents["locked"]; l.Remote == nil || l.Remote.Reachable || !strings.Contains(l.Remote.Error, "check token_env") {
		t.Errorf("remote answering 401 listed as %+v, want unreachable saying to check token_env", l.Remote)
	}
	// Its tools/list failed naming its URL, whose query holds its token.
	if code, _, body := get(t, s.URL()+"/api/agents", nil); code != http.StatusOK || bytes.Contains(body, []byte(goneToken)) {
		t.Errorf("/api/agents: %d, shows the remote's token: %s", code, body)
	}

	p := pool.New(nil)
	defer p.Close()
	_, err := p.CallTool(t.Context(), &pool.Server{Name: "gone", URL: s.AgentURL("gone")}, &mcp.CallToolParams{Name: "x"})
	var pe *pool.Error
	if !errors.As(err, &pe) || pe.Status != http.StatusServiceUnavailable || !strings.Contains(pe.Error(), "nothing was sent") {
		t.Fatalf("a call to a remote that refuses: %v, want a *pool.Error with status 503 saying nothing was sent", err)
	}
	code, hdr, body := get(t, s.AgentURL("gone"), nil)
	if code != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" || !strings.Contains(string(body), `"state":"remote"`) {
		t.Errorf("GET of a refusing remote: %d %v %s", code, hdr, body)
	}

	// The one without /metrics: routed to, and its lack shown, not retried.
	res := callThroughProxy(t, s, "", "plain", "echo", map[string]any{"id": "a", "text": "hi"})
	if res.IsError {
		t.Errorf("a call to the plain remote: %s", toolText(res))
	}
	scrapeMetrics(t, s.URL())
	fams := scrapeMetrics(t, s.URL())
	if v, ok := metricValue(fams, studioapi.MetricAgentMetricsUp, map[string]string{"agent": "plain"}); !ok || v != 0 {
		t.Errorf("metrics_up of a remote without /metrics: %v %t, want 0", v, ok)
	}
	if v, ok := metricValue(fams, studioapi.MetricAgentUp, map[string]string{"agent": "plain"}); !ok || v != 1 {
		t.Errorf("agent_up of a reachable remote: %v %t, want 1", v, ok)
	}
	if v, _ := metricValue(fams, studioapi.MetricAgentUp, map[string]string{"agent": "gone"}); v != 0 {
		t.Errorf("agent_up of an unreachable remote: %v, want 0", v)
	}
	mu.Lock()
	asked := metricsAsked
	mu.Unlock()
	if asked != 1 {
		t.Errorf("the remote without /metrics was asked for it %d times in two scrapes, want 1", asked)
	}
	if r := listAgents(t, s.URL(), nil)["plain"].Remote; r == nil || r.Metrics != studioapi.MetricsNone || !r.Reachable {
		t.Errorf("remote without /metrics listed as %+v, want reachable with metrics none", r)
	}
}

// TestRemoteAgentConfig: what is wrong with a remote agent's folder stops
// the studio with a ConfigError naming the file and the field.
func TestRemoteAgentConfig(t *testing.T) {
	for _, tc := range []struct {
		name, json, field, file string
		mcpJSON                 bool
	}{
		{"bad url", `{"name":"far","url":"ftp://far.example/mcp"}`, "url", "agent.json", false},
		{"token not set", `{"name":"far","url":"http://far.example/mcp","token_env":"SWITCHBOARD_TEST_UNSET_TOKEN"}`, "token_env", "agent.json", false},
		{"model settings", `{"name":"far","url":"http://far.example/mcp","model":{"name":"gpt-4o"}}`, "model", "agent.json", false},
		{"tools/mcp.json", `{"name":"far","url":"http://far.example/mcp"}`, "", filepath.Join("tools", "mcp.json"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := projecttest.New(t)
			folder := filepath.Join(dir, "agents", "far")
			os.MkdirAll(filepath.Join(folder, "tools"), 0o755)
			os.WriteFile(filepath.Join(folder, "agent.json"), []byte(tc.json), 0o644)
			if tc.mcpJSON {
				os.WriteFile(filepath.Join(folder, "tools", "mcp.json"), []byte(`{"mcpServers":{}}`), 0o644)
			}
			s, err := Start(t.Context(), &Options{Dir: dir, Listen: "127.0.0.1:0", Executable: switchboardBin})
			if err == nil {
				s.Close()
				t.Fatal("the studio started")
			}
			ce, ok := errors.AsType[*mcpconfig.ConfigError](err)
			if !ok || ce.Field != tc.field || !strings.HasSuffix(ce.File, filepath.Join("far", tc.file)) {
				t.Errorf("error %v, want a ConfigError for %s field %q", err, tc.file, tc.field)
			}
		})
	}
}

// refusingAddr is a loopback address whose connections are refused: a
// socket bound to it, never listening, held until the test ends (so no
// other test's server can take the port and answer).
func refusingAddr(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
}

// bearerRT sends token as the bearer token of every request.
type bearerRT struct {
	base  http.RoundTripper
	token string
}

func (b *bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// scrapeMetricsAuth is scrapeMetrics of a studio with a token.
func scrapeMetricsAuth(t *testing.T, base, token string) map[string]*dto.MetricFamily {
	t.Helper()
	code, _, body := get(t, base+"/metrics", map[string]string{"Authorization": "Bearer " + token, "Accept": "text/plain;version=0.0.4"})
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", code, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return fams
}
