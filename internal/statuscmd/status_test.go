package statuscmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"

	"github.com/switchboard-run/switchboard/internal/authstate"
	"github.com/switchboard-run/switchboard/internal/studioapi"
)

const metricsText = `# TYPE switchboard_tool_calls_total counter
switchboard_tool_calls_total{agent="abacus",outcome="ok",tool="calculate"} 8
switchboard_tool_calls_total{agent="abacus",outcome="tool_error",tool="calculate"} 2
switchboard_tool_calls_total{agent="oracle",outcome="ok",tool="ask"} 1
# TYPE switchboard_tool_call_duration_seconds histogram
switchboard_tool_call_duration_seconds_bucket{agent="abacus",tool="calculate",le="0.001"} 0
switchboard_tool_call_duration_seconds_bucket{agent="abacus",tool="calculate",le="0.01"} 10
switchboard_tool_call_duration_seconds_bucket{agent="abacus",tool="calculate",le="+Inf"} 10
switchboard_tool_call_duration_seconds_sum{agent="abacus",tool="calculate"} 0.05
switchboard_tool_call_duration_seconds_count{agent="abacus",tool="calculate"} 10
# TYPE switchboard_model_requests_total counter
switchboard_model_requests_total{model="gpt-4o-mini",outcome="ok",process="oracle"} 3
switchboard_model_requests_total{model="gpt-4o-mini",outcome="retried",process="oracle"} 1
switchboard_model_requests_total{model="llama3.1",outcome="ok",process="oracle"} 2
# TYPE switchboard_model_tokens_total counter
switchboard_model_tokens_total{kind="prompt",model="gpt-4o-mini",process="oracle"} 12000
switchboard_model_tokens_total{kind="completion",model="gpt-4o-mini",process="oracle"} 300
switchboard_model_tokens_total{kind="cached",model="gpt-4o-mini",process="oracle"} 4000
switchboard_model_tokens_total{kind="reasoning",model="gpt-4o-mini",process="oracle"} 100
switchboard_model_tokens_total{kind="completion",model="llama3.1",process="oracle"} 45
# TYPE switchboard_model_cost_usd_total counter
switchboard_model_cost_usd_total{model="gpt-4o-mini",process="oracle"} 0.0123
`

