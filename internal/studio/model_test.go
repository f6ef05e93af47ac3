package studio

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sashabaranov/go-openai"

	"github.com/switchboard-run/switchboard/internal/logging"
	"github.com/switchboard-run/switchboard/internal/projecttest"
	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/pool"
)

// TestAgentListingSaysWhichModel: /api/agents names each agent's model and
// endpoint as the agent resolves them: the environment's OPENAI_MODEL and
// OPENAI_BASE_URL over agent.json, agent.json alone where the environment
// says nothing, the builtin model for a bundled agent. It is what the
// agent's process runs: a turn of each scripted agent reaches that
// endpoint (an OpenAI-shaped test server) with that model name. The API
// key is in no listing.
func TestAgentListingSaysWhichModel(t *testing.T) {
	const key = "sk-listingSecret1234567890"
	var mu sync.Mutex
	seen := map[string]string{} // endpoint path → model name requested
	endpoint := func(name string) *httptest.Server {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var req openai.ChatCompletionRequest
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
				t.Errorf("%s: %v", name, err)
			}
			if got := r.Header.Get("Authorization"); got != "Bearer "+key {
				t.Errorf("%s: Authorization %q, want the environment's key", name, got)
			}
			mu.Lock()
			seen[name+" "+r.URL.Path] = req.Model
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(openai.ChatCompletionResponse{
				ID: "chatcmpl-1", Object: "chat.completion", Model: req.Model,
				Choices: []openai.ChatCompletionChoice{{Message: openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: "done"}, FinishReason: openai.FinishReasonStop}},
			})
		}))
		t.Cleanup(ts.Close)
		return ts
	}
	fromEnv, fromDef := endpoint("env"), endpoint("def")

	dir := projecttest.New(t, "abacus")
	// alpha names its own model and endpoint; beta names neither. The
	// environment's OPENAI_BASE_URL and OPENAI_MODEL win over alpha's, so
	// alpha is started without them to show its own.
	writeAgent(t, dir, "oracle", "alpha", func(d map[string]any) {
		d["model"] = map[string]any{"name": "alpha-model", "base_url": fromDef.URL + "/v1/"}
		d["tools"] = []string{"abacus"} // a tool of its own, so that its turn is a plain answer
	})
	s := startStudio(t, dir, &Options{Env: []string{"OPENAI_BASE_URL=", "OPENAI_MODEL=", "OPENAI_API_KEY=" + key}})
	code, _, body := get(t, s.URL()+"/api/agents", nil)
	if code != http.StatusOK || strings.Contains(string(body), key) {
		t.Fatalf("GET /api/agents: %d, the key shown: %v\n%s", code, strings.Contains(string(body), key), body)
	}
	agents := listAgents(t, s.URL(), nil)
	want := map[string]studioapi.AgentModel{
		"alpha":  {Name: "alpha-model", Endpoint: fromDef.URL + "/v1/"},
		"abacus": {Name: "builtin", Endpoint: studioapi.ModelEndpointBuiltin},
	}
	for name, w := range want {
		if got := agents[name].Model; got == nil || *got != w {
			t.Errorf("agent %s: model %+v, want %+v", name, got, w)
		}
	}
	ask(t, s, "alpha")
	mu.Lock()
	if got := seen["def /v1/chat/completions"]; got != "alpha-model" {
		t.Errorf("alpha's turn asked %q at its agent.json's endpoint (saw %v), want alpha-model", got, seen)
	}
	mu.Unlock()

	// The environment's settings over agent.json's, in the listing as in
	// the agent's turn.
	dir = projecttest.New(t)
	writeAgent(t, dir, "oracle", "alpha", func(d map[string]any) {
		d["model"] = map[string]any{"name": "alpha-model", "base_url": fromDef.URL + "/v1"}
		d["tools"] = []string{"abacus"}
	})
	s = startStudio(t, dir, &Options{Env: []string{"OPENAI_BASE_URL=" + fromEnv.URL + "/v2", "OPENAI_MODEL=env-model", "OPENAI_API_KEY=" + key}})
	if got := listAgents(t, s.URL(), nil)["alpha"].Model; got == nil || *got != (studioapi.AgentModel{Name: "env-model", Endpoint: fromEnv.URL + "/v2"}) {
		t.Errorf("alpha under the environment's settings: model %+v", got)
	}
	ask(t, s, "alpha")
	mu.Lock()
	if got := seen["env /v2/chat/completions"]; got != "env-model" {
		t.Errorf("alpha's turn asked %q at the environment's endpoint (saw %v), want env-model", got, seen)
	}
	mu.Unlock()
}

// ask gives agent a task through the studio and fails unless it answers.
func ask(t *testing.T, s *Studio, agent string) {
	t.Helper()
	p := pool.New(nil)
	defer p.Close()
	res, err := p.CallTool(t.Context(), &pool.Server{Name: agent, URL: s.AgentURL(agent)}, &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"task": "anything"}})
	if err != nil || res.IsError {
		t.Fatalf("ask %s: %v %+v", agent, err, res)
	}
}

// TestShownEndpoint: a base URL is listed without what can carry a
// credential (user info, query, fragment) and with the environment's
// secrets redacted from the rest.
func TestShownEndpoint(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1"},
		{"https://user:pa55word@api.example.com/v1/", "https://api.example.com/v1/"},
		{"https://api.example.com/v1?api-key=k3y&x=1#frag", "https://api.example.com/v1"},
		{"https://gw.example.com/tenant-s3cr3t-value/v1", "https://gw.example.com/" + logging.Redacted + "/v1"},
	} {
		if got := ShownEndpoint(tc.in, []string{"tenant-s3cr3t-value"}); got != tc.want {
			t.Errorf("ShownEndpoint(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
