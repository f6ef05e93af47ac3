package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/sashabaranov/go-openai"
)

// These tests drive the model the way the turn loop does: go-openai's
// client, in-process through Transport (and once over a real socket through
// Handler), with the agents' real tool schemas and simulated tool results.

func newClient(t testing.TB) *openai.Client {
	t.Helper()
	cfg := openai.DefaultConfig("")
	cfg.BaseURL = BaseURL
	cfg.HTTPClient = &http.Client{Transport: Transport()}
	return openai.NewClientWithConfig(cfg)
}

// toolFunc plays the agents: it answers one tool call.
type toolFunc func(name, args string) string

// round is one model response in a turn.
type round struct {
	calls []call
	text  string
}

type call struct{ name, args string }

// runTurn loops like the turn loop until the model answers, at most 10
// rounds, and returns every response.
func runTurn(t *testing.T, c *openai.Client, task string, tools []openai.Tool, run toolFunc) []round {
	t.Helper()
	req := openai.ChatCompletionRequest{
		Model: ModelName,
		Messages: []openai.ChatCompletionMessage{
			{Role: openai.ChatMessageRoleSystem, Content: "You are oracle. Delegate to your sibling agents' tools."},
			{Role: openai.ChatMessageRoleUser, Content: task},
		},
		Tools: tools,
	}
	var rounds []round
	for i := 0; i < 10; i++ {
		resp, err := c.CreateChatCompletion(context.Background(), req)
		if err != nil {
			t.Fatalf("round %d: %v", i+1, err)
		}
		if len(resp.Choices) != 1 {
			t.Fatalf("round %d: %d choices", i+1, len(resp.Choices))
		}
		msg := resp.Choices[0].Message
		if len(msg.ToolCalls) == 0 {
			if resp.Choices[0].FinishReason != openai.FinishReasonStop {
				t.Errorf("round %d: finish_reason %q with no tool calls, want stop", i+1, resp.Choices[0].FinishReason)
			}
			return append(rounds, round{text: msg.Content})
		}
		if resp.Choices[0].FinishReason != openai.FinishReasonToolCalls {
			t.Errorf("round %d: finish_reason %q with tool calls, want tool_calls", i+1, resp.Choices[0].FinishReason)
		}
		var r round
		req.Messages = append(req.Messages, msg)
		for _, tc := range msg.ToolCalls {
			if tc.Type != openai.ToolTypeFunction || !strings.HasPrefix(tc.ID, "call_") {
				t.Errorf("round %d: tool call %+v: want type function and id call_<n>_<hash>", i+1, tc)
			}
			r.calls = append(r.calls, call{tc.Function.Name, tc.Function.Arguments})
			req.Messages = append(req.Messages, openai.ChatCompletionMessage{
				Role: openai.ChatMessageRoleTool, ToolCallID: tc.ID, Content: run(tc.Function.Name, tc.Function.Arguments)})
		}
		rounds = append(rounds, r)
	}
	t.Fatalf("no answer after 10 rounds: %+v", rounds)
	return nil
}

// archive is a tiny packrat and abacus: enough behaviour for a turn to mean
// something, with the result texts the real agents write.
type archive struct {
	mu    sync.Mutex
	notes []string
}

func (a *archive) run(name, args string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var in map[string]any
	if err := json.Unmarshal([]byte(args), &in); err != nil {
		return "Error: bad arguments: " + err.Error()
	}
	switch name {
	case "packrat__store_note":
		text, _ := in["text"].(string)
		if strings.TrimSpace(text) == "" {
			return `Error: agent "packrat", tool "store_note" reported an error: text is empty: pass the content to archive in "text"`
		}
		a.notes = append(a.notes, text)
		return fmt.Sprintf("Stored note %d.", len(a.notes))
	case "packrat__search_notes":
		q, _ := in["query"].(string)
		var b strings.Builder
		n := 0
		for i := len(a.notes) - 1; i >= 0; i-- {
			if strings.Contains(strings.ToLower(a.notes[i]), strings.ToLower(q)) {
				n++
				fmt.Fprintf(&b, "\n\nNote %d (stored 2026-01-02T03:04:05Z)\n%s", i+1, a.notes[i])
			}
		}
		if n == 0 {
			return fmt.Sprintf("No notes matching %q.", q)
		}
		return fmt.Sprintf("%d note(s) matching %q, newest first:%s", n, q, b.String())
	case "abacus__calculate":
		if in["expression"] == "2+2" {
			return "2+2 = 4"
		}
		return fmt.Sprintf("%v = 84", in["expression"])
	case "abacus__convert_units":
		return fmt.Sprintf("%v %v = 3.10686 mi", in["value"], in["from"])
	}
	return "Error: unknown tool " + name
}