// fakeStudio serves /api/overview and /metrics as a studio does, and
// demands the token when one is given.
func fakeStudio(t *testing.T, token string) *httptest.Server {
	t.Helper()
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ov := studioapi.Overview{
		URL: "http://studio.test",
		Agents: []studioapi.AgentInfo{
			{Name: "abacus", State: studioapi.StateRunning, Tools: []string{"calculate", "date_math"}},
			{Name: "oracle", State: studioapi.StateRestarting, Restarts: 2, Tools: []string{}, LastError: "exited: exit status 1", LastErrorAt: &start, ConsecutiveFailures: 2},
		},
		Pools: []studioapi.PoolInfo{{Process: "studio", Open: 2, Idle: 2, Dials: 2}, {Process: "oracle", Open: 1, InUse: 1, Dials: 3, Reinitializations: 1, Retries: 1, Invalidations: 1}},
		Delegations: []studioapi.Delegation{
			{ID: 4, Start: start, Agent: "oracle", Tool: "ask", Outcome: "tool_error", Status: studioapi.AskNotAnswered, DurationMS: 3},
			{ID: 3, Start: start, From: "oracle", Agent: "abacus", Tool: "calculate", Outcome: "tool_error", DurationMS: 1, Message: "no \x1b[2Jdivision"},
			{ID: 2, Start: start, From: "oracle", Agent: "abacus", Tool: "calculate", Outcome: "ok", DurationMS: 1.5, Recovery: studioapi.RecoveryRecovered},
			{ID: 1, Start: start, Agent: "oracle", Tool: "ask", Outcome: studioapi.OutcomeRunning},
		},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if token != "" && r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, `{"error":"a bearer token is required"}`, http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case "/api/overview":
			json.NewEncoder(w).Encode(ov)
		case "/api/auth":
			exp := start.Add(time.Hour)
			json.NewEncoder(w).Encode(authstate.Report{Servers: []authstate.Server{{Server: "linear", URL: "https://mcp.linear.example/mcp", Agents: []string{"oracle"},
				Grant: "authorization_code", Configured: true, State: authstate.SignedIn, Issuer: "https://auth.linear.example", Scopes: []string{"read"}, Expires: &exp, Refreshable: true}}})
		case "/api/agents/abacus/runs":
			json.NewEncoder(w).Encode(studioapi.JournalRuns{Agent: "abacus", Runs: []studioapi.JournalRun{}, Resumable: 2})
		case "/api/agents/oracle/runs":
			w.WriteHeader(http.StatusBadGateway)
			io.WriteString(w, `{"error":"the agent's run journal cannot be read: agent oracle is restarting"}`)
		case "/metrics":
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			io.WriteString(w, metricsText)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestStatus(t *testing.T) {
	srv := fakeStudio(t, "tok-123456")
	t.Setenv(studioapi.EnvToken, "tok-123456")
	var out, errOut bytes.Buffer
	if code := Main(context.Background(), []string{"--studio", srv.URL}, nil, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	got := out.String()
	for _, want := range []string{
		"studio http://studio.test: 2 agents, 1 running",
		"AGENT   STATE       RESTARTS  CALLS  ERRORS  P50    P95    MODEL REQS  TOKENS          TOOLS\n",
		"abacus  running     0         10     2       5.5ms  9.5ms  -           -               calculate, date_math\n",
		// Both models' requests and tokens (prompt and completion; cached
		// and reasoning are parts of them), and the cost.
		"oracle  restarting  2         1      0       -      -      6           12,345 $0.0123",
		"oracle exited at " + time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Local().Format(time.TimeOnly) + ": exited: exit status 1",
		"oracle  1     1       0     3      1        1        1",
		"oracle → abacus.calculate  ok            1.5ms  recovered: retried on a new session",
		"client → oracle.ask        running       …",
		// The page's words, not tool_error; a server's escape made visible.
		"client → oracle.ask        not answered  3.0ms\n",
		"oracle → abacus.calculate  refused       1.0ms  no ␛[2Jdivision\n",
		"RESUMABLE RUNS\nabacus  2  (switchboard runs --agent abacus; resume one with switchboard ask --agent abacus --resume RUN)\noracle  -  (the agent's run journal cannot be read: agent oracle is restarting)\n",
		"SIGN-IN\nlinear               signed in at https://auth.linear.example; scopes read; expires 2026-01-02T04:04:05Z, refreshable (used by oracle)\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}

	out.Reset()
	if code := Main(context.Background(), []string{"--studio", srv.URL, "--json"}, nil, &out, &errOut); code != 0 {
		t.Fatalf("--json: exit %d: %s", code, errOut.String())
	}
	var st Status
	if err := json.Unmarshal(out.Bytes(), &st); err != nil || len(st.Calls) != 2 || len(st.Auth.Servers) != 1 || st.Auth.Servers[0].State != authstate.SignedIn {
		t.Fatalf("--json: %v %+v %+v", err, st.Calls, st.Auth)
	}
	// Ten calls in the (1ms, 10ms] bucket: the median is interpolated
	// halfway, 5.5ms; the 95th 9.55ms.
	if c := st.Calls[0]; c.Agent != "abacus" || c.Calls != 10 || c.Errors != 2 || math.Abs(c.P50MS-5.5) > 1e-9 || math.Abs(c.P95MS-9.55) > 1e-9 {
		t.Errorf("--json: %+v", c)
	}
	if c := st.Calls[0]; c.ResumableRuns == nil || *c.ResumableRuns != 2 {
		t.Errorf("--json: abacus's resumable runs %v, want 2", c.ResumableRuns)
	}
	if c := st.Calls[1]; c.ResumableRuns != nil || !strings.Contains(c.ResumableError, "restarting") {
		t.Errorf("--json: oracle's resumable runs %v (%q), want none read and why", c.ResumableRuns, c.ResumableError)
	}
	if c := st.Calls[1]; c.Agent != "oracle" || c.ModelRequests != 6 || c.PromptTokens != 12000 || c.CompletionTokens != 345 || math.Abs(c.CostUSD-0.0123) > 1e-12 {
		t.Errorf("--json: %+v", c)
	}

	// A failed write is a failure, not an answer.
	errOut.Reset()
	if code := Main(context.Background(), []string{"--studio", srv.URL, "--json"}, nil, failingWriter{}, &errOut); code != 1 || !strings.Contains(errOut.String(), "writing the status") {
		t.Fatalf("--json to a failing stdout: exit %d: %s", code, errOut.String())
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("stdout is closed") }

func TestStatusErrors(t *testing.T) {
	srv := fakeStudio(t, "tok-123456")
	t.Setenv(studioapi.EnvToken, "")
	var out, errOut bytes.Buffer
	if code := Main(context.Background(), []string{"--studio", srv.URL}, nil, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "401") {
		t.Errorf("without the token: exit %d, %q", code, errOut.String())
	}
	errOut.Reset()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	if code := Main(context.Background(), []string{"--studio", closed.URL}, nil, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "no studio at") {
		t.Errorf("no studio: exit %d, %q", code, errOut.String())
	}
	if code := Main(context.Background(), []string{"extra"}, nil, &out, &errOut); code != 2 {
		t.Errorf("an argument: exit %d", code)
	}
}

func TestQuantile(t *testing.T) {
	h := func(counts ...uint64) *dto.Histogram {
		bounds := []float64{0.01, 0.1, 1}
		hist := &dto.Histogram{SampleCount: proto.Uint64(counts[len(counts)-1])}
		for i, b := range bounds {
			hist.Bucket = append(hist.Bucket, &dto.Bucket{UpperBound: proto.Float64(b), CumulativeCount: proto.Uint64(counts[i])})
		}
		return hist
	}
	for _, c := range []struct {
		q    float64
		hs   []*dto.Histogram
		want float64
	}{
		{0.5, []*dto.Histogram{h(0, 10, 10, 10)}, 0.055},
		{0.5, []*dto.Histogram{h(10, 10, 10, 10), h(0, 0, 10, 10)}, 0.01},
		{0.99, []*dto.Histogram{h(0, 0, 0, 4)}, 1}, // beyond the last bound: the bound
		{0.5, nil, 0},
	} {
		if got := quantile(c.q, c.hs); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
}

// TestStatusOlderStudio: a studio from before /api/auth still gets its
// status shown, with the sign-in section said missing instead of an error.
func TestStatusOlderStudio(t *testing.T) {
	cur := fakeStudio(t, "")
	u, err := url.Parse(cur.URL)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	older := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/auth" {
			http.NotFound(w, r)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(older.Close)
	t.Setenv(studioapi.EnvToken, "")
	var out, errOut bytes.Buffer
	if code := Main(context.Background(), []string{"--studio", older.URL}, nil, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{"studio http://studio.test: 2 agents, 1 running", "SIGN-IN\nnot reported: this studio has no /api/auth"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if code := Main(context.Background(), []string{"--studio", older.URL, "--json"}, nil, &out, &errOut); code != 0 {
		t.Fatalf("--json: exit %d: %s", code, errOut.String())
	}
	var st Status
	if err := json.Unmarshal(out.Bytes(), &st); err != nil || !st.AuthMissing || len(st.Auth.Servers) != 0 {
		t.Fatalf("--json: %v, auth_missing %v, %+v", err, st.AuthMissing, st.Auth)
	}
}
