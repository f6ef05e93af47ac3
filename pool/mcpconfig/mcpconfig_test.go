package mcpconfig_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/pool/mcpconfig"
)

// env is the environment the tests expand variables from.
var env = map[string]string{
	"HOME":    "/home/ada",
	"TOKEN":   "s3cret",
	"STUDIO":  "studio.internal:8080",
	"EMPTY":   "",
	"NOHTTP":  "localhost:8080/mcp",
	"NEWLINE": "a\nb",
}

func lookup(name string) (string, bool) {
	v, ok := env[name]
	return v, ok
}

func TestParseDialects(t *testing.T) {
	tests := []struct {
		name string
		json string
		want []*mcpconfig.Server
	}{{
		name: "Claude Desktop: mcpServers, stdio",
		json: `{
  "mcpServers": {
    "filesystem": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-filesystem", "${HOME}/notes"],
      "env": {"LOG_LEVEL": "${LOG_LEVEL:-info}", "TOKEN": "${env:TOKEN}"}
    },
    "cost": {
      "command": "${HOME}/bin/cost",
      "args": ["--price", "$$5", "$${NOT_EXPANDED}", "${EMPTY:-fallback}", "${EMPTY}"]
    }
  }
}`,
		want: []*mcpconfig.Server{{
			Name:    "filesystem",
			Type:    "stdio",
			Command: "npx",
			Args:    []string{"-y", "@modelcontextprotocol/server-filesystem", "/home/ada/notes"},
			Env:     map[string]string{"LOG_LEVEL": "info", "TOKEN": "s3cret"},
		}, {
			Name:    "cost",
			Type:    "stdio",
			Command: "/home/ada/bin/cost",
			Args:    []string{"--price", "$5", "${NOT_EXPANDED}", "fallback", ""},
		}},
	}, {
		name: "VS Code: servers, type http, headers, inputs",
		json: `{
  "inputs": [
    {"type": "promptString", "id": "api-key", "description": "API key", "password": true}
  ],
  "servers": {
    "packrat": {
      "type": "http",
      "url": "http://${STUDIO}/agents/packrat/mcp",
      "headers": {"Authorization": "Bearer ${env:TOKEN}", "X-Trace": "on"}
    },
    "git": {"type": "stdio", "command": "uvx", "args": ["mcp-server-git"]}
  }
}`,
		want: []*mcpconfig.Server{{
			Name:    "packrat",
			Type:    "http",
			URL:     "http://studio.internal:8080/agents/packrat/mcp",
			Headers: map[string]string{"Authorization": "Bearer s3cret", "X-Trace": "on"},
		}, {
			Name:    "git",
			Type:    "stdio",
			Command: "uvx",
			Args:    []string{"mcp-server-git"},
		}},
	}, {
		name: "Cursor: mcpServers, url",
		json: `{
  "mcpServers": {
    "docs": {"url": "https://docs.example.com/mcp"},
    "tickets": {
      "type": "streamable-http",
      "url": "https://tickets.example.com/mcp?team=${TEAM:-core}",
      "protocolVersion": "2025-06-18"
    },
    "old": {"disabled": true, "url": "${UNDEFINED_BUT_DISABLED}"}
  }
}`,
		want: []*mcpconfig.Server{{
			Name: "docs",
			Type: "http",
			URL:  "https://docs.example.com/mcp",
		}, {
			Name:            "tickets",
			Type:            "http",
			URL:             "https://tickets.example.com/mcp?team=core",
			ProtocolVersion: "2025-06-18",
		}},
	}, {
		name: "no servers",
		json: `{"inputs": []}`,
		want: nil,
	}, {
		name: "byte order mark",
		json: "\xef\xbb\xbf{\"mcpServers\": {\"a\": {\"url\": \"http://a\"}}}",
		want: []*mcpconfig.Server{{Name: "a", Type: "http", URL: "http://a"}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := mcpconfig.Parse("tools/mcp.json", []byte(tt.json), lookup)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Path != "tools/mcp.json" {
				t.Errorf("Path = %q, want tools/mcp.json", cfg.Path)
			}
			if !reflect.DeepEqual(cfg.Servers, tt.want) {
				t.Errorf("Servers:\n got %s\nwant %s", dump(cfg.Servers), dump(tt.want))
			}
		})
	}
}

