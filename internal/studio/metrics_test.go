package studio

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/switchboard-run/switchboard/internal/mcphttp/mcphttptest"
	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/internal/telemetry"
	"github.com/switchboard-run/switchboard/pool"
)

// scrapeMetrics reads base/metrics and parses it with the Prometheus text
// parser, failing the test on anything a Prometheus server would refuse.
func scrapeMetrics(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/metrics", nil)
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET /metrics: %s %s\n%s", resp.Status, resp.Header.Get("Content-Type"), body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v\n%s", err, body)
	}
	return fams
}

// metricValue sums the samples of family name whose labels include want
// (counter and gauge values, a histogram's count). ok is false when no
// sample matches.
func metricValue(fams map[string]*dto.MetricFamily, name string, want map[string]string) (v float64, ok bool) {
	mf := fams[name]
	if mf == nil {
		return 0, false
	}
next:
	for _, m := range mf.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, w := range want {
			if have[k] != w {
				continue next
			}
		}
		ok = true
		switch {
		case m.Counter != nil:
			v += m.GetCounter().GetValue()
		case m.Gauge != nil:
			v += m.GetGauge().GetValue()
		case m.Histogram != nil:
			v += float64(m.GetHistogram().GetSampleCount())
		case m.Untyped != nil:
			v += m.GetUntyped().GetValue()
		}
	}
	return v, ok
}

