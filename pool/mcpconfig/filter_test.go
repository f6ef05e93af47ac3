package mcpconfig_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/switchboard-run/switchboard/pool/mcpconfig"
)

// TestToolFilterAccepted: each accepted shape of a server's tool filter,
// in both dialects, and what it becomes.
func TestToolFilterAccepted(t *testing.T) {
	tests := []struct {
		name          string
		json          string
		allow, reject []string
	}{
		{"allowedTools, mcpServers", `{"mcpServers": {"a": {"url": "http://a", "allowedTools": ["add", "mul"]}}}`,
			[]string{"add", "mul"}, nil},
		{"disabledTools, servers (VS Code)", `{"servers": {"a": {"type": "http", "url": "http://a", "disabledTools": ["calculate"]}}}`,
			nil, []string{"calculate"}},
		{"Gemini CLI's includeTools", `{"mcpServers": {"a": {"command": "calc", "includeTools": ["add"]}}}`,
			[]string{"add"}, nil},
		{"Gemini CLI's excludeTools", `{"mcpServers": {"a": {"command": "calc", "excludeTools": ["rm", "drop"]}}}`,
			nil, []string{"rm", "drop"}},
		{"empty disabledTools (Roo Code writes one)", `{"mcpServers": {"a": {"url": "http://a", "disabledTools": []}}}`,
			nil, nil},
		{"an empty disabledTools next to allowedTools", `{"mcpServers": {"a": {"url": "http://a", "disabledTools": [], "allowedTools": ["add"]}}}`,
			[]string{"add"}, nil},
		{"names MCP allows beyond model names", `{"mcpServers": {"a": {"url": "http://a", "disabledTools": ["fs.read", "admin/drop", "Ünïcode"]}}}`,
			nil, []string{"fs.read", "admin/drop", "Ünïcode"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := mcpconfig.Parse("tools/mcp.json", []byte(tt.json), lookup)
			if err != nil {
				t.Fatal(err)
			}
			s := cfg.Servers[0]
			if !reflect.DeepEqual(s.AllowedTools, tt.allow) || !reflect.DeepEqual(s.DisabledTools, tt.reject) {
				t.Errorf("AllowedTools %q, DisabledTools %q; want %q, %q", s.AllowedTools, s.DisabledTools, tt.allow, tt.reject)
			}
			if p := s.Pool(); p.Name != "a" {
				t.Errorf("Pool() = %+v", p)
			}
		})
	}
}

// TestToolFilterRefused: every refused shape is a ConfigError naming the
// file, the server, the field (the entry, for a bad name) and the value.
func TestToolFilterRefused(t *testing.T) {
	const p = "tools/mcp.json: "
	tests := []struct {
		name  string
		json  string
		field string
		want  string
	}{
		{"not an array", server(`"url": "http://a", "allowedTools": "add"`), "allowedTools",
			p + `server "a": field "allowedTools": want an array of strings, got string`},
		{"an entry not a string", server(`"url": "http://a", "disabledTools": ["add", 3]`), "disabledTools[1]",
			p + `server "a": field "disabledTools[1]": want a string, got number`},
		{"wrong type on a disabled server", server(`"url": "http://a", "disabled": true, "excludeTools": {"add": true}`), "excludeTools",
			p + `server "a": field "excludeTools": want an array of strings, got object`},
		{"empty name", server(`"url": "http://a", "disabledTools": ["add", ""]`), "disabledTools[1]",
			p + `server "a": field "disabledTools[1]": empty tool name`},
		{"spaces around a name", server(`"url": "http://a", "allowedTools": ["add "]`), "allowedTools[0]",
			p + `server "a": field "allowedTools[0]": tool name "add " has spaces around it`},
		{"a pattern", server(`"url": "http://a", "includeTools": ["read_*"]`), "includeTools[0]",
			p + `server "a": field "includeTools[0]": "read_*": patterns are not supported; name each tool as the server lists it`},
		{"a name twice", server(`"url": "http://a", "disabledTools": ["add", "mul", "add"]`), "disabledTools[2]",
			p + `server "a": field "disabledTools[2]": tool "add" is named twice (also disabledTools[0])`},
		{"empty allowedTools", server(`"url": "http://a", "allowedTools": []`), "allowedTools",
			p + `server "a": field "allowedTools": an empty list would offer none of the server's tools; to leave the server out, set "disabled": true`},
		{"a name in both lists", server(`"url": "http://a", "allowedTools": ["add", "mul"], "disabledTools": ["mul"]`), "disabledTools",
			p + `server "a": field "disabledTools": tool "mul" is in both "allowedTools" and "disabledTools"`},
		{"both lists", server(`"url": "http://a", "excludeTools": ["rm"], "includeTools": ["add"]`), "excludeTools",
			p + `server "a": field "excludeTools": not allowed with "includeTools", which already leaves out every tool it does not name; give one of them`},
		{"a list and its Gemini CLI name", server(`"url": "http://a", "allowedTools": ["add"], "includeTools": ["add"]`), "includeTools",
			p + `server "a": field "includeTools": the same list as "allowedTools" ("includeTools" and "excludeTools" are Gemini CLI's names for "allowedTools" and "disabledTools"); give one of them`},
		{"Claude Code's flag name", server(`"url": "http://a", "disallowedTools": ["rm"]`), "disallowedTools",
			p + `server "a": field "disallowedTools": unknown field; known fields are type, url, headers, command, args, env, cwd, envFile, protocolVersion, disabled, timeout, maxResultBytes, dev, alwaysAllow, autoApprove, oauth, allowedTools, disabledTools, includeTools, excludeTools; did you mean "disabledTools"?`},
		{"a miscased field", server(`"url": "http://a", "allowedtools": ["add"]`), "allowedtools",
			p + `server "a": field "allowedtools": unknown field; known fields are type, url, headers, command, args, env, cwd, envFile, protocolVersion, disabled, timeout, maxResultBytes, dev, alwaysAllow, autoApprove, oauth, allowedTools, disabledTools, includeTools, excludeTools; did you mean "allowedTools"?`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := mcpconfig.Parse("tools/mcp.json", []byte(tt.json), lookup)
			if err == nil {
				t.Fatalf("Parse succeeded with %s, want error %s", dump(cfg.Servers), tt.want)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("error\n got %s\nwant %s", got, tt.want)
			}
			ce, ok := errors.AsType[*mcpconfig.ConfigError](err)
			if !ok {
				t.Fatalf("error is %T, not a *ConfigError", err)
			}
			if ce.File != "tools/mcp.json" || ce.Server != "a" || ce.Field != tt.field {
				t.Errorf("ConfigError names file %q, server %q, field %q; want tools/mcp.json, a, %s", ce.File, ce.Server, ce.Field, tt.field)
			}
		})
	}
}