func dump(servers []*mcpconfig.Server) string {
	s := "["
	for _, srv := range servers {
		s += fmt.Sprintf("\n\t%+v", *srv)
	}
	return s + "]"
}

// server wraps the JSON of one server named "a" into an mcp.json.
func server(fields string) string {
	return `{"mcpServers": {"a": {` + fields + `}}}`
}

func TestParseErrors(t *testing.T) {
	const p = "tools/mcp.json: "
	tests := []struct {
		name string
		json string
		want string
	}{
		// The file.
		{"invalid JSON", "{\n  \"mcpServers\": {\n    \"a\": {\"url\": \"http://a\",}\n  }\n}",
			"tools/mcp.json:3:29: invalid JSON: invalid character '}' looking for beginning of object key string"},
		{"truncated JSON", `{"mcpServers": {`,
			"tools/mcp.json:1:16: invalid JSON: unexpected end of JSON input"},
		{"empty file", ``,
			"tools/mcp.json:1:1: invalid JSON: unexpected end of JSON input"},
		{"top level not an object", `[]`,
			p + "want a JSON object at the top level, got array"},
		{"unknown top-level field", `{"mcpServers": {}, "version": 1}`,
			p + `field "version": unknown field; want "mcpServers" (Claude Desktop, Claude Code, Cursor) or "servers" (VS Code)`},
		{"misspelled top-level field", `{"mcpservers": {}}`,
			p + `field "mcpservers": unknown field; want "mcpServers" (Claude Desktop, Claude Code, Cursor) or "servers" (VS Code); did you mean "mcpServers"?`},
		{"settings.json wrapper", `{"mcp": {"servers": {}}}`,
			p + `field "mcp": unknown field; want "mcpServers" (Claude Desktop, Claude Code, Cursor) or "servers" (VS Code); "mcp" wraps the servers in VS Code's settings.json, but mcp.json has "servers" at the top level`},
		{"duplicate top-level field", `{"servers": {}, "servers": {}}`,
			p + `field "servers": duplicate field`},
		{"both dialects", `{"mcpServers": {}, "servers": {}}`,
			p + `has both "mcpServers" and "servers"; use one`},
		{"inputs not an array", `{"inputs": {}, "servers": {}}`,
			p + `field "inputs": want an array, got object`},
		{"servers not an object", `{"servers": ["a"]}`,
			p + `field "servers": want an object of servers by name, got array`},

		// Server names.
		{"duplicate server name", `{"mcpServers": {"a": {"url": "http://a"}, "b": {"url": "http://b"}, "a": {"url": "http://c"}}}`,
			p + `server "a": defined twice in "mcpServers"`},
		{"empty server name", `{"mcpServers": {"": {"url": "http://a"}}}`,
			p + `field "mcpServers": empty server name; names must match ^[a-zA-Z0-9_-]{1,64}$ because they become part of tool names`},
		{"invalid server name", `{"servers": {"my server": {"url": "http://a"}}}`,
			p + `server "my server": invalid server name; names must match ^[a-zA-Z0-9_-]{1,64}$ because they become part of tool names`},
		{"server name too long", `{"servers": {"` + fmt.Sprintf("%065d", 0) + `": {"url": "http://a"}}}`,
			p + `server "` + fmt.Sprintf("%065d", 0) + `": invalid server name; names must match ^[a-zA-Z0-9_-]{1,64}$ because they become part of tool names`},

		// Server fields.
		{"server not an object", `{"mcpServers": {"a": "http://a"}}`,
			p + `server "a": want an object, got string`},
		{"unknown server field", server(`"command": "x", "workdir": "/tmp"`),
			p + `server "a": field "workdir": unknown field; known fields are type, url, headers, command, args, env, cwd, envFile, protocolVersion, disabled, timeout, maxResultBytes, dev, alwaysAllow, autoApprove, oauth, allowedTools, disabledTools, includeTools, excludeTools`},
		// Other dialects' fields: accepted with their types checked.
		{"cwd on an http server", server(`"url": "http://a", "cwd": "/tmp"`),
			p + `server "a": field "cwd": not allowed on a Streamable HTTP server (it has "url")`},
		{"cwd missing", server(`"command": "x", "cwd": "/nonexistent-dir-for-test"`),
			p + `server "a": field "cwd": directory /nonexistent-dir-for-test: no such file or directory`},
		{"envFile missing", server(`"command": "x", "envFile": "/nonexistent.env"`),
			p + `server "a": field "envFile": cannot read /nonexistent.env: no such file or directory`},
		{"timeout not a number", server(`"url": "http://a", "timeout": "60"`),
			p + `server "a": field "timeout": want a number of seconds, got string`},
		{"timeout zero", server(`"url": "http://a", "timeout": 0`),
			p + `server "a": field "timeout": want seconds between 0 and 86400, got 0`},
		{"maxResultBytes a string", server(`"url": "http://a", "maxResultBytes": "16MiB"`),
			p + `server "a": field "maxResultBytes": want an integer number of bytes from 1024 to 1073741824, got string`},
		{"maxResultBytes too small", server(`"url": "http://a", "maxResultBytes": 100`),
			p + `server "a": field "maxResultBytes": want an integer number of bytes from 1024 to 1073741824, got 100`},
		{"maxResultBytes a fraction", server(`"url": "http://a", "maxResultBytes": 2048.5`),
			p + `server "a": field "maxResultBytes": want an integer number of bytes from 1024 to 1073741824, got 2048.5`},
		{"maxResultBytes past 1 GiB", server(`"url": "http://a", "maxResultBytes": 1073741825`),
			p + `server "a": field "maxResultBytes": want an integer number of bytes from 1024 to 1073741824, got 1073741825`},
		{"alwaysAllow not strings", server(`"url": "http://a", "alwaysAllow": [1]`),
			p + `server "a": field "alwaysAllow[0]": want a string, got number`},
		{"dev not an object", server(`"command": "x", "dev": true`),
			p + `server "a": field "dev": want an object, got boolean`},
		{"port out of range", server(`"url": "http://127.0.0.1:99999/mcp"`),
			p + `server "a": field "url": URL "http://127.0.0.1:99999/mcp": port 99999 is out of range (1-65535)`},
		{"port zero", server(`"url": "http://127.0.0.1:0/mcp"`),
			p + `server "a": field "url": URL "http://127.0.0.1:0/mcp": port 0 is out of range (1-65535)`},
		{"misspelled server field", server(`"URL": "http://a"`),
			p + `server "a": field "URL": unknown field; known fields are type, url, headers, command, args, env, cwd, envFile, protocolVersion, disabled, timeout, maxResultBytes, dev, alwaysAllow, autoApprove, oauth, allowedTools, disabledTools, includeTools, excludeTools; did you mean "url"?`},
		{"Windsurf serverUrl", server(`"serverUrl": "http://a"`),
			p + `server "a": field "serverUrl": unknown field; known fields are type, url, headers, command, args, env, cwd, envFile, protocolVersion, disabled, timeout, maxResultBytes, dev, alwaysAllow, autoApprove, oauth, allowedTools, disabledTools, includeTools, excludeTools; did you mean "url"?`},
		{"duplicate server field", server(`"url": "http://a", "url": "http://b"`),
			p + `server "a": field "url": duplicate field`},
		{"url not a string", server(`"url": 8080`),
			p + `server "a": field "url": want a string, got number`},
		{"args not an array", server(`"command": "x", "args": "-y server"`),
			p + `server "a": field "args": want an array of strings, got string`},
		{"args element not a string", server(`"command": "x", "args": ["--port", 8080]`),
			p + `server "a": field "args[1]": want a string, got number`},
		{"env not an object", server(`"command": "x", "env": ["A=1"]`),
			p + `server "a": field "env": want an object of strings, got array`},
		{"env value not a string", server(`"command": "x", "env": {"PORT": 8080}`),
			p + `server "a": field "env.PORT": want a string, got number`},
		{"env null", server(`"command": "x", "env": null`),
			p + `server "a": field "env": want an object of strings, got null`},
		{"headers not an object", server(`"url": "http://a", "headers": "Authorization: x"`),
			p + `server "a": field "headers": want an object of strings, got string`},
		{"disabled not a boolean", server(`"url": "http://a", "disabled": "yes"`),
			p + `server "a": field "disabled": want true or false, got string`},
		{"duplicate env key", server(`"command": "x", "env": {"A": "1", "A": "2"}`),
			p + `server "a": field "env.A": duplicate key`},
		{"invalid env name", server(`"command": "x", "env": {"A=B": "1"}`),
			p + `server "a": field "env": invalid variable name "A=B"`},

		// Transport.
		{"url and command", server(`"url": "http://a", "command": "x"`),
			p + `server "a": has both "url" and "command"; use "url" for Streamable HTTP or "command" for stdio, not both`},
		{"neither url nor command", server(`"args": ["x"]`),
			p + `server "a": has neither "url" (Streamable HTTP) nor "command" (stdio)`},
		{"empty server", server(``),
			p + `server "a": has neither "url" (Streamable HTTP) nor "command" (stdio)`},
		{"type stdio with url", server(`"type": "stdio", "command": "x", "url": "http://a"`),
			p + `server "a": field "url": not allowed on a stdio server (type "stdio")`},
		{"type http with command", server(`"type": "http", "url": "http://a", "command": "x"`),
			p + `server "a": field "command": not allowed on a Streamable HTTP server (type "http")`},
		{"url with args", server(`"url": "http://a", "args": ["x"]`),
			p + `server "a": field "args": not allowed on a Streamable HTTP server (it has "url")`},
		{"command with headers", server(`"command": "x", "headers": {"A": "b"}`),
			p + `server "a": field "headers": not allowed on a stdio server (it has "command")`},
		{"type http without url", server(`"type": "streamable-http"`),
			p + `server "a": type "streamable-http" requires "url"`},
		{"type stdio without command", server(`"type": "stdio", "args": ["x"]`),
			p + `server "a": type "stdio" requires "command"`},
		{"type sse", server(`"type": "sse", "url": "http://a/sse"`),
			p + `server "a": field "type": SSE transport is not supported; use Streamable HTTP (the server's Streamable HTTP endpoint as "url", with "type": "http" or no type)`},
		{"unknown type", server(`"type": "websocket", "url": "ws://a"`),
			p + `server "a": field "type": unknown type "websocket"; want "stdio", "http" or "streamable-http"`},
		{"empty type", server(`"type": "", "url": "http://a"`),
			p + `server "a": field "type": unknown type ""; want "stdio", "http" or "streamable-http"`},
		{"unsupported protocol version", server(`"url": "http://a", "protocolVersion": "2024-11-05"`),
			p + `server "a": field "protocolVersion": unsupported protocol version "2024-11-05"; want one of ["2026-07-28" "2025-11-25" "2025-06-18" "2025-03-26"]`},

		// Variables.
		{"undefined variable", `{"mcpServers": {"packrat": {"url": "http://${STUDIO_HOST}/mcp"}}}`,
			p + `server "packrat": field "url": undefined variable ${STUDIO_HOST} (no default)`},
		{"undefined env: variable", server(`"url": "http://a", "headers": {"Authorization": "Bearer ${env:API_TOKEN}"}`),
			p + `server "a": field "headers.Authorization": undefined variable ${env:API_TOKEN} (no default)`},
		{"undefined variable in command", server(`"command": "${BIN}/server"`),
			p + `server "a": field "command": undefined variable ${BIN} (no default)`},
		{"undefined variable in args", server(`"command": "x", "args": ["-v", "${DATA_DIR}"]`),
			p + `server "a": field "args[1]": undefined variable ${DATA_DIR} (no default)`},
		{"undefined variable in env", server(`"command": "x", "env": {"KEY": "${SECRET}"}`),
			p + `server "a": field "env.KEY": undefined variable ${SECRET} (no default)`},
		{"input variable", server(`"url": "http://a", "headers": {"Authorization": "Bearer ${input:api-key}"}`),
			p + `server "a": field "headers.Authorization": ${input:api-key} is not supported: input variables need an interactive prompt and Switchboard runs headless; use ${env:VAR} or ${VAR}`},
		{"unterminated variable", server(`"url": "http://${STUDIO/mcp"`),
			p + `server "a": field "url": unterminated ${ in "http://${STUDIO/mcp"`},
		{"invalid variable name", server(`"command": "${1PASSWORD}"`),
			p + `server "a": field "command": invalid variable reference ${1PASSWORD}: want ${VAR}, ${VAR:-default} or ${env:VAR}, where VAR is letters, digits and _ and does not start with a digit`},
		{"VS Code predefined variable", server(`"command": "${workspaceFolder:app}/run"`),
			p + `server "a": field "command": invalid variable reference ${workspaceFolder:app}: want ${VAR}, ${VAR:-default} or ${env:VAR}, where VAR is letters, digits and _ and does not start with a digit`},
		{"nested variable", server(`"command": "${A:-${B}}"`),
			p + `server "a": field "command": nested variable reference in ${A:-${B} is not supported`},

		// Values.
		{"unparsable URL", server(`"url": "http://[::1/mcp"`),
			p + `server "a": field "url": invalid URL "http://[::1/mcp": missing ']' in host`},
		{"URL without scheme", server(`"url": "${NOHTTP}"`),
			p + `server "a": field "url": URL "localhost:8080/mcp" must start with http:// or https://`},
		{"URL with other scheme", server(`"url": "ftp://ada:pw@files.example.com/mcp"`),
			p + `server "a": field "url": URL "ftp://ada:xxxxx@files.example.com/mcp" must start with http:// or https://`},
		{"URL without host", server(`"url": "http:///mcp"`),
			p + `server "a": field "url": URL "http:///mcp" has no host`},
		{"empty URL", server(`"url": ""`),
			p + `server "a": field "url": URL "" must start with http:// or https://`},
		{"empty command", server(`"command": "${EMPTY}"`),
			p + `server "a": field "command": command is empty`},
		{"invalid header name", server(`"url": "http://a", "headers": {"Bad Name": "x"}`),
			p + `server "a": field "headers": invalid header name "Bad Name"`},
		{"session id header", server(`"url": "http://a", "headers": {"mcp-session-id": "abc"}`),
			p + `server "a": field "headers.mcp-session-id": Mcp-Session-Id is set by the transport and cannot be configured`},
		{"headers differing in case", server(`"url": "http://a", "headers": {"Authorization": "a", "authorization": "b"}`),
			p + `server "a": field "headers.authorization": same header as "Authorization" (header names are case-insensitive)`},
		{"header value with newline", server(`"url": "http://a", "headers": {"X-A": "${NEWLINE}"}`),
			p + `server "a": field "headers.X-A": value contains a control character such as a newline (after expansion)`},
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
			if _, ok := errors.AsType[*mcpconfig.ConfigError](err); !ok {
				t.Errorf("error is %T, not a *ConfigError", err)
			}
		})
	}
}