// TestMetrics: /metrics parses with the Prometheus text parser, and its
// counters move as calls are made: the proxy's own (calls, latency, errors
// by kind, tool outcomes) and the agents' federated ones (the coordinator's
// delegations, asks and pool).
func TestMetrics(t *testing.T) {
	dir := mcphttptest.Project(t, "oracle", "abacus")
	s := startStudio(t, dir, nil)
	base := s.URL()

	before := scrapeMetrics(t, base)
	for _, name := range []string{"oracle", "abacus"} {
		if v, _ := metricValue(before, studioapi.MetricAgentUp, map[string]string{"agent": name}); v != 1 {
			t.Errorf("%s{agent=%q} = %v, want 1", studioapi.MetricAgentUp, name, v)
		}
		if v, _ := metricValue(before, studioapi.MetricAgentMetricsUp, map[string]string{"agent": name}); v != 1 {
			t.Errorf("%s{agent=%q} = %v, want 1 (the agent's own /metrics is federated)", studioapi.MetricAgentMetricsUp, name, v)
		}
		if _, ok := metricValue(before, telemetry.MetricPoolSessionsOpen, map[string]string{"process": name}); !ok {
			t.Errorf("no %s{process=%q}: the agent's pool is not federated", telemetry.MetricPoolSessionsOpen, name)
		}
	}
	if _, ok := metricValue(before, telemetry.MetricPoolDials, map[string]string{"process": "studio"}); !ok {
		t.Errorf("no %s{process=\"studio\"}", telemetry.MetricPoolDials)
	}

	p := pool.New(nil)
	defer p.Close()
	abacus := &pool.Server{Name: "abacus", URL: s.AgentURL("abacus")}
	for _, expr := range []string{"2+3", "7*6"} {
		res, err := p.CallTool(t.Context(), abacus, &mcp.CallToolParams{Name: "calculate", Arguments: map[string]any{"expression": expr}})
		if err != nil || res.IsError {
			t.Fatalf("calculate %s: %v %+v", expr, err, res)
		}
	}
	res, err := p.CallTool(t.Context(), abacus, &mcp.CallToolParams{Name: "calculate", Arguments: map[string]any{"expression": "2+"}})
	if err != nil || !res.IsError {
		t.Fatalf("calculate 2+: %v %+v, want a tool error", err, res)
	}
	res, err = p.CallTool(t.Context(), &pool.Server{Name: "oracle", URL: s.AgentURL("oracle")}, &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"task": "calculate 17 * 3"}})
	if err != nil || res.IsError || !strings.Contains(toolText(res), "51") {
		t.Fatalf("ask: %v %s", err, toolText(res))
	}
	// A request on a session nobody knows: the proxy's 404.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, s.AgentURL("abacus"), strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", "no-such-session")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("stale session: %s, want 404", resp.Status)
	}

	// The proxy counts a call when its handler returns, which can be just
	// after the client has its answer: scrape until the counters settle.
	var after map[string]*dto.MetricFamily
	delta := func(name string, labels map[string]string) float64 {
		b, _ := metricValue(before, name, labels)
		a, _ := metricValue(after, name, labels)
		return a - b
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		// Two direct calls and the coordinator's delegation.
		{studioapi.MetricToolCalls, map[string]string{"agent": "abacus", "tool": "calculate", "outcome": "ok"}, 3},
		{studioapi.MetricToolCalls, map[string]string{"agent": "abacus", "tool": "calculate", "outcome": "tool_error"}, 1},
		{studioapi.MetricToolCalls, map[string]string{"agent": "oracle", "tool": "ask", "outcome": "ok"}, 1},
		{studioapi.MetricRequests, map[string]string{"agent": "abacus", "method": "tools/call"}, 4},
		{studioapi.MetricRequestDuration, map[string]string{"agent": "abacus", "method": "tools/call"}, 4},
		{studioapi.MetricToolDuration, map[string]string{"agent": "abacus", "tool": "calculate"}, 4},
		{studioapi.MetricRequestErrors, map[string]string{"agent": "abacus", "method": "tools/call", "kind": "tool_error"}, 1},
		{studioapi.MetricRequestErrors, map[string]string{"agent": "abacus", "method": "tools/list", "kind": "session_not_found"}, 1},
		// From the oracle's own /metrics: the delegation it made, the ask.
		{telemetry.MetricDelegations, map[string]string{"process": "oracle", "agent": "abacus", "tool": "calculate", "outcome": "ok"}, 1},
		{telemetry.MetricDelegationDuration, map[string]string{"process": "oracle", "agent": "abacus", "tool": "calculate"}, 1},
		{"switchboard_asks_total", map[string]string{"process": "oracle", "outcome": "ok"}, 1},
	} {
		deadline := time.Now().Add(10 * time.Second)
		for {
			if after == nil || delta(c.name, c.labels) != c.want && time.Now().Before(deadline) {
				if after != nil {
					time.Sleep(10 * time.Millisecond)
				}
				after = scrapeMetrics(t, base)
				continue
			}
			break
		}
		if got := delta(c.name, c.labels); got != c.want {
			t.Errorf("%s%v moved by %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if got := delta(telemetry.MetricPoolDials, map[string]string{"process": "oracle"}); got < 1 {
		t.Errorf("%s{process=oracle} moved by %v: the coordinator's pool dialed abacus", telemetry.MetricPoolDials, got)
	}
	if v, _ := metricValue(after, studioapi.MetricAgentRestarts, map[string]string{"agent": "abacus"}); v != 0 {
		t.Errorf("%s{agent=abacus} = %v", studioapi.MetricAgentRestarts, v)
	}

	// The recent delegations saw the same calls, newest (started last)
	// first: the coordinator's delegation started inside the ask.
	ds := s.Delegations(10)
	var got []string
	for _, d := range ds {
		got = append(got, d.From+">"+d.Agent+"."+d.Tool+":"+d.Outcome)
	}
	want := []string{"oracle>abacus.calculate:ok", ">oracle.ask:ok", ">abacus.calculate:tool_error", ">abacus.calculate:ok", ">abacus.calculate:ok"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("recent delegations:\n got %v\nwant %v", got, want)
	}
	if ds[0].RunID == "" || ds[0].RunID != ds[1].RunID {
		t.Errorf("the ask and its delegation should share the run id: %q, %q", ds[0].RunID, ds[1].RunID)
	}
}

// TestDelegationRecovery: a tools/call answered 404 and then sent again
// (the pool's retry on a new session) is shown as a recovery on both.
func TestDelegationRecovery(t *testing.T) {
	l := newDelegationLog()
	call := func(kind string) *studioapi.Delegation {
		o := &observation{agent: "packrat", method: "tools/call", tool: "store_note", runID: "R1", argsDigest: "d1", start: time.Now()}
		d := l.start(o)
		o.kind, o.duration = kind, time.Millisecond
		l.finish(d, o)
		return d
	}
	other := &observation{agent: "packrat", method: "tools/call", tool: "store_note", runID: "R2", argsDigest: "d1", start: time.Now()}

	first := call("session_not_found")
	if first.Recovery != studioapi.RecoveryExpired {
		t.Fatalf("404: recovery %q, want %q", first.Recovery, studioapi.RecoveryExpired)
	}
	// Another run's identical call is not the retry.
	l.finish(l.start(other), other)
	retry := call("")
	got := l.Recent(10)
	if len(got) != 3 || got[0].ID != retry.ID || got[0].Recovery != studioapi.RecoveryRecovered || got[2].Recovery != studioapi.RecoveryRetried || got[1].Recovery != "" {
		t.Fatalf("after the retry: %+v", got)
	}

	failed := call("session_not_found")
	again := call("session_not_found")
	if failed.Recovery != studioapi.RecoveryRetried || again.Recovery != studioapi.RecoveryFailed {
		t.Fatalf("a retry that fails: %q then %q", failed.Recovery, again.Recovery)
	}

	// The ring keeps the most recent only.
	for range recentDelegations + 5 {
		call("")
	}
	if got := l.Recent(recentDelegations + 10); len(got) != recentDelegations || got[0].ID != l.lastID {
		t.Fatalf("ring: %d entries, newest %d, want %d and %d", len(got), got[0].ID, recentDelegations, l.lastID)
	}
}

// TestSniffer: the JSON-RPC response to the request is found in an SSE
// stream split across writes, among progress notifications, and in a JSON
// body; what passes through is unchanged.
func TestSniffer(t *testing.T) {
	notification := `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1,"message":"{\"result\":{\"isError\":true}}"}}`
	cases := []struct {
		name, contentType, body string
		status                  int
		wantKind, wantMessage   string
	}{
		{"sse ok", "text/event-stream", "event: message\ndata: " + notification + "\n\nevent: message\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[]}}\n\n", 200, "", ""},
		{"sse tool error", "text/event-stream", "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"isError\":true}}\r\n\r\n", 200, "tool_error", ""},
		{"sse rpc error", "text/event-stream", "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"error\":{\"code\":-32602,\"message\":\"unknown tool\"}}\n\n", 200, "rpc_error", "unknown tool"},
		{"sse other id", "text/event-stream", "data: {\"jsonrpc\":\"2.0\",\"id\":8,\"result\":{\"isError\":true}}\n\n", 200, "no_response", ""},
		{"json ok", "application/json", `{"jsonrpc":"2.0","id":7,"result":{}}`, 200, "", ""},
		{"404", "application/json", `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"session not found"}}`, 404, "session_not_found", "session not found"},
		{"503", "application/json", `{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"agent abacus is restarting"}}`, 503, "agent_unavailable", "agent abacus is restarting"},
		{"413", "application/json", `{"error":"too large"}`, 413, "http_413", "too large"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			sn := &sniffer{ResponseWriter: rec, wantID: json.RawMessage("7"), parse: true}
			sn.Header().Set("Content-Type", c.contentType)
			sn.WriteHeader(c.status)
			for b := []byte(c.body); len(b) > 0; b = b[min(5, len(b)):] {
				sn.Write(b[:min(5, len(b))])
				sn.Flush()
			}
			o := &observation{}
			sn.finish(o, t.Context())
			if o.kind != c.wantKind || o.message != c.wantMessage {
				t.Errorf("kind %q message %q, want %q %q", o.kind, o.message, c.wantKind, c.wantMessage)
			}
			if rec.Body.String() != c.body || !rec.Flushed {
				t.Errorf("passed through %q (flushed %v), want %q", rec.Body.String(), rec.Flushed, c.body)
			}
		})
	}
}

// TestSnifferAnswersBeforePassingOn: in an SSE stream the call is recorded
// when its response is seen, before the response reaches the client, so a
// caller holding its answer never finds its call still running.
func TestSnifferAnswersBeforePassingOn(t *testing.T) {
	rec := httptest.NewRecorder()
	sn := &sniffer{ResponseWriter: rec, wantID: json.RawMessage("7"), parse: true}
	answered := 0
	sn.answered = func() {
		answered++
		if strings.Contains(rec.Body.String(), `"id":7`) {
			t.Error("the response reached the client before the call was recorded")
		}
	}
	sn.Header().Set("Content-Type", "text/event-stream")
	sn.WriteHeader(200)
	sn.Write([]byte("data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n"))
	if answered != 0 {
		t.Fatal("answered on a notification")
	}
	sn.Write([]byte("data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\":[]}}\n\n"))
	sn.Write([]byte(": the stream stays open a moment\n"))
	if answered != 1 {
		t.Fatalf("answered %d times, want once", answered)
	}
}
