package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sashabaranov/go-openai"
	"github.com/switchboard-run/switchboard/pool"
	"github.com/switchboard-run/switchboard/runtime"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// Each provider's answer to a tool schema it will not take, as observed:
// %[1]d is the tool's index in the request's tools, %[2]s its name. Where
// a provider gives only one of them, so does its body.
var schemaRefusals = []struct {
	provider string
	body     string
}{
	// OpenAI: the name in the message, the index in param.
	{"OpenAI", `{"error":{"message":"Invalid schema for function '%[2]s': In context=(), 'required' is required to be supplied and to be an array including every key in properties. Missing 'expression'.","type":"invalid_request_error","param":"tools[%[1]d].function.parameters","code":"invalid_function_parameters"}}`},
	// Azure OpenAI: the same, with param as "tools[N].parameters" on some
	// deployments.
	{"Azure OpenAI", `{"error":{"message":"Invalid schema for function '%[2]s': schema must have type 'object' and not have 'oneOf'/'anyOf'/'allOf'/'enum'/'not' at the top level.","type":"invalid_request_error","param":"tools[%[1]d].parameters","code":"invalid_function_parameters"}}`},
	// Groq: the name unquoted, and param starting with it.
	{"Groq", `{"error":{"message":"invalid JSON schema for tool %[2]s, tools[%[1]d].function.parameters: 'required' present but 'properties' is missing","type":"invalid_request_error","param":"tool %[2]s, tools[%[1]d].function.parameters"}}`},
	// DeepSeek: the name only, param null.
	{"DeepSeek", `{"error":{"message":"Invalid schema for function '%[2]s': schema must be a JSON Schema of 'type: \"object\"', got 'type: null'.","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}`},
	// vLLM: pydantic's path, the index only, in a body go-openai does
	// not decode.
	{"vLLM", `{"object":"error","message":"1 validation error for ChatCompletionRequest\ntools.%[1]d.function.parameters\n  Input should be a valid dictionary [type=dict_type, input_value='{type: object', input_type=str]","type":"BadRequestError","param":null,"code":400}`},
	// Gemini's OpenAI-compatible endpoint: an array body, every function a
	// declaration of tools[0].
	{"Gemini", `[{"error":{"code":400,"message":"* GenerateContentRequest.tools[0].function_declarations[%[1]d].parameters.properties[expression].items: missing field.\n","status":"INVALID_ARGUMENT"}}]`},
}

// strictEndpoint is a provider that refuses, with body, every request
// offering the tool refused, and otherwise answers "done". It records the
// tool names of every request.
type strictEndpoint struct {
	URL string

	mu    sync.Mutex
	tools [][]string
}

func newStrictEndpoint(t *testing.T, refused, body string) *strictEndpoint {
	e := &strictEndpoint{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req openai.ChatCompletionRequest
		data, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(data, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var names []string
		for _, tool := range req.Tools {
			names = append(names, tool.Function.Name)
		}
		e.mu.Lock()
		e.tools = append(e.tools, names)
		e.mu.Unlock()
		if i := slices.Index(names, refused); i >= 0 {
			body := body
			if strings.Contains(body, "%[") {
				body = fmt.Sprintf(body, i, refused)
			}
			fail(http.StatusBadRequest, body)(w, r)
			return
		}
		answer("done")(w, r)
	}))
	t.Cleanup(ts.Close)
	e.URL = ts.URL + "/v1"
	return e
}

func (e *strictEndpoint) Tools() [][]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.tools)
}

// mcpServer is a real go-sdk MCP server over loopback HTTP offering the
// named tools, each answering its own name.
func mcpServer(t *testing.T, name string, tools ...string) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: name, Version: "test"}, nil)
	for _, tool := range tools {
		s.AddTool(&mcp.Tool{Name: tool, InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: tool}}}, nil
			})
	}
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(ts.Close)
	return ts.URL
}