const readmeTask = "remember that the launch moved to Friday, then tell me what you know about the launch"

func TestREADMETaskEndToEnd(t *testing.T) {
	tools := openaiTools(t, packratSchemas, abacusSchemas)
	want := []round{
		{calls: []call{{"packrat__store_note", `{"text":"the launch moved to Friday"}`}}},
		{calls: []call{{"packrat__search_notes", `{"query":"launch"}`}}},
		{text: "I stored that note (id 1). Here is what I know about the launch: the launch moved to Friday."},
	}
	t.Run("transport", func(t *testing.T) {
		got := runTurn(t, newClient(t), readmeTask, tools, (&archive{}).run)
		if !reflect.DeepEqual(want, got) {
			t.Errorf("turn:\n got %+v\nwant %+v", got, want)
		}
	})
	t.Run("httptest", func(t *testing.T) {
		srv := httptest.NewServer(Handler())
		defer srv.Close()
		cfg := openai.DefaultConfig("")
		cfg.BaseURL = srv.URL + "/v1"
		got := runTurn(t, openai.NewClientWithConfig(cfg), readmeTask, tools, (&archive{}).run)
		if !reflect.DeepEqual(want, got) {
			t.Errorf("turn:\n got %+v\nwant %+v", got, want)
		}
	})
}

// The README task asked twice: the archive holds the fact twice, the answer
// says it once.
func TestREADMETaskTwiceStatesTheFactOnce(t *testing.T) {
	tools := openaiTools(t, packratSchemas, abacusSchemas)
	a := &archive{notes: []string{"the launch moved to Friday"}}
	got := runTurn(t, newClient(t), readmeTask, tools, a.run)
	want := "I stored that note (id 2). Here is what I know about the launch: the launch moved to Friday."
	if len(got) != 3 || got[2].text != want {
		t.Fatalf("turn: %+v\nwant the answer %q", got, want)
	}
}

func TestParallelIndependentSteps(t *testing.T) {
	tools := openaiTools(t, packratSchemas, abacusSchemas)
	got := runTurn(t, newClient(t), "calculate 2+2 and convert 5 km to miles", tools, (&archive{}).run)
	want := []round{
		{calls: []call{
			{"abacus__calculate", `{"expression":"2+2"}`},
			{"abacus__convert_units", `{"from":"km","to":"miles","value":5}`},
		}},
		{text: "2+2 = 4. 5 km = 3.10686 mi."},
	}
	if !reflect.DeepEqual(want, got) {
		t.Errorf("turn:\n got %+v\nwant %+v", got, want)
	}
}

func TestParallelToolCallsFalse(t *testing.T) {
	c := newClient(t)
	resp, err := c.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
		Model:             ModelName,
		Messages:          []openai.ChatCompletionMessage{{Role: "user", Content: "calculate 2+2 and convert 5 km to miles"}},
		Tools:             openaiTools(t, abacusSchemas),
		ParallelToolCalls: false,
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(resp.Choices[0].Message.ToolCalls); n != 1 {
		t.Errorf("parallel_tool_calls=false: got %d tool calls, want 1", n)
	}
}

func TestSameAgentWriteThenReadIsSequential(t *testing.T) {
	tools := openaiTools(t, packratSchemas)
	got := runTurn(t, newClient(t), "remember that the demo is at noon and tell me what you know about the demo", tools, (&archive{}).run)
	if len(got) != 3 || len(got[0].calls) != 1 || len(got[1].calls) != 1 {
		t.Fatalf("want store, then search, then answer; got %+v", got)
	}
	if want := "I stored that note (id 1). Here is what I know about the demo: the demo is at noon."; got[2].text != want {
		t.Errorf("answer %q, want %q", got[2].text, want)
	}
}

func TestToolFailureIsReported(t *testing.T) {
	tools := openaiTools(t, packratSchemas)
	failing := func(name, args string) string {
		if name == "packrat__store_note" {
			return `Error: the call to agent "packrat", tool "store_note" failed: JSON-RPC error -32603: disk full.`
		}
		return "No notes matching \"launch\"."
	}
	got := runTurn(t, newClient(t), readmeTask, tools, failing)
	want := "packrat.store_note failed: JSON-RPC error -32603: disk full. I found nothing about the launch."
	if last := got[len(got)-1].text; last != want {
		t.Errorf("answer %q, want %q", last, want)
	}
}