func TestConfigErrorFields(t *testing.T) {
	_, err := mcpconfig.Parse("tools/mcp.json", []byte(server(`"url": "${NOHTTP}"`)), lookup)
	got, ok := errors.AsType[*mcpconfig.ConfigError](err)
	if !ok {
		t.Fatalf("error %v is %T, not a *ConfigError", err, err)
	}
	want := &mcpconfig.ConfigError{
		File:   "tools/mcp.json",
		Server: "a",
		Field:  "url",
		Value:  "${NOHTTP}", // as written: never an expanded secret
		Msg:    `URL "localhost:8080/mcp" must start with http:// or https://`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("error = %+v, want %+v", got, want)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "mcp.json")
	if err := os.WriteFile(path, []byte(server(`"url": "http://${MCPCONFIG_TEST_HOST}/mcp"`)), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MCPCONFIG_TEST_HOST", "studio")
	cfg, err := mcpconfig.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := cfg.Server("a"); !ok || s.URL != "http://studio/mcp" {
		t.Errorf("Server(a) = %+v, %v; want URL http://studio/mcp", s, ok)
	}
	if cfg.Path != path {
		t.Errorf("Path = %q, want %q", cfg.Path, path)
	}
}

func TestLoadMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mcp.json")
	_, err := mcpconfig.Load(path)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Load(missing) = %v, want fs.ErrNotExist", err)
	}
	if want := path + ": cannot read file: no such file or directory"; err.Error() != want {
		t.Errorf("error\n got %s\nwant %s", err, want)
	}
}

