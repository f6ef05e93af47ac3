package agentdef_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-run/switchboard/pool/mcpconfig"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// TestLoadRemote: an agent.json with a url is an agent on another host:
// its url expanded as tools/mcp.json's are, its token by variable name
// only (the value is never read here), no tools/mcp.json of its own.
func TestLoadRemote(t *testing.T) {
	dir := writeAgent(t, t.TempDir(), "packrat", `{
  "name": "packrat",
  "url": "http://${PACKRAT_HOST}:${PACKRAT_PORT:-8080}/mcp",
  "token_env": "PACKRAT_TOKEN"
}`, "")
	env := map[string]string{"PACKRAT_HOST": "packrat.default.svc", "PACKRAT_TOKEN": "never-read"}
	d, err := agentdef.LoadWith(dir, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	if !d.Remote() || d.URL != "http://packrat.default.svc:8080/mcp" || d.TokenEnv != "PACKRAT_TOKEN" || d.Name != "packrat" {
		t.Errorf("remote definition %+v", d)
	}
	if d.MCP == nil || len(d.MCP.Servers) != 0 {
		t.Errorf("a remote's MCP config %+v, want an empty one", d.MCP)
	}

	local := writeAgent(t, t.TempDir(), "abacus", `{"name": "abacus", "description": "d"}`, "")
	if d, err := agentdef.Load(local); err != nil || d.Remote() || d.URL != "" {
		t.Errorf("an agent without url: %+v, %v; want a local agent", d, err)
	}
}

// TestRemoteErrors: every mistake in a remote agent's agent.json is a
// ConfigError naming the file, the field and the value as written.
func TestRemoteErrors(t *testing.T) {
	lookup := func(k string) (string, bool) {
		if k == "SECRET" {
			return "hunter2", true
		}
		return "", false
	}
	for _, tc := range []struct {
		name, json, field, value, msg string
	}{
		{"bad scheme", `{"name":"a","url":"ftp://h/mcp"}`, "url", "ftp://h/mcp", "must start with http:// or https://"},
		{"no host", `{"name":"a","url":"http:///mcp"}`, "url", "http:///mcp", "has no host"},
		{"empty", `{"name":"a","url":""}`, "url", "", "empty URL"},
		{"not a string", `{"name":"a","url":8080}`, "url", "8080", "want a string"},
		{"bad port", `{"name":"a","url":"http://h:99999/mcp"}`, "url", "http://h:99999/mcp", "out of range"},
		{"undefined variable", `{"name":"a","url":"http://${NOPE}/mcp"}`, "url", "http://${NOPE}/mcp", "undefined variable ${NOPE}"},
		{"user info", `{"name":"a","url":"http://me:${SECRET}@h/mcp"}`, "url", "http://me:${SECRET}@h/mcp", "carries user info"},
		{"bad token_env", `{"name":"a","url":"http://h/mcp","token_env":"1X"}`, "token_env", "1X", "invalid environment variable name"},
		{"token_env without url", `{"name":"a","description":"d","token_env":"X"}`, "token_env", "X", "needs a url"},
		{"model with url", `{"name":"a","url":"http://h/mcp","model":{"name":"gpt"}}`, "model", "", "runs elsewhere"},
		{"tools with url", `{"name":"a","url":"http://h/mcp","tools":["abacus"]}`, "tools", "", "runs elsewhere"},
		{"instructions with url", `{"name":"a","instructions":"x","url":"http://h/mcp"}`, "instructions", "", "runs elsewhere"},
		{"unknown field", `{"name":"a","url":"http://h/mcp","tokenEnv":"X"}`, "tokenEnv", "", `did you mean "token_env"?`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeAgent(t, t.TempDir(), "a", tc.json, "")
			_, err := agentdef.LoadWith(dir, lookup)
			ce, ok := errors.AsType[*mcpconfig.ConfigError](err)
			if !ok {
				t.Fatalf("error %v (%T), want a *mcpconfig.ConfigError", err, err)
			}
			if ce.File != filepath.Join(dir, "agent.json") || ce.Field != tc.field || ce.Value != tc.value || !strings.Contains(ce.Error(), tc.msg) {
				t.Errorf("error %q: file %q field %q value %q; want file agent.json, field %q, value %q, saying %q", ce, ce.File, ce.Field, ce.Value, tc.field, tc.value, tc.msg)
			}
			if strings.Contains(ce.Error(), "hunter2") {
				t.Errorf("error %q shows the variable's secret value", ce)
			}
		})
	}
}

// TestRemoteWithMCPJSON: a tools/mcp.json beside a remote agent's
// agent.json would be ignored (it is read on the agent's own host), so it
// is an error naming that file.
func TestRemoteWithMCPJSON(t *testing.T) {
	dir := writeAgent(t, t.TempDir(), "a", `{"name":"a","url":"http://h/mcp"}`, `{"mcpServers": {}}`)
	_, err := agentdef.Load(dir)
	ce, ok := errors.AsType[*mcpconfig.ConfigError](err)
	if !ok || ce.File != filepath.Join(dir, "tools", "mcp.json") || !strings.Contains(ce.Error(), "runs elsewhere") {
		t.Fatalf("error %v, want a ConfigError naming tools/mcp.json", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "tools", "mcp.json")); err != nil {
		t.Fatal(err)
	}
}