func TestDependentStepUsesEarlierResult(t *testing.T) {
	tools := openaiTools(t, abacusSchemas)
	results := map[string]string{
		`{"expression":"12 * 7"}`: "12 * 7 = 84",
		`{"expression":"84 * 2"}`: "84 * 2 = 168",
	}
	got := runTurn(t, newClient(t), "what is 12 times 7, then multiply that by 2", tools, func(_, args string) string { return results[args] })
	want := []round{
		{calls: []call{{"abacus__calculate", `{"expression":"12 * 7"}`}}},
		{calls: []call{{"abacus__calculate", `{"expression":"84 * 2"}`}}},
		{text: "12 * 7 = 84. 84 * 2 = 168."},
	}
	if !reflect.DeepEqual(want, got) {
		t.Errorf("turn:\n got %+v\nwant %+v", got, want)
	}
}

func TestStepNeedingMissingIDIsSkipped(t *testing.T) {
	tools := openaiTools(t, packratSchemas)
	got := runTurn(t, newClient(t), "search my notes for the budget, then delete it", tools, (&archive{}).run)
	want := []round{
		{calls: []call{{"packrat__search_notes", `{"query":"budget"}`}}},
		{text: `I found nothing about the budget. I did not call packrat.delete_note for "delete it": it needs the id from an earlier result, and there was none.`},
	}
	if !reflect.DeepEqual(want, got) {
		t.Errorf("turn:\n got %+v\nwant %+v", got, want)
	}
}

func TestNoTools(t *testing.T) {
	got := runTurn(t, newClient(t), "remember that the launch moved to Friday", nil, nil)
	want := `I am the builtin offline model, a deterministic planner rather than a language model, and I have no tools in this conversation, so I cannot do this task: "remember that the launch moved to Friday".`
	if len(got) != 1 || got[0].text != want {
		t.Errorf("got %+v, want the answer %q", got, want)
	}
}

func TestNoToolFits(t *testing.T) {
	got := runTurn(t, newClient(t), "Hello! What's the capital of France?", openaiTools(t, abacusSchemas), nil)
	text := got[0].text
	for _, want := range []string{`I could not match "Hello! What's the capital of France"`, "builtin offline model", "abacus.calculate"} {
		if !strings.Contains(text, want) {
			t.Errorf("answer %q does not contain %q", text, want)
		}
	}

	got = runTurn(t, newClient(t), "Remember that the demo is at noon. What's the capital of France?", openaiTools(t, packratSchemas), (&archive{}).run)
	if want := `I stored that note (id 1). None of my tools fits "What's the capital of France".`; got[len(got)-1].text != want {
		t.Errorf("answer %q, want %q", got[len(got)-1].text, want)
	}
}

func TestToolChoice(t *testing.T) {
	c := newClient(t)
	ask := func(choice any, task string) openai.ChatCompletionMessage {
		t.Helper()
		resp, err := c.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
			Messages:   []openai.ChatCompletionMessage{{Role: "user", Content: task}},
			Tools:      openaiTools(t, packratSchemas, abacusSchemas),
			ToolChoice: choice,
		})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Choices[0].Message
	}
	if m := ask("none", "what is 2+2?"); len(m.ToolCalls) != 0 || m.Content == "" {
		t.Errorf(`tool_choice "none": got %+v, want a text answer`, m)
	}
	if m := ask("required", "hello there"); len(m.ToolCalls) != 1 {
		t.Errorf(`tool_choice "required": got %+v, want one tool call`, m)
	}
	forced := openai.ToolChoice{Type: openai.ToolTypeFunction, Function: openai.ToolFunction{Name: "packrat__search_notes"}}
	if m := ask(forced, "what is 2+2?"); len(m.ToolCalls) != 1 || m.ToolCalls[0].Function.Name != "packrat__search_notes" {
		t.Errorf("tool_choice function: got %+v, want a call to packrat__search_notes", m)
	}
}

// post sends body to path through the in-process transport.
func post(t *testing.T, method, path, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, "http://builtin.invalid"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Transport: Transport()}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