func TestServerPool(t *testing.T) {
	s := &mcpconfig.Server{Name: "a", Type: "http", URL: "http://a", Headers: map[string]string{"A": "b"}, ProtocolVersion: "2025-11-25"}
	p := s.Pool()
	if p.Name != s.Name || p.URL != s.URL || p.Headers["A"] != "b" || p.ProtocolVersion != s.ProtocolVersion {
		t.Errorf("Pool() = %+v, want the fields of %+v", p, s)
	}
}

// TestOtherDialectsFields: VS Code's cwd, envFile, inputs and dev, and
// Cline's disabled, timeout and alwaysAllow/autoApprove are accepted; cwd,
// envFile and timeout are honoured, and the ignored ones are named.
func TestOtherDialectsFields(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "srv"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".env"), []byte("# a comment\nexport API_KEY=\"k$1\"\nMODE=file\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "mcp.json")
	cfg, err := mcpconfig.Parse(path, []byte(`{
  "inputs": [{"type": "promptString", "id": "key"}],
  "servers": {
    "local": {"type": "stdio", "command": "node", "args": ["index.js"], "cwd": "srv", "envFile": ".env",
              "env": {"MODE": "env"}, "dev": {"watch": "src/**/*.ts"}, "maxResultBytes": 4096},
    "remote": {"url": "http://127.0.0.1:8080/mcp", "timeout": 90, "maxResultBytes": 65536, "alwaysAllow": ["read"], "autoApprove": []},
    "off": {"command": "nope", "disabled": true, "cwd": "does-not-matter"}
  }
}`), lookup)
	if err != nil {
		t.Fatal(err)
	}
	want := []*mcpconfig.Server{
		{Name: "local", Type: "stdio", Command: "node", Args: []string{"index.js"}, Dir: filepath.Join(dir, "srv"),
			Env: map[string]string{"API_KEY": "k$1", "MODE": "env"}, MaxResultBytes: 4096},
		{Name: "remote", Type: "http", URL: "http://127.0.0.1:8080/mcp", Timeout: 90 * time.Second, MaxResultBytes: 65536},
	}
	if !reflect.DeepEqual(cfg.Servers, want) {
		t.Errorf("servers\n got %+v\nwant %+v", cfg.Servers, want)
	}
	wantIgnored := []string{
		path + `: server "local": field "dev" is ignored: VS Code's development settings (watch, debug) are for an editor`,
		path + `: server "remote": field "alwaysAllow" is ignored: switchboard never asks before running a tool`,
		path + `: server "remote": field "autoApprove" is ignored: switchboard never asks before running a tool`,
	}
	if !reflect.DeepEqual(cfg.Ignored, wantIgnored) {
		t.Errorf("ignored\n got %q\nwant %q", cfg.Ignored, wantIgnored)
	}
	if got := cfg.Servers[0].Pool().Dir; got != filepath.Join(dir, "srv") {
		t.Errorf("Pool().Dir = %q", got)
	}
}