// agentFolder writes an agent folder (agent.json and tools/mcp.json) and
// loads it as switchboard does.
func agentFolder(t *testing.T, dir, mcpJSON string) *agentdef.Definition {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "tools"), 0o755); err != nil {
		t.Fatal(err)
	}
	agent := `{"name": "oracle", "description": "Coordinates its siblings.", "instructions": "You coordinate your siblings.", "model": {"name": "scripted"}, "max_steps": 2}`
	for file, data := range map[string]string{"agent.json": agent, "tools/mcp.json": mcpJSON} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	def, err := agentdef.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return def
}

// TestSchemaRefusalNamesTheTool: whichever way a provider says which tool
// it refused (index, name, or both), the turn's error names the tool and
// the line of tools/mcp.json that leaves it out; with that line written,
// the next turn does not offer the tool and succeeds.
func TestSchemaRefusalNamesTheTool(t *testing.T) {
	packrat := mcpServer(t, "packrat", "store_note")
	abacus := mcpServer(t, "abacus", "add", "calculate", "mul")
	for _, p := range schemaRefusals {
		t.Run(p.provider, func(t *testing.T) {
			e := newStrictEndpoint(t, "abacus__calculate", p.body)
			dir := filepath.Join(t.TempDir(), "oracle")
			servers := fmt.Sprintf(`"packrat": {"url": %q}, "abacus": {"url": %q`, packrat, abacus)
			def := agentFolder(t, dir, `{"mcpServers": {`+servers+`}}}`)
			a := newAgent(t, def, &runtime.Options{BaseURL: e.URL})
			noWait(a)
			_, err := a.Run(t.Context(), "add 2 and 3", chain)
			if !errors.Is(err, runtime.ErrModel) {
				t.Fatalf("err = %v, want ErrModel", err)
			}
			path := filepath.Join(dir, "tools", "mcp.json")
			for _, want := range []string{
				`the endpoint refused tool "abacus__calculate"'s schema (400): "`,
				`; leave it out with "disabledTools": ["calculate"] under server "abacus" in ` + path,
			} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if strings.Contains(err.Error(), "store_note") {
				t.Errorf("error %q blames a tool the endpoint did not refuse", err)
			}

			// The fix, as the error words it.
			def = agentFolder(t, dir, `{"mcpServers": {`+servers+`, "disabledTools": ["calculate"]}}}`)
			a = newAgent(t, def, &runtime.Options{BaseURL: e.URL})
			res, err := a.Run(t.Context(), "add 2 and 3", chain)
			if err != nil {
				t.Fatalf("the turn after disabling the tool: %v", err)
			}
			if res.Answer != "done" || res.Status != runtime.StatusAnswered || len(res.Unavailable) != 0 {
				t.Errorf("result %+v, want answered with nothing unavailable", res)
			}
			tools := e.Tools()
			want := []string{"packrat__store_note", "abacus__add", "abacus__mul"}
			if got := tools[len(tools)-1]; !slices.Equal(got, want) {
				t.Errorf("the last request offered %q, want %q", got, want)
			}
		})
	}
}