func TestBadRequests(t *testing.T) {
	user := `{"role":"user","content":"hi"}`
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		message                  string
	}{
		{"bad json", "POST", "/v1/chat/completions", `{"messages":`, 400, "could not parse the JSON body"},
		{"no messages", "POST", "/v1/chat/completions", `{"model":"builtin"}`, 400, "messages: must be a non-empty array"},
		{"empty messages", "POST", "/v1/chat/completions", `{"messages":[]}`, 400, "messages: must be a non-empty array"},
		{"no user message", "POST", "/v1/chat/completions", `{"messages":[{"role":"system","content":"x"}]}`, 400, "needs a user message"},
		{"bad role", "POST", "/v1/chat/completions", `{"messages":[{"role":"robot","content":"x"}]}`, 400, `role "robot"`},
		{"bad content", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":7}]}`, 400, "content must be a string"},
		{"orphan tool message", "POST", "/v1/chat/completions", `{"messages":[` + user + `,{"role":"tool","tool_call_id":"call_9","content":"x"}]}`, 400, "must be a response to a preceding message with 'tool_calls'"},
		{"unanswered tool call", "POST", "/v1/chat/completions", `{"messages":[` + user + `,{"role":"assistant","tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]}]}`, 400, "did not have response messages: call_1"},
		{"bad tool type", "POST", "/v1/chat/completions", `{"messages":[` + user + `],"tools":[{"type":"retrieval"}]}`, 400, `tools[0].type must be "function"`},
		{"bad tool name", "POST", "/v1/chat/completions", `{"messages":[` + user + `],"tools":[{"type":"function","function":{"name":"a b"}}]}`, 400, "must match"},
		{"non-object parameters", "POST", "/v1/chat/completions", `{"messages":[` + user + `],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"string"}}}]}`, 400, "must be an object schema"},
		{"unknown forced tool", "POST", "/v1/chat/completions", `{"messages":[` + user + `],"tool_choice":{"type":"function","function":{"name":"nope"}}}`, 400, `names function "nope"`},
		{"n > 1", "POST", "/v1/chat/completions", `{"messages":[` + user + `],"n":2}`, 400, "exactly one choice"},
		{"GET completions", "GET", "/v1/chat/completions", ``, 405, "use POST"},
		{"unknown path", "POST", "/v1/embeddings", `{}`, 404, "Unknown request URL"},
		{"unknown model", "GET", "/v1/models/gpt-4o", ``, 404, `"gpt-4o" does not exist`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := post(t, tc.method, tc.path, tc.body)
			if status != tc.status {
				t.Errorf("status %d, want %d; body %s", status, tc.status, body)
			}
			var e struct {
				Error struct {
					Message string `json:"message"`
					Type    string `json:"type"`
				} `json:"error"`
			}
			if err := json.Unmarshal(body, &e); err != nil {
				t.Fatalf("error body %s: %v", body, err)
			}
			if e.Error.Type != "invalid_request_error" || !strings.Contains(e.Error.Message, tc.message) {
				t.Errorf("error %+v, want type invalid_request_error and a message containing %q", e.Error, tc.message)
			}
		})
	}
}

func TestBadRequestThroughGoOpenAI(t *testing.T) {
	_, err := newClient(t).CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
		Model: ModelName,
		Messages: []openai.ChatCompletionMessage{
			{Role: "user", Content: "hi"},
			{Role: "tool", ToolCallID: "call_x", Content: "orphan"},
		},
	})
	var apiErr *openai.APIError
	if !errors.As(err, &apiErr) {
		t.Fatalf("err = %v, want an *openai.APIError", err)
	}
	if apiErr.HTTPStatusCode != 400 || apiErr.Type != "invalid_request_error" || !strings.Contains(apiErr.Message, "tool") {
		t.Errorf("APIError %+v, want 400 invalid_request_error about the tool message", apiErr)
	}
}

func TestModels(t *testing.T) {
	list, err := newClient(t).ListModels(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Models) != 1 || list.Models[0].ID != ModelName || list.Models[0].Object != "model" {
		t.Errorf("models %+v, want just %q", list.Models, ModelName)
	}
	m, err := newClient(t).GetModel(context.Background(), ModelName)
	if err != nil || m.ID != ModelName {
		t.Errorf("GetModel(%q) = %+v, %v", ModelName, m, err)
	}
}

