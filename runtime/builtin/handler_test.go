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
		{text: "packrat.store_note: Stored note 1.\npackrat.search_notes: 1 note(s) matching \"launch\", newest first: Note 1 (stored 2026-01-02T03:04:05Z) the launch moved to Friday"},
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

// TestGrammar runs each rule of doc.go's grammar through whole turns: the
// calls it makes and the answer, which names the tool behind every figure.
func TestGrammar(t *testing.T) {
	calc := func(_, args string) string {
		var in struct{ Expression string }
		json.Unmarshal([]byte(args), &in)
		return map[string]string{
			"2 + 3": "2 + 3 = 5", "17/100*2340": "17/100*2340 = 397.8", "2+2": "2+2 = 4",
			"12 * 7": "12 * 7 = 84", "84 * 2": "84 * 2 = 168", "sqrt 16": "sqrt 16 = 4",
		}[in.Expression]
	}
	for _, tc := range []struct {
		task  string
		tools []string
		run   toolFunc
		want  []round
	}{
		{"add 2 and 3", []string{abacusSchemas}, calc, []round{
			{calls: []call{{"abacus__calculate", `{"expression":"2 + 3"}`}}},
			{text: "abacus.calculate: 2 + 3 = 5"}}},
		{"what is 17% of 2340?", []string{abacusSchemas}, calc, []round{
			{calls: []call{{"abacus__calculate", `{"expression":"17/100*2340"}`}}},
			{text: "abacus.calculate: 17/100*2340 = 397.8"}}},
		{"what is 12 times 7, then multiply that by 2", []string{abacusSchemas}, calc, []round{
			{calls: []call{{"abacus__calculate", `{"expression":"12 * 7"}`}}},
			{calls: []call{{"abacus__calculate", `{"expression":"84 * 2"}`}}},
			{text: "abacus.calculate: 12 * 7 = 84\nabacus.calculate: 84 * 2 = 168"}}},
		// The result of a calculation is what is stored, not the words.
		{"what is 2+2, then remember the result", []string{packratSchemas, abacusSchemas}, func(name, args string) string {
			if name == "packrat__store_note" {
				return "Stored note 7."
			}
			return calc(name, args)
		}, []round{
			{calls: []call{{"abacus__calculate", `{"expression":"2+2"}`}}},
			{calls: []call{{"packrat__store_note", `{"text":"4"}`}}},
			{text: "abacus.calculate: 2+2 = 4\npackrat.store_note: Stored note 7."}}},
		// A tool's name first, with name=value pairs; "NAME value" for one
		// of several text parameters.
		{`abacus__date_math operation=weekday date=2026-01-02`, []string{abacusSchemas}, func(string, string) string { return "2026-01-02 is a Friday." }, []round{
			{calls: []call{{"abacus__date_math", `{"date":"2026-01-02","operation":"weekday"}`}}},
			{text: "abacus.date_math: 2026-01-02 is a Friday."}}},
		{"convert 5 km to mi", []string{abacusSchemas}, func(string, string) string { return "5 km = 3.10686 mi" }, []round{
			{calls: []call{{"abacus__convert_units", `{"from":"km","to":"mi","value":5}`}}},
			{text: "abacus.convert_units: 5 km = 3.10686 mi"}}},
		{`packrat__store_note {"text":"verbatim","tags":["a"]}`, []string{packratSchemas}, func(string, string) string { return "Stored note 1." }, []round{
			{calls: []call{{"packrat__store_note", `{"tags":["a"],"text":"verbatim"}`}}},
			{text: "packrat.store_note: Stored note 1."}}},
	} {
		t.Run(tc.task, func(t *testing.T) {
			got := runTurn(t, newClient(t), tc.task, openaiTools(t, tc.tools...), tc.run)
			if !reflect.DeepEqual(tc.want, got) {
				t.Errorf("turn:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestRefusals: what the grammar cannot read with certainty is not done,
// and the answer says what and why, as the chat API's refusal.
func TestRefusals(t *testing.T) {
	for _, tc := range []struct {
		task  string
		tools []string
		want  string
	}{
		{"calculate 2 + ", []string{abacusSchemas}, `I can't tell what to do with "calculate 2 +": cannot read "2 +" as arithmetic: it is incomplete: it ends with "+".`},
		{"what is 2 *", []string{abacusSchemas}, `I can't tell what to do with "what is 2 *": cannot read "2 *" as arithmetic: it is incomplete: it ends with "*".`},
		{"calculate the tax", []string{abacusSchemas}, `I can't tell what to do with "calculate the tax": cannot read "the tax" as arithmetic: "the" is not a number, a constant or a function call.`},
		{"What's the capital of France?", []string{abacusSchemas}, `I can't tell what to do with "What's the capital of France": it starts with "what's", which names no tool, and it is not arithmetic; start the step with a tool's name or a verb from its description.`},
		{"fly me to the moon", []string{packratSchemas}, `I can't tell what to do with "fly me to the moon": no offered tool has "fly" in its name or offers it as a verb in its description.`},
		{"remember the result", []string{packratSchemas}, `I can't tell what to do with "remember the result": "the result" refers to an earlier result, and there is none.`},
		{"get_note the budget one", []string{packratSchemas}, `I can't tell what to do with "get_note the budget one": packrat.get_note needs id (The note's numeric id, as returned by store_note, search_notes or list_notes), and there is no number left in "the budget one".`},
		{"remember that the launch moved", nil, `I did not do "remember that the launch moved": I have no tools in this conversation, and the builtin model (a deterministic planner, not a language model) works only through tools.`},
		// Two servers with a search tool: the grammar does not pick one.
		{"tell me what you know about the launch", []string{packratSchemas, memorySchemas}, `I can't tell what to do with "tell me what you know about the launch": ambiguous: 2 tools with "search" in their names (packrat.search_notes, memory.search_nodes); name one of them at the start of the step.`},
	} {
		t.Run(tc.task, func(t *testing.T) {
			resp, err := newClient(t).CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
				Messages: []openai.ChatCompletionMessage{{Role: "user", Content: tc.task}},
				Tools:    openaiTools(t, tc.tools...),
			})
			if err != nil {
				t.Fatal(err)
			}
			m := resp.Choices[0].Message
			if len(m.ToolCalls) != 0 || m.Content != tc.want || m.Refusal != tc.want {
				t.Errorf("got calls %v, content %q, refusal %q\nwant the refusal %q", m.ToolCalls, m.Content, m.Refusal, tc.want)
			}
		})
	}
}

// TestNothingDoneWhenAPartIsUnreadable: a task with a part the grammar
// cannot read is refused whole, naming that part, and the parts it could
// read are not done either: nothing is stored.
func TestNothingDoneWhenAPartIsUnreadable(t *testing.T) {
	a := &archive{}
	got := runTurn(t, newClient(t), "Remember that the demo is at noon. Fly me to the moon.", openaiTools(t, packratSchemas), a.run)
	want := []round{{text: "I can't tell what to do with \"Fly me to the moon\": no offered tool has \"fly\" in its name or offers it as a verb in its description.\n" +
		"I did none of the task, so that no part of it is done without the rest: \"Remember that the demo is at noon\" is not done either."}}
	if !reflect.DeepEqual(want, got) {
		t.Errorf("turn:\n got %+v\nwant %+v", got, want)
	}
	if len(a.notes) != 0 {
		t.Errorf("notes stored: %q, want none", a.notes)
	}
}

// TestToolFailureIsReported: a tool error is reported as a failure of that
// tool, and a later step that needs its result is not done.
func TestToolFailureIsReported(t *testing.T) {
	failing := func(name, args string) string {
		return `Error: the call to agent "abacus", tool "calculate" failed: JSON-RPC error -32603: out of memory.`
	}
	got := runTurn(t, newClient(t), "what is 2+2, then remember the result", openaiTools(t, packratSchemas, abacusSchemas), failing)
	want := "abacus.calculate failed: the call to agent \"abacus\", tool \"calculate\" failed: JSON-RPC error -32603: out of memory.\n" +
		"I did not do \"remember the result\": it may depend on the step before, which failed."
	if len(got) != 2 || got[1].text != want {
		t.Errorf("turn %+v\nwant the answer %q", got, want)
	}
}

// TestUnavailableNamed: a refusal names the siblings the runtime listed as
// unavailable in the system prompt.
func TestUnavailableNamed(t *testing.T) {
	resp, err := newClient(t).CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{
		Messages: []openai.ChatCompletionMessage{
			{Role: "system", Content: "You are oracle.\n\nThese agents or tools are unavailable for this task:\n- agent \"abacus\": connection refused"},
			{Role: "user", Content: "what is 2+2"},
		},
		Tools: openaiTools(t, packratSchemas),
	})
	if err != nil {
		t.Fatal(err)
	}
	m := resp.Choices[0].Message
	want := "I can't tell what to do with \"what is 2+2\": no offered tool takes an arithmetic expression.\nUnavailable in this conversation: agent \"abacus\": connection refused."
	if m.Content != want || m.Refusal != want {
		t.Errorf("content %q refusal %q, want %q", m.Content, m.Refusal, want)
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
	if m := ask("none", "what is 2+2?"); len(m.ToolCalls) != 0 || m.Refusal == "" {
		t.Errorf(`tool_choice "none": got %+v, want a refusal`, m)
	}
	forced := openai.ToolChoice{Type: openai.ToolTypeFunction, Function: openai.ToolFunction{Name: "packrat__search_notes"}}
	if m := ask(forced, "search launch"); len(m.ToolCalls) != 1 || m.ToolCalls[0].Function.Name != "packrat__search_notes" {
		t.Errorf("tool_choice function: got %+v, want a call to packrat__search_notes", m)
	}
	if m := ask(forced, "what is 2+2?"); len(m.ToolCalls) != 0 || m.Refusal == "" {
		t.Errorf("tool_choice function that does not fit: got %+v, want a refusal", m)
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
	req := openai.ChatCompletionRequest{Tools: tools, Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "calculate 2+2, then convert 5 km to miles, then remember that 2+2 is 4"}}}
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
	_, calls, finish, usage := collect("convert 5 km to miles")
	if len(calls) != 1 || finish != openai.FinishReasonToolCalls || usage == nil {
		t.Fatalf("calls %+v, finish %q, usage %v: want 1 call, tool_calls, usage", calls, finish, usage)
	}
	if *calls[0].Index != 0 || calls[0].Function.Name != "abacus__convert_units" {
		t.Errorf("call %+v", calls[0])
	}
	content, calls, finish, _ := collect("hello")
	if len(calls) != 0 || finish != openai.FinishReasonStop || !strings.Contains(content, `I can't tell what to do with "hello"`) {
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