// TestSchemaRefusalFixes: the fix fits where the refused tool came from: a
// server with allowedTools, one with disabledTools already, the agent's
// own native toolset; a 400 that names no offered tool keeps its old
// wording.
func TestSchemaRefusalFixes(t *testing.T) {
	abacus := mcpServer(t, "abacus", "add", "calculate", "mul")
	native := mcpServer(t, "oracle", "think")
	openAI := schemaRefusals[0].body
	for _, tc := range []struct {
		name, server, refused, body string
		want                        string
	}{
		{"allowedTools", `"allowedTools": ["add", "calculate"]`, "abacus__calculate", openAI,
			`; leave it out with "calculate" taken out of "allowedTools" under server "abacus" in `},
		{"disabledTools already", `"disabledTools": ["mul"]`, "abacus__calculate", openAI,
			`; leave it out with "disabledTools": ["mul", "calculate"] under server "abacus" in `},
		{"a native tool", `"disabledTools": ["mul"]`, "oracle__think", openAI,
			`the endpoint refused tool "oracle__think"'s schema (400): "Invalid schema for function 'oracle__think': `},
		{"two tools of one server (vLLM)", ``, "abacus__calculate",
			`{"object":"error","message":"2 validation errors for ChatCompletionRequest\ntools.2.function.parameters\n  Input should be a valid dictionary\ntools.3.function.parameters\n  Input should be a valid dictionary","type":"BadRequestError","param":null,"code":400}`,
			`the endpoint refused the schemas of tools "abacus__calculate", "abacus__mul" (400): "2 validation errors for ChatCompletionRequest\ntools.2.function.parameters\n  Input should be a valid dictionary\ntools.3.function.parameters\n  Input should be a valid dictionary"; leave them out with "disabledTools": ["calculate", "mul"] under server "abacus" in `},
		// A 400 about something else the request carries (OpenAI's answer
		// to a temperature out of range) blames no tool.
		{"not a tool's fault", ``, "abacus__calculate",
			`{"error":{"message":"Invalid 'temperature': decimal above maximum value. Expected a value <= 2, but got 3 instead.","type":"invalid_request_error","param":"temperature","code":"decimal_above_max_value"}}`,
			`: the endpoint refused the request (400): "Invalid 'temperature': decimal above maximum value.`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newStrictEndpoint(t, tc.refused, tc.body)
			dir := filepath.Join(t.TempDir(), "oracle")
			server := fmt.Sprintf(`"url": %q`, abacus)
			if tc.server != "" {
				server += ", " + tc.server
			}
			def := agentFolder(t, dir, `{"servers": {"abacus": {`+server+`}}}`)
			a := newAgent(t, def, &runtime.Options{BaseURL: e.URL, Servers: []*pool.Server{{Name: "oracle", URL: native}}})
			noWait(a)
			_, err := a.Run(t.Context(), "add 2 and 3", chain)
			if !errors.Is(err, runtime.ErrModel) {
				t.Fatalf("err = %v, want ErrModel", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			if tc.refused == "oracle__think" && !strings.Contains(err.Error(), `"oracle__think" is the agent's own (a native toolset that agent.json's "tools" names)`) {
				t.Errorf("error %q does not say the tool is the agent's own", err)
			}
		})
	}
}

// TestDisabledToolIsNotCallable: a model that calls a tool its agent's
// tools/mcp.json leaves out, by its model name or by MCP's spelling, gets
// the unknown-tool message naming the offered tools, the server never runs
// it, and the turn goes on.
func TestDisabledToolIsNotCallable(t *testing.T) {
	var mu sync.Mutex
	var ran []string
	s := mcp.NewServer(&mcp.Implementation{Name: "abacus", Version: "test"}, nil)
	for _, tool := range []string{"add", "calculate"} {
		s.AddTool(&mcp.Tool{Name: tool, InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				mu.Lock()
				ran = append(ran, tool)
				mu.Unlock()
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: tool}}}, nil
			})
	}
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(ts.Close)

	e := newEndpoint(t,
		reply(openai.ChatCompletionMessage{ToolCalls: []openai.ToolCall{
			toolCall("call_1", "abacus__calculate", `{}`),
			toolCall("call_2", "abacus.calculate", `{}`),
		}}),
		answer("I could not calculate."),
	)
	def := agentFolder(t, filepath.Join(t.TempDir(), "oracle"), fmt.Sprintf(`{"mcpServers": {"abacus": {"url": %q, "disabledTools": ["calculate"]}}}`, ts.URL))
	a := newAgent(t, def, &runtime.Options{BaseURL: e.URL})
	res, err := a.Run(t.Context(), "calculate 2+3", chain)
	if err != nil {
		t.Fatal(err)
	}
	if res.Answer != "I could not calculate." || len(res.Delegations) != 0 {
		t.Errorf("result %+v", res)
	}
	bodies := e.Bodies()
	if strings.Contains(bodies[0], "abacus__calculate") {
		t.Errorf("the first request offered the disabled tool: %s", bodies[0])
	}
	for _, name := range []string{"abacus__calculate", "abacus.calculate"} {
		want := fmt.Sprintf(`there is no tool named \"%s\". The closest offered tools are abacus__add.`, name)
		if !strings.Contains(bodies[1], want) {
			t.Errorf("the tool messages do not say %s: %s", want, bodies[1])
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ran) != 0 {
		t.Errorf("the server ran %q", ran)
	}
}
