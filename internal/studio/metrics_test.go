package studio

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/switchboard-run/switchboard/internal/projecttest"
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
	dir := projecttest.New(t, "oracle", "abacus")
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
