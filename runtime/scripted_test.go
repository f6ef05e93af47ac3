package runtime_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/sashabaranov/go-openai"
)

// A step is one request the scripted model expects and its reply.
type step struct {
	// want is the exact request body, as JSON; compared structurally.
	want string
	// check, when set, is called with the request instead of comparing want.
	check func(t *testing.T, req *openai.ChatCompletionRequest)
	reply openai.ChatCompletionMessage
	// before, when set, runs before the reply is sent (to block or signal).
	before func()
}

// scriptedModel is an OpenAI-compatible chat completions server that plays
// a script: each request must be exactly the next step's want, and gets that
// step's reply. Anything else fails the test.
type scriptedModel struct {
	t   *testing.T
	URL string // base URL, ending in /v1

	mu     sync.Mutex
	steps  []step
	served int
	auth   []string // Authorization headers received
}

func newScriptedModel(t *testing.T, steps ...step) *scriptedModel {
	m := &scriptedModel{t: t, steps: steps}
	ts := httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(ts.Close)
	m.URL = ts.URL + "/v1"
	return m
}

func (m *scriptedModel) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		m.t.Errorf("scripted model: unexpected %s %s", r.Method, r.URL.Path)
		http.Error(w, "unexpected", http.StatusNotFound)
		return
	}
	var body bytes.Buffer
	body.ReadFrom(r.Body)
	m.mu.Lock()
	m.auth = append(m.auth, r.Header.Get("Authorization"))
	if m.served >= len(m.steps) {
		m.mu.Unlock()
		m.t.Errorf("scripted model: request %d beyond the script of %d:\n%s", m.served+1, len(m.steps), body.String())
		http.Error(w, "beyond the script", http.StatusInternalServerError)
		return
	}
	s := m.steps[m.served]
	m.served++
	n := m.served
	m.mu.Unlock()

	if s.check != nil {
		var req openai.ChatCompletionRequest
		if err := json.Unmarshal(body.Bytes(), &req); err != nil {
			m.t.Errorf("scripted model: request %d: %v", n, err)
		}
		s.check(m.t, &req)
	} else if s.want != "" {
		if diff := jsonDiff(s.want, body.String()); diff != "" {
			m.t.Errorf("scripted model: request %d differs:\n%s", n, diff)
		}
	}
	if s.before != nil {
		s.before()
	}
	finish := openai.FinishReasonStop
	if len(s.reply.ToolCalls) > 0 {
		finish = openai.FinishReasonToolCalls
	}
	if s.reply.Role == "" {
		s.reply.Role = openai.ChatMessageRoleAssistant
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(openai.ChatCompletionResponse{
		ID: "chatcmpl-test", Object: "chat.completion", Model: "scripted",
		Choices: []openai.ChatCompletionChoice{{Message: s.reply, FinishReason: finish}},
	})
}

// Served returns how many requests the model answered.
func (m *scriptedModel) Served() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.served
}

// jsonDiff compares two JSON texts structurally and returns both, indented,
// when they differ.
func jsonDiff(want, got string) string {
	var w, g any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		return "want is not JSON: " + err.Error()
	}
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		return "got is not JSON: " + err.Error()
	}
	wb, _ := json.MarshalIndent(w, "", "  ")
	gb, _ := json.MarshalIndent(g, "", "  ")
	if bytes.Equal(wb, gb) {
		return ""
	}
	return "want:\n" + string(wb) + "\ngot:\n" + string(gb)
}

func toolCall(id, name, args string) openai.ToolCall {
	return openai.ToolCall{ID: id, Type: openai.ToolTypeFunction, Function: openai.FunctionCall{Name: name, Arguments: args}}
}
