package agentserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/pool/mcpconfig"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// TestRunStepsEndpoint: a real agent server asks a model on loopback that
// calls a sibling's tool (a go-sdk server on loopback whose mcp.json entry
// carries a bearer token) and then answers at length. GET
// /runs/<id>/steps/<n> shows each step's messages, rebuilt from the
// journal as sent, and its response: the mcp.json token and an API key,
// which the model and the tool echo, are redacted everywhere; the long
// answer is cut with a mark of what was left out. An unknown run or step
// is 404 with a message that says which; another credential's run is not
// found; a foreign Origin is refused. The views ask no model and call no
// tool.
func TestRunStepsEndpoint(t *testing.T) {
	const token = "mcp-json-token-Zq81xK0p"
	apiKey := "sk-" + strings.Repeat("Q7w", 12)
	var calls atomic.Int32
	sib := mcp.NewServer(&mcp.Implementation{Name: "sib", Version: "test"}, nil)
	sib.AddTool(&mcp.Tool{Name: "store", Description: "Store a note.", InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			calls.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "stored, with " + req.Extra.Header.Get("Authorization")}}}, nil
		})
	sibTS := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return sib }, nil))
	t.Cleanup(sibTS.Close)

	long := strings.Repeat("the answer goes on. ", 1200) // 24,000 bytes
	var asked atomic.Int32
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		if !strings.Contains(string(body), `"role":"tool"`) {
			args, _ := json.Marshal(fmt.Sprintf(`{"text":"note for %s and %s"}`, token, apiKey))
			fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"","tool_calls":[{"id":"call_1","type":"function","function":{"name":"sib__store","arguments":%s}}]},"finish_reason":"tool_calls"}]}`, args)
			return
		}
		content, _ := json.Marshal("<b>done</b> " + long)
		fmt.Fprintf(w, `{"id":"c2","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":%s},"finish_reason":"stop"}]}`, content)
	}))
	t.Cleanup(model.Close)
	zero := 0
	def := &agentdef.Definition{Name: "lambda", Instructions: "You are lambda.", Model: agentdef.Model{BaseURL: model.URL + "/v1", Name: "m", MaxRetries: &zero},
		MCP: &mcpconfig.Config{Path: "tools/mcp.json", Servers: []*mcpconfig.Server{{Name: "sib", Type: "http", URL: sibTS.URL, Headers: map[string]string{"Authorization": "Bearer " + token}}}}}
	s, err := New(def, &Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", s.Handler())
	mux.Handle("/runs/", s.RunsHandler())
	ts := httptest.NewServer(mux)
	t.Cleanup(func() {
		s.CloseSessions()
		ts.Close()
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	const me = "Bearer me"
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp", HTTPClient: &http.Client{Transport: bearer{me, http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"task": "store a note with key " + apiKey}})
	cs.Close()
	if err != nil || res.IsError {
		t.Fatalf("ask: %v %+v", err, res)
	}
	var out struct {
		RunID string `json:"run_id"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(b, &out)
	if out.RunID == "" || calls.Load() != 1 || asked.Load() != 2 {
		t.Fatalf("run %q, the tool ran %d times, the model was asked %d times; want a run, 1 and 2", out.RunID, calls.Load(), asked.Load())
	}

	get := func(auth, path string, h map[string]string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, ts.URL+path, nil)
		req.Header.Set("Authorization", auth)
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	step := func(n int) studioapi.StepContent {
		t.Helper()
		code, body := get(me, fmt.Sprintf("/runs/%s/steps/%d", out.RunID, n), nil)
		var sc studioapi.StepContent
		if err := json.Unmarshal([]byte(body), &sc); code != http.StatusOK || err != nil {
			t.Fatalf("GET step %d: %d %s (%v)", n, code, body, err)
		}
		if strings.Contains(body, token) || strings.Contains(body, apiKey) {
			t.Errorf("step %d holds a secret: %s", n, body)
		}
		if len(body) > studioapi.MaxStepContent+16<<10 {
			t.Errorf("step %d's answer is %d bytes, past its bound", n, len(body))
		}
		return sc
	}
	one := step(1)
	if one.Step != 1 || one.Steps != 2 || one.State != studioapi.JournalDone || !one.Exact || one.Tools != 1 || len(one.Messages) != 2 ||
		one.Messages[0].Role != "system" || one.Messages[0].Content != "You are lambda." || one.Messages[1].Role != "user" ||
		!strings.HasPrefix(one.Messages[1].Content, "store a note with key ") || one.FinishReason != "tool_calls" ||
		len(one.Response.ToolCalls) != 1 || one.Response.ToolCalls[0].Name != "sib__store" || !strings.Contains(one.Response.ToolCalls[0].Arguments, "note for") {
		t.Errorf("step 1: %+v", one)
	}
	two := step(2)
	if len(two.Messages) != 4 || two.Messages[2].Role != "assistant" || len(two.Messages[2].ToolCalls) != 1 ||
		two.Messages[3].Role != "tool" || two.Messages[3].ToolCallID != "call_1" || two.Messages[3].Content != "stored, with [REDACTED]" || !two.Exact {
		t.Errorf("step 2's messages: %+v", two.Messages)
	}
	full := len("<b>done</b> " + long)
	left := full - studioapi.MaxStepText
	if r := two.Response; two.FinishReason != "stop" || r.Cut != left || !strings.HasPrefix(r.Content, "<b>done</b> the answer goes on.") ||
		!strings.HasSuffix(r.Content, fmt.Sprintf("\n… [cut, %d bytes left out]", left)) {
		t.Errorf("step 2's response: cut %d, ends %q; want cut %d with its mark", r.Cut, r.Content[max(0, len(r.Content)-60):], left)
	}
	if n, m := calls.Load(), asked.Load(); n != 1 || m != 2 {
		t.Errorf("after the views the tool ran %d times and the model was asked %d times; want 1 and 2", n, m)
	}

	for _, tc := range []struct {
		auth, path string
		h          map[string]string
		code       int
		says       string
	}{
		{me, "/runs/" + out.RunID + "/steps/3", nil, http.StatusNotFound, "journaled 2 model steps"},
		{me, "/runs/" + out.RunID + "/steps/0", nil, http.StatusNotFound, "a step is a number from 1"},
		{me, "/runs/" + out.RunID + "/steps/x", nil, http.StatusNotFound, "a step is a number from 1"},
		{me, "/runs/no-such-run/steps/1", nil, http.StatusNotFound, `so its steps cannot be shown`},
		{"Bearer someone-else", "/runs/" + out.RunID + "/steps/1", nil, http.StatusNotFound, "no run"},
		{me, "/runs/" + out.RunID + "/steps/1", map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden, ""},
	} {
		code, body := get(tc.auth, tc.path, tc.h)
		if code != tc.code || !strings.Contains(body, tc.says) {
			t.Errorf("GET %s (%v): %d %s; want %d saying %q", tc.path, tc.h, code, body, tc.code, tc.says)
		}
	}
}
