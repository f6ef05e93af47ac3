package agentserver

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/switchboard-run/switchboard/internal/mcptest"
	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// openAIReply is one scripted answer of a chat completions endpoint:
// either an error status with OpenAI's error body, or a completion whose
// message is content or a call of the offered tool whose name ends in
// tool, with usage as OpenAI reports it.
type openAIReply struct {
	status     int // 0: 200
	tool       string
	content    string
	usage      string // the "usage" member, verbatim
	retryAfter string // retry-after-ms, for an error
}

// scriptedOpenAI serves replies in order at /v1/chat/completions, in the
// wire shapes OpenAI documents: a chat.completion object, or, for a request
// with "stream": true, chat.completion.chunk events ending with a chunk
// that carries only usage (stream_options.include_usage) and [DONE].
func scriptedOpenAI(t *testing.T, replies ...openAIReply) string {
	t.Helper()
	var mu sync.Mutex
	n := 0
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model  string `json:"model"`
			Stream bool   `json:"stream"`
			Tools  []struct {
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			} `json:"tools"`
		}
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path != "/v1/chat/completions" || json.Unmarshal(body, &req) != nil {
			t.Errorf("scripted model: %s %s %q", r.Method, r.URL.Path, body)
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		mu.Lock()
		if n >= len(replies) {
			mu.Unlock()
			t.Errorf("scripted model: request %d is beyond the script", n+1)
			http.Error(w, "beyond the script", http.StatusInternalServerError)
			return
		}
		rep := replies[n]
		n++
		mu.Unlock()
		if rep.status != 0 {
			if rep.retryAfter != "" {
				w.Header().Set("retry-after-ms", rep.retryAfter)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(rep.status)
			fmt.Fprintf(w, `{"error":{"message":"Rate limit reached for %s","type":"requests","param":null,"code":"rate_limit_exceeded"}}`, req.Model)
			return
		}
		message, finish := fmt.Sprintf(`{"role":"assistant","content":%q,"refusal":null}`, rep.content), "stop"
		if rep.tool != "" {
			name := ""
			for _, tl := range req.Tools {
				if strings.HasSuffix(tl.Function.Name, rep.tool) {
					name = tl.Function.Name
				}
			}
			message = fmt.Sprintf(`{"role":"assistant","content":null,"tool_calls":[{"id":"call_%d","type":"function","function":{"name":%q,"arguments":"{\"expression\":\"6*7\"}"}}],"refusal":null}`, n, name)
			finish = "tool_calls"
		}
		if req.Stream {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-%d\",\"object\":\"chat.completion.chunk\",\"created\":1733000000,\"model\":%q,\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%q}]}\n\n", n, req.Model, message, finish)
			fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-%d\",\"object\":\"chat.completion.chunk\",\"created\":1733000000,\"model\":%q,\"choices\":[],\"usage\":%s}\n\n", n, req.Model, rep.usage)
			io.WriteString(w, "data: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-%d","object":"chat.completion","created":1733000000,"model":%q,"choices":[{"index":0,"message":%s,"logprobs":null,"finish_reason":%q}],"usage":%s,"service_tier":"default","system_fingerprint":"fp_test"}`,
			n, req.Model, message, finish, rep.usage)
	}))
	t.Cleanup(ts.Close)
	return ts.URL + "/v1"
}

// scrapeFamilies reads a /metrics endpoint with the Prometheus text parser.
func scrapeFamilies(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// sample is the value of the series of fam whose labels include want, and
// whether there is one.
func sample(fams map[string]*dto.MetricFamily, fam string, want map[string]string) (float64, bool) {
	mf := fams[fam]
	if mf == nil {
		return 0, false
	}
next:
	for _, m := range mf.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

// TestModelMetrics: one ask against an OpenAI-shaped endpoint that first
// rate-limits the request, then calls a native tool, then answers; the
// agent's /metrics counts each attempt by outcome, times them, and adds up
// the tokens the two answers reported, cached and reasoning parts
// included; no cost series appears for a model without a price.
func TestModelMetrics(t *testing.T) {
	const modelName = "gpt-4o-mini-2024-07-18"
	base := scriptedOpenAI(t,
		openAIReply{status: http.StatusTooManyRequests, retryAfter: "0"},
		openAIReply{tool: "calculate", usage: `{"prompt_tokens":1000,"completion_tokens":34,"total_tokens":1034,"prompt_tokens_details":{"cached_tokens":200,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`},
		openAIReply{content: "6*7 is 42.", usage: `{"prompt_tokens":1100,"completion_tokens":200,"total_tokens":1300,"prompt_tokens_details":{"cached_tokens":1024},"completion_tokens_details":{"reasoning_tokens":128}}`},
	)
	def := &agentdef.Definition{Name: "metered", Tools: []string{"abacus"}, Model: agentdef.Model{BaseURL: base, Name: modelName}}
	s, ts := newTestServer(t, def)
	metrics := httptest.NewServer(s.MetricsHandler())
	t.Cleanup(metrics.Close)

	// Before any ask, the families exist without series.
	if v, ok := sample(scrapeFamilies(t, metrics.URL), studioapi.MetricModelRequests, nil); ok {
		t.Fatalf("before any ask: %s = %v", studioapi.MetricModelRequests, v)
	}

	cs := connect(t, ts.URL, nil)
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"task": "what is 6*7"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || !strings.Contains(mcptest.Text(res), "42") {
		t.Fatalf("ask: isError=%v %q", res.IsError, mcptest.Text(res))
	}

	fams := scrapeFamilies(t, metrics.URL)
	l := func(kv ...string) map[string]string {
		m := map[string]string{"process": "metered", "model": modelName}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for _, c := range []struct {
		fam    string
		labels map[string]string
		want   float64
	}{
		{studioapi.MetricModelRequests, l("outcome", "ok"), 2},
		{studioapi.MetricModelRequests, l("outcome", "retried"), 1},
		{studioapi.MetricModelRequestDuration, l(), 3}, // every attempt is timed
		{studioapi.MetricModelTokens, l("kind", "prompt"), 2100},
		{studioapi.MetricModelTokens, l("kind", "completion"), 234},
		{studioapi.MetricModelTokens, l("kind", "cached"), 1224},
		{studioapi.MetricModelTokens, l("kind", "reasoning"), 128},
	} {
		got, ok := sample(fams, c.fam, c.labels)
		if !ok || math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s%v = %v (present %v), want %v", c.fam, c.labels, got, ok, c.want)
		}
	}
	if _, ok := sample(fams, studioapi.MetricModelRequests, l("outcome", "failed")); ok {
		t.Errorf("a failed series without a failure")
	}
	if v, ok := sample(fams, studioapi.MetricModelCost, nil); ok {
		t.Errorf("%s = %v for a model without a price", studioapi.MetricModelCost, v)
	}
	if mf := fams[studioapi.MetricModelRequestDuration]; mf == nil || mf.GetType() != dto.MetricType_HISTOGRAM {
		t.Errorf("%s is not a histogram: %v", studioapi.MetricModelRequestDuration, mf)
	}

	// The ask's result says the same in its usage.
	var out struct {
		Usage studioapi.Usage `json:"usage"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if want := (studioapi.Usage{Requests: 2, PromptTokens: 2100, CompletionTokens: 234, CachedTokens: 1224, ReasoningTokens: 128, TotalTokens: 2334}); out.Usage != want {
		t.Errorf("structuredContent.usage %+v, want %+v", out.Usage, want)
	}
}
