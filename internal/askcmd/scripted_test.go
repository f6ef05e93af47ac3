package askcmd

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/sashabaranov/go-openai"
)

// turnStep is one chat completion request an agent's turn is expected to
// make, and the scripted reply.
type turnStep struct {
	// check inspects the request; it should assert it exactly.
	check func(t *testing.T, req *openai.ChatCompletionRequest)
	// before runs after check and before the reply is sent; it may block
	// (the request's context is passed, done when the agent gives up).
	before func(r *http.Request)
	reply  openai.ChatCompletionMessage
}

// scriptedModel is an OpenAI-compatible chat completions endpoint serving
// several agents, each from its own script. An agent is recognised by its
// system prompt, which starts "You are <name>"; a request that has no
// script step left fails the test.
type scriptedModel struct {
	t   *testing.T
	URL string // base URL, ending in /v1

	mu      sync.Mutex
	scripts map[string][]turnStep
	served  map[string]int
}

func newScriptedModel(t *testing.T, scripts map[string][]turnStep) *scriptedModel {
	m := &scriptedModel{t: t, scripts: scripts, served: map[string]int{}}
	ts := httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(ts.Close)
	m.URL = ts.URL + "/v1"
	return m
}

func (m *scriptedModel) serve(w http.ResponseWriter, r *http.Request) {
	var req openai.ChatCompletionRequest
	var body bytes.Buffer
	body.ReadFrom(r.Body)
	if err := json.Unmarshal(body.Bytes(), &req); err != nil || len(req.Messages) == 0 {
		m.t.Errorf("scripted model: bad request %q: %v", body.String(), err)
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	agent := agentOf(req.Messages[0].Content)
	m.mu.Lock()
	n := m.served[agent]
	script := m.scripts[agent]
	if n >= len(script) {
		m.mu.Unlock()
		m.t.Errorf("scripted model: request %d from agent %q is beyond its script:\n%s", n+1, agent, body.String())
		http.Error(w, "beyond the script", http.StatusInternalServerError)
		return
	}
	m.served[agent] = n + 1
	step := script[n]
	m.mu.Unlock()

	if step.check != nil {
		step.check(m.t, &req)
	}
	if step.before != nil {
		step.before(r)
	}
	reply := step.reply
	reply.Role = openai.ChatMessageRoleAssistant
	finish := openai.FinishReasonStop
	if len(reply.ToolCalls) > 0 {
		finish = openai.FinishReasonToolCalls
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(openai.ChatCompletionResponse{
		ID: "chatcmpl-e2e", Object: "chat.completion", Model: req.Model,
		Choices: []openai.ChatCompletionChoice{{Message: reply, FinishReason: finish}},
	})
}

// Served returns how many requests agent has made.
func (m *scriptedModel) Served(agent string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.served[agent]
}

// agentOf reads the agent's name from a system prompt "You are <name>...".
func agentOf(system string) string {
	rest, ok := strings.CutPrefix(system, "You are ")
	if !ok {
		return ""
	}
	end := strings.IndexFunc(rest, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') })
	if end < 0 {
		return rest
	}
	return rest[:end]
}

func call(id, name, args string) openai.ToolCall {
	return openai.ToolCall{ID: id, Type: openai.ToolTypeFunction, Function: openai.FunctionCall{Name: name, Arguments: args}}
}

// messagesJSON renders messages as go-openai sends them, for exact
// comparison.
func messagesJSON(t *testing.T, msgs []openai.ChatCompletionMessage) string {
	t.Helper()
	b, err := json.MarshalIndent(msgs, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// assertMessages checks that got is exactly want.
func assertMessages(t *testing.T, step string, got, want []openai.ChatCompletionMessage) {
	t.Helper()
	if g, w := messagesJSON(t, got), messagesJSON(t, want); g != w {
		t.Errorf("%s: messages differ\nwant %s\n got %s", step, w, g)
	}
}
