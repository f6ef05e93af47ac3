package runtime

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sashabaranov/go-openai"
	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/pool"
	"github.com/switchboard-run/switchboard/pool/mcpconfig"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// decoded is the error go-openai makes of an error body (its
// handleErrorResp): an *APIError when the body is {"error":{...}}, else a
// *RequestError holding the body.
func decoded(body string) error {
	var er openai.ErrorResponse
	if json.Unmarshal([]byte(body), &er) == nil && er.Error != nil {
		er.Error.HTTPStatusCode = 400
		return er.Error
	}
	return &openai.RequestError{HTTPStatusCode: 400, Body: []byte(body)}
}

// TestRefusedTools: which offered tool an endpoint's 400 blames, read from
// each provider's wire shape.
func TestRefusedTools(t *testing.T) {
	offered := []string{"packrat__store_note", "abacus__calc", "abacus__calculate", "abacus__mul"}
	for _, tc := range []struct {
		name, body string
		want       []string
	}{
		{"OpenAI: param's index",
			`{"error":{"message":"Invalid schema for function 'abacus__calculate': In context=(), object schema missing properties.","type":"invalid_request_error","param":"tools[2].function.parameters","code":"invalid_function_parameters"}}`,
			[]string{"abacus__calculate"}},
		{"the index wins over a name quoted for another reason",
			`{"error":{"message":"Invalid schema for function 'abacus__mul': see 'packrat__store_note'","type":"invalid_request_error","param":"tools[3].function.parameters"}}`,
			[]string{"abacus__mul"}},
		{"an index past the tools falls back to the name",
			`{"error":{"message":"Invalid schema for function 'abacus__mul'.","type":"invalid_request_error","param":"tools[9].function.parameters"}}`,
			[]string{"abacus__mul"}},
		{"Groq: index in param, name unquoted",
			`{"error":{"message":"invalid JSON schema for tool abacus__calc, tools[1].function.parameters: 'required' present but 'properties' is missing","type":"invalid_request_error","param":"tool abacus__calc, tools[1].function.parameters"}}`,
			[]string{"abacus__calc"}},
		{"DeepSeek: a whole name, not a prefix of a longer one",
			`{"error":{"message":"Invalid schema for function 'abacus__calculate': schema must be a JSON Schema of 'type: \"object\"', got 'type: null'.","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}`,
			[]string{"abacus__calculate"}},
		{"vLLM: pydantic paths, two tools",
			`{"object":"error","message":"2 validation errors for ChatCompletionRequest\ntools.0.function.parameters\n  Input should be a valid dictionary\ntools.3.function.parameters\n  Input should be a valid dictionary","type":"BadRequestError","param":null,"code":400}`,
			[]string{"packrat__store_note", "abacus__mul"}},
		{"vLLM, nested error object",
			`{"error":{"message":"1 validation error for ChatCompletionRequest\ntools.1.function.parameters\n  Input should be a valid dictionary","type":"BadRequestError","param":null,"code":400}}`,
			[]string{"abacus__calc"}},
		{"Gemini: the declaration's index, not tools[0]'s",
			`[{"error":{"code":400,"message":"* GenerateContentRequest.tools[0].function_declarations[3].parameters.properties[x].items: missing field.\n","status":"INVALID_ARGUMENT"}}]`,
			[]string{"abacus__mul"}},
		{"Gemini: a limit on all declarations blames none",
			`[{"error":{"code":400,"message":"The GenerateContentRequest proto is invalid:\n * tools[0].function_declarations: [FIELD_INVALID] At most 512 function declarations can be specified.","status":"INVALID_ARGUMENT"}}]`,
			nil},
		{"OpenAI context length blames none",
			`{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`,
			nil},
		{"a message's tool_calls are no tools",
			`{"error":{"message":"Invalid parameter: messages.2.tool_calls.0 must be followed by tool messages","type":"invalid_request_error","param":"messages.[2].role"}}`,
			nil},
		{"Ollama's plain error",
			`{"error":"json: cannot unmarshal string into Go struct field .tools.function.parameters of type api.ToolFunctionParameters"}`,
			nil},
		{"not JSON at all",
			`<html>400 Bad Request: abacus__mul</html>`,
			[]string{"abacus__mul"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := refusedTools(providerText(decoded(tc.body)), offered)
			if !slices.Equal(got, tc.want) {
				t.Errorf("refusedTools = %q, want %q", got, tc.want)
			}
		})
	}
}

// FuzzRefusedTools: whatever the text, the blamed tools are offered ones,
// each once, in offer order.
func FuzzRefusedTools(f *testing.F) {
	for _, s := range []string{"tools[1].function", "tools.0.x tools.2.y", "function_declarations[0]", "'a__b'", "a__bc", "tools[99999999999999999999]"} {
		f.Add(s)
	}
	offered := []string{"a__b", "a__bc", "c__d"}
	f.Fuzz(func(t *testing.T, text string) {
		got := refusedTools(text, offered)
		last := -1
		for _, n := range got {
			i := slices.Index(offered, n)
			if i <= last {
				t.Fatalf("refusedTools(%q) = %q: not offered names in offer order", text, got)
			}
			last = i
		}
	})
}

// TestToolOrigin: a model tool name is read back, from the turn's toolbox,
// to its server and MCP tool, a shortened one too; a native server's tool
// has no mcp.json entry; a name the toolbox does not offer, no origin.
func TestToolOrigin(t *testing.T) {
	long := strings.Repeat("x", 80)
	abacus := &mcpconfig.Server{Name: "abacus"}
	a := &Agent{
		def:  &agentdef.Definition{MCP: &mcpconfig.Config{Servers: []*mcpconfig.Server{{Name: "aba"}, abacus}}},
		opts: Options{Servers: []*pool.Server{{Name: "oracle"}}},
	}
	object := map[string]any{"type": "object"}
	tool := func(name string) *mcp.Tool { return &mcp.Tool{Name: name, InputSchema: object} }
	tb := delegation.NewToolbox([]delegation.ServerTools{
		{Server: &pool.Server{Name: "oracle"}, Tools: []*mcp.Tool{tool("own")}},
		{Server: &pool.Server{Name: "aba"}, Tools: []*mcp.Tool{tool("cus")}},
		{Server: &pool.Server{Name: "abacus"}, Tools: []*mcp.Tool{tool("calculate"), tool(long)}},
	})
	shortened := delegation.ToolName("abacus", long)
	if _, ok := tb.Lookup(shortened); !ok {
		t.Fatalf("the toolbox offers no %q", shortened)
	}
	for _, tc := range []struct {
		name   string
		want   toolOrigin
		wantOK bool
	}{
		{"abacus__calculate", toolOrigin{server: "abacus", tool: "calculate", mcp: abacus}, true},
		{"aba__cus", toolOrigin{server: "aba", tool: "cus", mcp: a.def.MCP.Servers[0]}, true},
		{shortened, toolOrigin{server: "abacus", tool: long, mcp: abacus}, true},
		{"oracle__own", toolOrigin{server: "oracle", tool: "own"}, true},
		{"packrat__store_note", toolOrigin{}, false},
	} {
		got, ok := a.toolOrigin(tb, tc.name)
		if ok != tc.wantOK || got != tc.want {
			t.Errorf("toolOrigin(%q) = %+v, %v; want %+v, %v", tc.name, got, ok, tc.want, tc.wantOK)
		}
	}
	if _, ok := a.toolOrigin(nil, "abacus__calculate"); ok {
		t.Error("an origin without a toolbox")
	}
}
