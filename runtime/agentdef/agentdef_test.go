package agentdef_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/pool/mcpconfig"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// writeAgent creates root/name/agent.json and, unless mcpJSON is empty,
// root/name/tools/mcp.json, and returns the folder.
func writeAgent(t *testing.T, root, name, agentJSON, mcpJSON string) string {
	t.Helper()
	dir := filepath.Join(root, name)
	if err := os.MkdirAll(filepath.Join(dir, "tools"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "agent.json"), []byte(agentJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	if mcpJSON != "" {
		if err := os.WriteFile(filepath.Join(dir, "tools", "mcp.json"), []byte(mcpJSON), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLoad(t *testing.T) {
	dir := writeAgent(t, t.TempDir(), "packrat", `{
  "name": "packrat",
  "description": "Keeps notes and finds them again.",
  "instructions": "You are packrat.",
  "model": {"base_url": "http://localhost:11434/v1", "name": "llama3.1", "api_key_env": "OLLAMA_KEY", "max_retries": 5},
  "tools": ["packrat", "clock"],
  "max_steps": 25,
  "max_depth": 2,
  "allow_stdio": true,
  "elicit": true
}`, `{"mcpServers": {
  "scout": {"url": "http://localhost:8080/agents/scout/mcp"},
  "git": {"command": "uvx", "args": ["mcp-server-git"]}
}}`)
	got, err := agentdef.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	five := 5
	want := &agentdef.Definition{
		Dir:          dir,
		Name:         "packrat",
		Description:  "Keeps notes and finds them again.",
		Instructions: "You are packrat.",
		Model:        agentdef.Model{BaseURL: "http://localhost:11434/v1", Name: "llama3.1", APIKeyEnv: "OLLAMA_KEY", MaxRetries: &five},
		Tools:        []string{"packrat", "clock"},
		MaxSteps:     25,
		MaxDepth:     2,
		AllowStdio:   true,
		Elicit:       true,
		// The defaults; the test file sets neither.
		MaxCallsPerStep: agentdef.DefaultMaxCallsPerStep,
		MaxCallsPerTurn: agentdef.DefaultMaxCallsPerTurn,
		MCP: &mcpconfig.Config{
			Path: filepath.Join(dir, "tools", "mcp.json"),
			Servers: []*mcpconfig.Server{
				{Name: "scout", Type: "http", URL: "http://localhost:8080/agents/scout/mcp"},
				{Name: "git", Type: "stdio", Command: "uvx", Args: []string{"mcp-server-git"}},
			},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Load:\n got %+v\nwant %+v", got, want)
	}
	for _, s := range got.MCP.Servers {
		if err := got.CheckServer(s); err != nil {
			t.Errorf("CheckServer(%s) = %v with allow_stdio", s.Name, err)
		}
	}
}

// TestLoadContextAndPrices reads the context budget and the price table.
func TestLoadContextAndPrices(t *testing.T) {
	dir := writeAgent(t, t.TempDir(), "packrat", minimal(`,
  "model": {"base_url": "https://api.openai.com/v1", "name": "gpt-4o-mini", "prices": {
    "gpt-4o-mini": {"input": 0.15, "cached_input": 0.075, "output": 0.60},
    "llama3.1": {"input": 0, "output": 0}}},
  "context": {"max_tool_result_bytes": 8192, "max_tool_results_bytes": 32768, "max_tools": 40}`), "")
	got, err := agentdef.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	cached := 0.075
	wantPrices := map[string]agentdef.Price{
		"gpt-4o-mini": {Input: 0.15, CachedInput: &cached, Output: 0.60},
		"llama3.1":    {},
	}
	if !reflect.DeepEqual(got.Model.Prices, wantPrices) {
		t.Errorf("prices %+v, want %+v", got.Model.Prices, wantPrices)
	}
	if want := (agentdef.Context{MaxToolResultBytes: 8192, MaxToolResultsBytes: 32768, MaxTools: 40}); got.Context != want {
		t.Errorf("context %+v, want %+v", got.Context, want)
	}
}

func TestLoadDefaults(t *testing.T) {
	dir := writeAgent(t, t.TempDir(), "scout", `{"name": "scout", "description": "Looks around.", "model": {}}`, "")
	got, err := agentdef.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := &agentdef.Definition{
		Dir:             dir,
		Name:            "scout",
		Description:     "Looks around.",
		Model:           agentdef.Model{Name: "builtin"},
		MaxSteps:        10,
		MaxDepth:        delegation.DefaultMaxDepth,
		MaxCallsPerStep: agentdef.DefaultMaxCallsPerStep,
		MaxCallsPerTurn: agentdef.DefaultMaxCallsPerTurn,
		MCP:             &mcpconfig.Config{Path: filepath.Join(dir, "tools", "mcp.json")},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Load:\n got %+v\nwant %+v", got, want)
	}
	if want.MaxDepth != 4 {
		t.Errorf("delegation.DefaultMaxDepth = %d; agent.json documents 4", want.MaxDepth)
	}
}

// minimal is a valid agent.json for "packrat" with extra fields appended.
func minimal(extra string) string {
	return `{"name": "packrat", "description": "Keeps notes."` + extra + `}`
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name  string
		agent string
		mcp   string
		want  string // after "<dir>/agent.json" or, when mcp is set, "<dir>/tools/mcp.json"
	}{
		{"invalid JSON", "{\n  \"name\": \"packrat\",\n}",
			"", ":3:1: invalid JSON: invalid character '}' looking for beginning of object key string"},
		{"top level not an object", `"packrat"`,
			"", `: want a JSON object at the top level, got string`},
		{"unknown field", minimal(`, "$schema": "https://example.com/agent.schema.json"`),
			"", `: field "$schema": unknown field; known fields are name, description, instructions, model, tools, max_steps, max_depth, max_calls_per_step, max_calls_per_turn, call_timeout, allow_stdio, elicit, context, url, token_env`},
		{"camelCase field", minimal(`, "maxSteps": 5`),
			"", `: field "maxSteps": unknown field; known fields are name, description, instructions, model, tools, max_steps, max_depth, max_calls_per_step, max_calls_per_turn, call_timeout, allow_stdio, elicit, context, url, token_env; did you mean "max_steps"?`},
		{"duplicate field", minimal(`, "max_steps": 5, "max_steps": 6`),
			"", `: field "max_steps": duplicate field`},
		{"name missing", `{"description": "Keeps notes."}`,
			"", `: field "name": required; it must be the folder name "packrat"`},
		{"name not a string", `{"name": ["packrat"], "description": "Keeps notes."}`,
			"", `: field "name": want a string, got array`},
		{"name invalid", `{"name": "PackRat", "description": "Keeps notes."}`,
			"", `: field "name": invalid agent name "PackRat"; names must match ^[a-z][a-z0-9-]{0,31}$`},
		{"name not the folder", `{"name": "notes", "description": "Keeps notes."}`,
			"", `: field "name": "notes" does not match the folder name "packrat"`},
		{"description missing", `{"name": "packrat"}`,
			"", `: field "description": required; other agents read it to decide when to delegate`},
		{"description blank", `{"name": "packrat", "description": "  "}`,
			"", `: field "description": must not be empty; other agents read it to decide when to delegate`},
		{"instructions not a string", minimal(`, "instructions": null`),
			"", `: field "instructions": want a string, got null`},
		{"model not an object", minimal(`, "model": "gpt-4o-mini"`),
			"", `: field "model": want an object, got string`},
		{"model unknown field", minimal(`, "model": {"baseURL": "http://localhost:11434/v1"}`),
			"", `: field "model.baseURL": unknown field in "model"; known fields are base_url, name, api_key_env, max_retries, prices; did you mean "base_url"?`},
		{"model duplicate field", minimal(`, "model": {"name": "a", "name": "b"}`),
			"", `: field "model.name": duplicate field`},
		{"model base_url without scheme", minimal(`, "model": {"base_url": "localhost:11434/v1"}`),
			"", `: field "model.base_url": URL "localhost:11434/v1" must start with http:// or https://`},
		{"model api_key_env invalid", minimal(`, "model": {"api_key_env": "sk-abc123"}`),
			"", `: field "model.api_key_env": invalid environment variable name "sk-abc123"; want letters, digits and _, not starting with a digit`},
		{"model max_retries too many", minimal(`, "model": {"max_retries": 11}`),
			"", `: field "model.max_retries": want an integer from 0 to 10, got 11`},
		{"model max_retries negative", minimal(`, "model": {"max_retries": -1}`),
			"", `: field "model.max_retries": want an integer from 0 to 10, got -1`},
		{"model max_retries not a number", minimal(`, "model": {"max_retries": "2"}`),
			"", `: field "model.max_retries": want an integer from 0 to 10, got string`},
		{"tools not an array", minimal(`, "tools": "packrat"`),
			"", `: field "tools": want an array of strings, got string`},
		{"tools element not a string", minimal(`, "tools": ["packrat", 1]`),
			"", `: field "tools[1]": want a string, got number`},
		{"tools empty name", minimal(`, "tools": [""]`),
			"", `: field "tools[0]": empty toolset name`},
		{"tools duplicate", minimal(`, "tools": ["packrat", "packrat"]`),
			"", `: field "tools[1]": duplicate toolset "packrat"`},
		{"max_steps zero", minimal(`, "max_steps": 0`),
			"", `: field "max_steps": want an integer from 1 to 100, got 0`},
		{"max_steps too large", minimal(`, "max_steps": 101`),
			"", `: field "max_steps": want an integer from 1 to 100, got 101`},
		{"max_steps fraction", minimal(`, "max_steps": 10.5`),
			"", `: field "max_steps": want an integer from 1 to 100, got 10.5`},
		{"max_steps string", minimal(`, "max_steps": "10"`),
			"", `: field "max_steps": want an integer from 1 to 100, got string`},
		{"max_depth too large", minimal(`, "max_depth": 17`),
			"", `: field "max_depth": want an integer from 1 to 16, got 17`},
		{"allow_stdio not a boolean", minimal(`, "allow_stdio": "yes"`),
			"", `: field "allow_stdio": want true or false, got string`},
		{"elicit not a boolean", minimal(`, "elicit": 1`),
			"", `: field "elicit": want true or false, got number`},
		{"elicit misspelt", minimal(`, "Elicit": true`),
			"", `: field "Elicit": unknown field; known fields are name, description, instructions, model, tools, max_steps, max_depth, max_calls_per_step, max_calls_per_turn, call_timeout, allow_stdio, elicit, context, url, token_env; did you mean "elicit"?`},
		{"call_timeout a duration string", minimal(`, "call_timeout": "30s"`),
			"", `: field "call_timeout": want a number of seconds, got string`},
		{"call_timeout zero", minimal(`, "call_timeout": 0`),
			"", `: field "call_timeout": want seconds more than 0 and at most 86400, got 0`},
		{"call_timeout negative", minimal(`, "call_timeout": -5`),
			"", `: field "call_timeout": want seconds more than 0 and at most 86400, got -5`},
		{"call_timeout past a day", minimal(`, "call_timeout": 86401`),
			"", `: field "call_timeout": want seconds more than 0 and at most 86400, got 86401`},
		{"call_timeout below a nanosecond", minimal(`, "call_timeout": 1e-12`),
			"", `: field "call_timeout": want seconds more than 0 and at most 86400, got 1e-12`},
		{"context not an object", minimal(`, "context": 65536`),
			"", `: field "context": want an object, got number`},
		{"context unknown field", minimal(`, "context": {"maxTools": 10}`),
			"", `: field "context.maxTools": unknown field in "context"; known fields are max_tool_result_bytes, max_tool_results_bytes, max_tools; did you mean "max_tools"?`},
		{"context max_tool_result_bytes too small", minimal(`, "context": {"max_tool_result_bytes": 100}`),
			"", `: field "context.max_tool_result_bytes": want an integer from 1024 to 16777216, got 100`},
		{"context max_tool_results_bytes not a number", minimal(`, "context": {"max_tool_results_bytes": "1MB"}`),
			"", `: field "context.max_tool_results_bytes": want an integer from 1024 to 67108864, got string`},
		{"context max_tools zero", minimal(`, "context": {"max_tools": 0}`),
			"", `: field "context.max_tools": want an integer from 1 to 2000, got 0`},
		{"context one result larger than all", minimal(`, "context": {"max_tool_result_bytes": 65536, "max_tool_results_bytes": 4096}`),
			"", `: field "context.max_tool_result_bytes": one tool result (65536 bytes) cannot be larger than all of a request's (context.max_tool_results_bytes, 4096 bytes)`},
		{"prices not an object", minimal(`, "model": {"prices": [0.15, 0.6]}`),
			"", `: field "model.prices": want an object, got array`},
		{"price negative", minimal(`, "model": {"prices": {"gpt-4o-mini": {"input": -0.15, "output": 0.6}}}`),
			"", `: field "model.prices.gpt-4o-mini.input": want a price in USD per million tokens, a number 0 or more, got -0.15`},
		{"price a string", minimal(`, "model": {"prices": {"gpt-4o-mini": {"input": 0.15, "output": "$0.60"}}}`),
			"", `: field "model.prices.gpt-4o-mini.output": want a price in USD per million tokens, a number 0 or more, got string`},
		{"price cached_input null", minimal(`, "model": {"prices": {"gpt-4o-mini": {"input": 0.15, "cached_input": null, "output": 0.6}}}`),
			"", `: field "model.prices.gpt-4o-mini.cached_input": want a price in USD per million tokens, a number 0 or more, got null`},
		{"price output missing", minimal(`, "model": {"prices": {"gpt-4o-mini": {"input": 0.15}}}`),
			"", `: field "model.prices.gpt-4o-mini.output": required: the price in USD per million tokens (0 for free)`},
		{"price unknown field", minimal(`, "model": {"prices": {"gpt-4o-mini": {"input": 0.15, "output": 0.6, "cachedInput": 0.075}}}`),
			"", `: field "model.prices.gpt-4o-mini.cachedInput": unknown field in "model.prices.gpt-4o-mini"; known fields are input, cached_input, output; did you mean "cached_input"?`},
		{"price for no model", minimal(`, "model": {"prices": {"": {"input": 0.15, "output": 0.6}}}`),
			"", `: field "model.prices.": empty model name`},
		{"price not an object", minimal(`, "model": {"prices": {"gpt-4o-mini": 0.15}}`),
			"", `: field "model.prices.gpt-4o-mini": want an object, got number`},
		{"malformed mcp.json", minimal(``), `{"mcpServers": {"scout": {"url": "http://a", "workdir": "/"}}}`,
			`: server "scout": field "workdir": unknown field; known fields are type, url, headers, command, args, env, cwd, envFile, protocolVersion, disabled, timeout, maxResultBytes, dev, alwaysAllow, autoApprove, oauth, allowedTools, disabledTools, includeTools, excludeTools`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeAgent(t, t.TempDir(), "packrat", tt.agent, tt.mcp)
			_, err := agentdef.Load(dir)
			if err == nil {
				t.Fatalf("Load succeeded, want error %s", tt.want)
			}
			want := filepath.Join(dir, "agent.json") + tt.want
			if tt.mcp != "" {
				want = filepath.Join(dir, "tools", "mcp.json") + tt.want
			}
			// One error type for both files.
			if _, ok := errors.AsType[*mcpconfig.ConfigError](err); !ok {
				t.Errorf("error is %T, not a *mcpconfig.ConfigError", err)
			}
			if got := err.Error(); got != want {
				t.Errorf("error\n got %s\nwant %s", got, want)
			}
		})
	}
}

func TestErrorFields(t *testing.T) {
	dir := writeAgent(t, t.TempDir(), "packrat", minimal(`, "max_steps": 0`), "")
	_, err := agentdef.Load(dir)
	got, ok := errors.AsType[*mcpconfig.ConfigError](err)
	if !ok {
		t.Fatalf("error %v is %T, not a *mcpconfig.ConfigError", err, err)
	}
	want := &mcpconfig.ConfigError{
		File:  filepath.Join(dir, "agent.json"),
		Field: "max_steps",
		Value: "0",
		Msg:   "want an integer from 1 to 100, got 0",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("error = %+v, want %+v", got, want)
	}
}

func TestLoadMissing(t *testing.T) {
	dir := t.TempDir()
	_, err := agentdef.Load(dir)
	want := filepath.Join(dir, "agent.json") + ": cannot read file: no such file or directory"
	if err == nil || err.Error() != want {
		t.Errorf("Load(no agent.json) = %v, want %s", err, want)
	}
}

func TestCheckServer(t *testing.T) {
	d := &agentdef.Definition{Name: "packrat"}
	stdio := &mcpconfig.Server{Name: "git", Type: "stdio", Command: "uvx"}
	httpServer := &mcpconfig.Server{Name: "scout", Type: "http", URL: "http://a"}

	if err := d.CheckServer(httpServer); err != nil {
		t.Errorf("CheckServer(http) = %v, want nil", err)
	}
	err := d.CheckServer(stdio)
	const want = `agent "packrat" does not allow stdio servers (set allow_stdio in agent.json): server "git"`
	if err == nil || err.Error() != want {
		t.Errorf("CheckServer(stdio) = %v, want %s", err, want)
	}
	if !errors.Is(err, agentdef.ErrStdioNotAllowed) {
		t.Errorf("CheckServer(stdio) = %v, not ErrStdioNotAllowed", err)
	}
	d.AllowStdio = true
	if err := d.CheckServer(stdio); err != nil {
		t.Errorf("CheckServer(stdio) with allow_stdio = %v, want nil", err)
	}
}

func TestLoadAll(t *testing.T) {
	root := t.TempDir()
	writeAgent(t, root, "scout", `{"name": "scout", "description": "Looks around."}`, "")
	writeAgent(t, root, "packrat", minimal(``), "")
	// A Go package next to the agents, and a stray file: both skipped.
	if err := os.MkdirAll(filepath.Join(root, "internal"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"agents.go", filepath.Join("internal", "x.go")} {
		if err := os.WriteFile(filepath.Join(root, f), []byte("package agents\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	defs, err := agentdef.LoadAll(root)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range defs {
		names = append(names, d.Name)
	}
	if want := []string{"packrat", "scout"}; !reflect.DeepEqual(names, want) {
		t.Errorf("LoadAll names = %q, want %q", names, want)
	}

	// One bad agent fails the lot, with its own error.
	bad := writeAgent(t, root, "broken", `{"name": "broken", "description": "x", "max_depth": 0}`, "")
	_, err = agentdef.LoadAll(root)
	want := filepath.Join(bad, "agent.json") + `: field "max_depth": want an integer from 1 to 16, got 0`
	if err == nil || err.Error() != want {
		t.Errorf("LoadAll with a bad agent = %v, want %s", err, want)
	}
}

func TestLoadAllMissingDir(t *testing.T) {
	if _, err := agentdef.LoadAll(filepath.Join(t.TempDir(), "nope")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("LoadAll(missing) = %v, want os.ErrNotExist", err)
	}
}

// An agent.json error is a *mcpconfig.ConfigError, so its rendering gets
// the logs' redaction too: an invalid base URL that carries a key in its
// query is quoted without the key.
func TestErrorsAreRedacted(t *testing.T) {
	const key = "sk-planted-0123456789"
	dir := writeAgent(t, t.TempDir(), "packrat", minimal(`, "model": {"base_url": "http://[::1/v1?api_key=`+key+`"}`), "")
	_, err := agentdef.Load(dir)
	ce, ok := errors.AsType[*mcpconfig.ConfigError](err)
	if !ok {
		t.Fatalf("error %v is %T, not a *mcpconfig.ConfigError", err, err)
	}
	if ce.Field != "model.base_url" {
		t.Errorf("field %q, want model.base_url", ce.Field)
	}
	if msg := err.Error(); strings.Contains(msg, key) || !strings.Contains(msg, "invalid URL") {
		t.Errorf("error %q", msg)
	}
}

// TestCallTimeoutLoads: "call_timeout" is seconds, fractions too; absent,
// the agent sets no deadline of its own.
func TestCallTimeoutLoads(t *testing.T) {
	for _, c := range []struct {
		extra string
		want  time.Duration
	}{{`, "call_timeout": 2.5`, 2500 * time.Millisecond}, {`, "call_timeout": 86400`, 24 * time.Hour}, {``, 0}} {
		def, err := agentdef.Load(writeAgent(t, t.TempDir(), "packrat", minimal(c.extra), ""))
		if err != nil {
			t.Fatal(err)
		}
		if def.CallTimeout != c.want {
			t.Errorf("agent.json %q: CallTimeout %v, want %v", c.extra, def.CallTimeout, c.want)
		}
	}
}