func TestDeterministic(t *testing.T) {
	body := func(task string) string {
		b, err := json.Marshal(openai.ChatCompletionRequest{
			Model:    ModelName,
			Messages: []openai.ChatCompletionMessage{{Role: "user", Content: task}},
			Tools:    openaiTools(t, packratSchemas, abacusSchemas),
		})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	_, first := post(t, "POST", "/v1/chat/completions", body(readmeTask))
	for range 5 {
		if _, again := post(t, "POST", "/v1/chat/completions", body(readmeTask)); !bytes.Equal(first, again) {
			t.Fatalf("responses differ:\n%s\n%s", first, again)
		}
	}
	_, other := post(t, "POST", "/v1/chat/completions", body(readmeTask+"."))
	var a, b openai.ChatCompletionResponse
	if err := json.Unmarshal(first, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(other, &b); err != nil {
		t.Fatal(err)
	}
	if a.ID == b.ID || a.Choices[0].Message.ToolCalls[0].ID == b.Choices[0].Message.ToolCalls[0].ID {
		t.Errorf("different requests got the same ids: %s, %s", a.ID, b.ID)
	}
	if a.Created != 0 || a.Usage.PromptTokens == 0 || a.Usage.TotalTokens != a.Usage.PromptTokens+a.Usage.CompletionTokens {
		t.Errorf("created %d, usage %+v: want created 0 and consistent usage", a.Created, a.Usage)
	}
}

func TestToolCallIDsUniqueInConversation(t *testing.T) {
	tools := openaiTools(t, packratSchemas, abacusSchemas)
	c := newClient(t)
	req := openai.ChatCompletionRequest{Tools: tools, Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "calculate 2+2 and convert 5 km to miles, then remember that 2+2 is 4"}}}
	seen := map[string]bool{}
	for {
		resp, err := c.CreateChatCompletion(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		msg := resp.Choices[0].Message
		if len(msg.ToolCalls) == 0 {
			break
		}
		req.Messages = append(req.Messages, msg)
		for _, tc := range msg.ToolCalls {
			if seen[tc.ID] {
				t.Errorf("tool call id %s repeated", tc.ID)
			}
			seen[tc.ID] = true
			req.Messages = append(req.Messages, openai.ChatCompletionMessage{Role: "tool", ToolCallID: tc.ID, Content: "ok"})
		}
	}
	if len(seen) != 3 {
		t.Errorf("%d tool calls, want 3: %v", len(seen), seen)
	}
}

func TestStreaming(t *testing.T) {
	c := newClient(t)
	collect := func(task string) (content string, calls []openai.ToolCall, finish openai.FinishReason, usage *openai.Usage) {
		t.Helper()
		s, err := c.CreateChatCompletionStream(context.Background(), openai.ChatCompletionRequest{
			Messages:      []openai.ChatCompletionMessage{{Role: "user", Content: task}},
			Tools:         openaiTools(t, abacusSchemas),
			Stream:        true,
			StreamOptions: &openai.StreamOptions{IncludeUsage: true},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		for {
			chunk, err := s.Recv()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if chunk.Usage != nil {
				usage = chunk.Usage
			}
			for _, ch := range chunk.Choices {
				content += ch.Delta.Content
				calls = append(calls, ch.Delta.ToolCalls...)
				if ch.FinishReason != "" {
					finish = ch.FinishReason
				}
			}
		}
	}
	_, calls, finish, usage := collect("calculate 2+2 and convert 5 km to miles")
	if len(calls) != 2 || finish != openai.FinishReasonToolCalls || usage == nil {
		t.Fatalf("calls %+v, finish %q, usage %v: want 2 calls, tool_calls, usage", calls, finish, usage)
	}
	if *calls[1].Index != 1 || calls[1].Function.Name != "abacus__convert_units" {
		t.Errorf("second call %+v", calls[1])
	}
	content, calls, finish, _ := collect("hello")
	if len(calls) != 0 || finish != openai.FinishReasonStop || !strings.Contains(content, "builtin offline model") {
		t.Errorf("content %q, calls %v, finish %q: want a text answer", content, calls, finish)
	}
}

func TestConcurrentUse(t *testing.T) {
	c := newClient(t)
	tools := openaiTools(t, packratSchemas, abacusSchemas)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := c.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
				Messages: []openai.ChatCompletionMessage{{Role: "user", Content: fmt.Sprintf("what is %d*3?", i)}},
				Tools:    tools,
			})
			if err != nil {
				t.Error(err)
				return
			}
			if got, want := resp.Choices[0].Message.ToolCalls[0].Function.Arguments, fmt.Sprintf(`{"expression":"%d*3"}`, i); got != want {
				t.Errorf("arguments %s, want %s", got, want)
			}
		}()
	}
	wg.Wait()
}

func TestTransportCanceledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := newClient(t).CreateChatCompletion(ctx, openai.ChatCompletionRequest{
		Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}},
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

func TestContentParts(t *testing.T) {
	status, body := post(t, "POST", "/chat/completions", `{"messages":[{"role":"user","content":[{"type":"text","text":"what is 2+2?"}]}],
		"tools":[{"type":"function","function":{"name":"abacus__calculate","parameters":{"type":"object","properties":{"expression":{"type":"string"}},"required":["expression"]}}}]}`)
	if status != 200 || !strings.Contains(string(body), `"arguments":"{\"expression\":\"2+2\"}"`) {
		t.Errorf("status %d body %s: want a calculate call for 2+2", status, body)
	}
}
