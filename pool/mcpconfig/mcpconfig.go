// Package mcpconfig loads mcp.json files in the dialects people already
// write: "mcpServers" (Claude Desktop, Claude Code, Cursor) and "servers"
// (VS Code).
//
//	cfg, err := mcpconfig.Load("tools/mcp.json")
//	if err != nil {
//		return err // a *ConfigError naming the file, server, field and value
//	}
//	for _, s := range cfg.Servers {
//		tools, err := p.ListTools(ctx, s.Pool()) // p is a *pool.Pool
//		...
//	}
//
// [Load] expands variables from the environment, [LoadWith] from a
// function, and [Parse] reads bytes already in hand. Each [Server] is
// checked and expanded; [Server.Pool] is the [pool.Server] that a
// pool.Pool dials. Package runtime/agentdef loads an agent's
// tools/mcp.json through this package.
//
// A server with "url" speaks Streamable HTTP; one with "command" (and
// optionally "args" and "env") is a stdio server. An explicit "type" of
// "http" or "streamable-http" (both become Type "http") or "stdio" must agree
// with those fields; "sse" is refused because the SSE transport is not
// supported. Other server fields are "headers", "protocolVersion" and
// "disabled": a disabled server is checked for unknown fields and JSON types
// but not expanded, and it is left out of [Config.Servers]. VS Code's
// top-level "inputs" array is accepted but never used: referring to one
// with ${input:...} is an error, since nobody is there to answer the prompt.
//
// The fields other clients' dialects add are accepted too. Honoured: "cwd"
// (a stdio server's working directory, relative to the mcp.json's folder),
// "envFile" (VS Code: a file of NAME=value lines added to a stdio server's
// environment; "env" wins over it) and "timeout" (Cline: seconds a call to
// the server may take). Switchboard's own: "maxResultBytes" (a
// server's cap on the bytes of one answer the pool reads, a body over HTTP
// or a line of a stdio server's stdout, from 1 KiB to
// 1 GiB; default pool.DefaultMaxResultBytes, 16 MiB: past it the call fails
// with pool.ErrResultTooLarge and nothing of the answer is kept).
// Accepted and ignored, with a note in [Config.Ignored] for the caller to
// log: VS Code's "dev" (watch and debug settings for a server under
// development) and Cline's "alwaysAllow" and "autoApprove" (tools run
// without asking: switchboard never asks).
//
// A server's tools can be filtered (filter.go): "allowedTools" names the
// only tools of the server offered to the model, "disabledTools" the ones
// left out; Gemini CLI's "includeTools" and "excludeTools" are read as the
// same two lists.
//
// Variables (${VAR}, ${VAR:-default}, ${env:VAR}, $$ for a literal $) are
// expanded in "url", header values, "command", "args" and "env" values.
//
// Anything unknown or malformed is an error rather than silently ignored:
// a misspelled field that was ignored would surface much later as a server
// that behaves strangely. Every error is a [*ConfigError] naming the file,
// the server, the field and the value.
package mcpconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-run/switchboard/internal/strictjson"

	"github.com/switchboard-run/switchboard/pool"
)

// Server is one MCP server from an mcp.json, with every ${VAR} expanded.
type Server struct {
	Name    string
	Type    string // "http" or "stdio"
	URL     string
	Headers map[string]string
	Command string
	Args    []string
	Env     map[string]string
	// Dir is a stdio server's working directory ("cwd"), absolute; empty:
	// the caller's.
	Dir             string
	ProtocolVersion string
	// Timeout bounds one call to the server ("timeout", in seconds); zero:
	// the caller's own deadline only.
	Timeout time.Duration
	// MaxResultBytes caps one answer of the server, HTTP or stdio
	// ("maxResultBytes"); zero: pool.DefaultMaxResultBytes.
	MaxResultBytes int64
	// OAuth is the server's "oauth" (oauth.go); nil when it has none.
	OAuth *pool.OAuthConfig
	// AllowedTools, when not nil, are the only tools of the server the
	// model is offered ("allowedTools" or "includeTools"); DisabledTools
	// are the tools it is not ("disabledTools" or "excludeTools"). At
	// most one of the two is set, and each holds exact MCP tool names
	// (filter.go). They are about what a model sees, so they stay here
	// and out of [pool.Server]: package delegation applies them.
	AllowedTools  []string
	DisabledTools []string
}

// Config is a loaded mcp.json.
type Config struct {
	Path    string
	Servers []*Server // in file order
	// Ignored says which fields of the file were accepted but mean nothing
	// here, one sentence each, for the caller to log.
	Ignored []string
}

// Load reads and parses the mcp.json at path, expanding variables from the
// process environment. When the file cannot be read the error is a
// [*ConfigError] wrapping the cause, so errors.Is(err, fs.ErrNotExist)
// tells a missing file apart.
func Load(path string) (*Config, error) { return LoadWith(path, os.LookupEnv) }

// LoadWith is Load with variables looked up by lookup instead of in the
// environment: the studio resolves ${SWITCHBOARD_STUDIO_URL} to its own
// address when it reads its agents' files.
func LoadWith(path string, lookup func(string) (string, bool)) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is already in File
		}
		return nil, &ConfigError{File: path, Msg: "cannot read file", Err: err}
	}
	return Parse(path, data, lookup)
}

// Parse parses data as the mcp.json at path (path is used in errors), looking
// variables up with lookup. A nil lookup defines no variables. Every error
// is a [*ConfigError].
func Parse(path string, data []byte, lookup func(string) (string, bool)) (*Config, error) {
	if lookup == nil {
		lookup = func(string) (string, bool) { return "", false }
	}
	p := &parser{file: path, lookup: lookup}
	return p.parse(data)
}

// Server returns the server called name.
func (c *Config) Server(name string) (*Server, bool) {
	for _, s := range c.Servers {
		if s.Name == name {
			return s, true
		}
	}
	return nil, false
}

// Pool returns the pool's description of s.
func (s *Server) Pool() *pool.Server {
	return &pool.Server{
		Name: s.Name, URL: s.URL, Headers: s.Headers,
		Command: s.Command, Args: s.Args, Env: s.Env, Dir: s.Dir,
		ProtocolVersion: s.ProtocolVersion, OAuth: s.OAuth, MaxResultBytes: s.MaxResultBytes,
	}
}

// Server types.
const (
	TypeHTTP  = "http"
	TypeStdio = "stdio"
)

// protocolVersions are the MCP protocol versions a server may be pinned to.
var protocolVersions = []string{pool.Protocol20260728, pool.Protocol20251125, "2025-06-18", "2025-03-26"}

// serverName is what a server may be called: its name becomes part of the
// model-facing tool names (e.g. "packrat__store_note"), and providers allow
// only these characters there.
var serverName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

const serverNameRule = "names must match ^[a-zA-Z0-9_-]{1,64}$ because they become part of tool names"

// Field names, in the order they are checked and listed in errors.
var (
	serverFields = []string{"type", "url", "headers", "command", "args", "env", "cwd", "envFile", "protocolVersion", "disabled", "timeout", "maxResultBytes", "dev", "alwaysAllow", "autoApprove", "oauth", "allowedTools", "disabledTools", "includeTools", "excludeTools"}
	httpFields   = []string{"url", "headers", "oauth"}
	stdioFields  = []string{"command", "args", "env", "cwd", "envFile"}
)

// ignoredFields are other clients' fields that mean nothing to a runtime
// with no approval prompt and no debugger, and why.
var ignoredFields = map[string]string{
	"dev":         "VS Code's development settings (watch, debug) are for an editor",
	"alwaysAllow": "switchboard never asks before running a tool",
	"autoApprove": "switchboard never asks before running a tool",
}

// maxTimeout bounds "timeout": a day is past any call worth waiting for.
const maxTimeout = 24 * time.Hour

// reservedHeaders are set by the transport itself: a fixed session id or
// protocol version in the config would break every reconnect.
var reservedHeaders = []string{"Mcp-Session-Id", "Mcp-Protocol-Version"}

// hints answer the misspellings and near-misses seen in real configs.
var hints = map[string]string{
	"mcp":       `; "mcp" wraps the servers in VS Code's settings.json, but mcp.json has "servers" at the top level`,
	"serverUrl": `; did you mean "url"?`,
	"httpUrl":   `; did you mean "url"?`,
	// Claude Code's --allowedTools/--disallowedTools and Roo Code's
	// proposed "onlyAllow" are the same ideas under other names.
	"disallowedTools": `; did you mean "disabledTools"?`,
	"enabledTools":    `; did you mean "allowedTools"?`,
	"onlyAllow":       `; did you mean "allowedTools"?`,
}

type parser struct {
	file    string
	lookup  func(string) (string, bool)
	ignored []string
}

func (p *parser) fail(server, field, value, format string, args ...any) error {
	return &ConfigError{File: p.file, Server: server, Field: field, Value: value, Msg: fmt.Sprintf(format, args...)}
}

// walkErr turns an error from [members] into a ConfigError. Duplicates are
// reported by the callers, which know what the key names; anything else
// cannot happen in JSON that passed [syntaxError].
func (p *parser) walkErr(server string, err error) error {
	return &ConfigError{File: p.file, Server: server, Msg: "invalid JSON", Err: err}
}

func (p *parser) parse(data []byte) (*Config, error) {
	// Editors on Windows may save a byte order mark, which encoding/json
	// rejects; it is not part of the content.
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	if line, col, err := strictjson.SyntaxError(data); err != nil {
		return nil, &ConfigError{File: p.file, Line: line, Col: col, Msg: "invalid JSON", Err: err}
	}
	if k := strictjson.Kind(data); k != "object" {
		return nil, p.fail("", "", "", "want a JSON object at the top level, got %s", k)
	}
	ms, err := strictjson.Members(data)
	if dup, ok := errors.AsType[*strictjson.DuplicateKeyError](err); ok {
		return nil, p.fail("", dup.Key, "", "duplicate field")
	} else if err != nil {
		return nil, p.walkErr("", err)
	}

	var section strictjson.Member // "mcpServers" or "servers"
	for _, m := range ms {
		switch m.Key {
		case "mcpServers", "servers":
			if section.Key != "" {
				return nil, p.fail("", "", "", `has both "mcpServers" and "servers"; use one`)
			}
			section = m
		case "inputs":
			if k := strictjson.Kind(m.Raw); k != "array" {
				return nil, p.fail("", m.Key, string(m.Raw), "want an array, got %s", k)
			}
		default:
			return nil, p.fail("", m.Key, "", `unknown field; want "mcpServers" (Claude Desktop, Claude Code, Cursor) or "servers" (VS Code)%s`,
				hint(m.Key, "mcpServers", "servers", "inputs"))
		}
	}

	cfg := &Config{Path: p.file}
	defer func() { cfg.Ignored = p.ignored }()
	if section.Key == "" {
		return cfg, nil
	}
	if k := strictjson.Kind(section.Raw); k != "object" {
		return nil, p.fail("", section.Key, string(section.Raw), "want an object of servers by name, got %s", k)
	}
	ms, err = strictjson.Members(section.Raw)
	if dup, ok := errors.AsType[*strictjson.DuplicateKeyError](err); ok {
		return nil, p.fail(dup.Key, "", "", "defined twice in %q", section.Key)
	} else if err != nil {
		return nil, p.walkErr("", err)
	}
	for _, m := range ms {
		switch {
		case m.Key == "":
			return nil, p.fail("", section.Key, "", "empty server name; %s", serverNameRule)
		case !serverName.MatchString(m.Key):
			return nil, p.fail(m.Key, "", m.Key, "invalid server name; %s", serverNameRule)
		}
		sp := &serverParser{parser: p, name: m.Key}
		s, err := sp.parse(m.Raw)
		if err != nil {
			return nil, err
		}
		if s != nil {
			cfg.Servers = append(cfg.Servers, s)
		}
	}
	return cfg, nil
}

// hint suggests a known field for key, or returns "".
func hint(key string, known ...string) string {
	if h, ok := hints[key]; ok {
		return h
	}
	for _, k := range known {
		if strings.EqualFold(key, k) {
			return fmt.Sprintf("; did you mean %q?", k)
		}
	}
	return ""
}

// serverParser parses one server entry.
type serverParser struct {
	*parser
	name string
}

func (sp *serverParser) fail(field, value, format string, args ...any) error {
	return sp.parser.fail(sp.name, field, value, format, args...)
}

// A kv is one entry of "headers" or "env", in file order.
type kv struct{ key, value string }

// parse returns the server, or nil for a disabled one.
func (sp *serverParser) parse(raw json.RawMessage) (*Server, error) {
	if k := strictjson.Kind(raw); k != "object" {
		return nil, sp.fail("", string(raw), "want an object, got %s", k)
	}
	ms, err := strictjson.Members(raw)
	if dup, ok := errors.AsType[*strictjson.DuplicateKeyError](err); ok {
		return nil, sp.fail(dup.Key, "", "duplicate field")
	} else if err != nil {
		return nil, sp.walkErr(sp.name, err)
	}

	// First the shape: known fields with the right JSON types.
	var (
		has       = make(map[string]bool)
		str       = make(map[string]string) // the string-valued fields
		args      []string
		headers   []kv
		env       []kv
		disabled  bool
		timeout   time.Duration
		maxResult int64
		oauth     *pool.OAuthConfig
		filters   []filterList
	)
	for _, m := range ms {
		has[m.Key] = true
		var err error
		switch m.Key {
		case "type", "url", "command", "protocolVersion", "cwd", "envFile":
			str[m.Key], err = sp.str(m.Key, m.Raw)
		case "timeout":
			timeout, err = sp.timeout(m.Raw)
		case "maxResultBytes":
			maxResult, err = sp.maxResultBytes(m.Raw)
		case "oauth":
			oauth, err = sp.oauth(m.Raw)
		case "alwaysAllow", "autoApprove":
			_, err = sp.strs(m)
		case "allowedTools", "disabledTools", "includeTools", "excludeTools":
			var names []string
			if names, err = sp.strs(m); err == nil {
				filters = append(filters, filterList{field: m.Key, raw: string(m.Raw), names: names})
			}
		case "dev":
			if k := strictjson.Kind(m.Raw); k != "object" {
				err = sp.fail(m.Key, string(m.Raw), "want an object, got %s", k)
			}
		case "args":
			args, err = sp.strs(m)
		case "headers":
			headers, err = sp.strMap(m)
		case "env":
			env, err = sp.strMap(m)
		case "disabled":
			if k := strictjson.Kind(m.Raw); k != "boolean" {
				err = sp.fail(m.Key, string(m.Raw), "want true or false, got %s", k)
			} else {
				disabled = bytes.HasPrefix(m.Raw, []byte("true"))
			}
		default:
			err = sp.fail(m.Key, "", "unknown field; known fields are %s%s",
				strings.Join(serverFields, ", "), hint(m.Key, serverFields...))
		}
		if err != nil {
			return nil, err
		}
	}
	if disabled {
		return nil, nil
	}
	for _, m := range ms {
		if why, ok := ignoredFields[m.Key]; ok {
			sp.ignored = append(sp.ignored, fmt.Sprintf("%s: server %q: field %q is ignored: %s", sp.file, sp.name, m.Key, why))
		}
	}

	// Then the transport, and fields that do not belong to it.
	typ, why, err := sp.transport(has, str["type"])
	if err != nil {
		return nil, err
	}
	own, other, label := httpFields, stdioFields, "Streamable HTTP"
	if typ == TypeStdio {
		own, other, label = stdioFields, httpFields, "stdio"
	}
	for _, f := range other {
		if has[f] {
			return nil, sp.fail(f, str[f], "not allowed on a %s server (%s)", label, why)
		}
	}
	if !has[own[0]] {
		return nil, sp.fail("", "", "type %q requires %q", str["type"], own[0])
	}

	// Then the values.
	s := &Server{Name: sp.name, Type: typ, Timeout: timeout, MaxResultBytes: maxResult, OAuth: oauth}
	if s.AllowedTools, s.DisabledTools, err = sp.toolFilter(filters); err != nil {
		return nil, err
	}
	if v, ok := str["protocolVersion"]; ok {
		if !slices.Contains(protocolVersions, v) {
			return nil, sp.fail("protocolVersion", v, "unsupported protocol version %q; want one of %q", v, protocolVersions)
		}
		s.ProtocolVersion = v
	}
	if typ == TypeHTTP {
		if s.URL, err = sp.url(str["url"]); err != nil {
			return nil, err
		}
		s.Headers, err = sp.headers(headers)
		return s, err
	}
	if s.Command, err = sp.expand("command", str["command"]); err != nil {
		return nil, err
	}
	if s.Command == "" {
		return nil, sp.fail("command", str["command"], "command is empty")
	}
	for i, a := range args {
		v, err := sp.expand(fmt.Sprintf("args[%d]", i), a)
		if err != nil {
			return nil, err
		}
		s.Args = append(s.Args, v)
	}
	if v, ok := str["cwd"]; ok {
		if s.Dir, err = sp.dir(v); err != nil {
			return nil, err
		}
	}
	if v, ok := str["envFile"]; ok {
		fromFile, err := sp.envFile(v)
		if err != nil {
			return nil, err
		}
		// "env" wins over the file: it is the more specific of the two.
		env = append(fromFile, env...)
	}
	s.Env, err = sp.env(env)
	return s, err
}

// timeout reads "timeout": seconds, a positive number up to maxTimeout.
func (sp *serverParser) timeout(raw json.RawMessage) (time.Duration, error) {
	var secs float64
	if strictjson.Kind(raw) != "number" || json.Unmarshal(raw, &secs) != nil {
		return 0, sp.fail("timeout", string(raw), "want a number of seconds, got %s", strictjson.Kind(raw))
	}
	d := time.Duration(secs * float64(time.Second))
	if secs <= 0 || d > maxTimeout {
		return 0, sp.fail("timeout", string(raw), "want seconds between 0 and %d, got %v", int(maxTimeout.Seconds()), secs)
	}
	return d, nil
}

// The bounds of "maxResultBytes": an answer under 1 KiB is an error
// message, and one past 1 GiB is no tool result a process should hold.
const (
	minMaxResultBytes = 1 << 10
	maxMaxResultBytes = 1 << 30
)

// maxResultBytes reads "maxResultBytes": an integer number of bytes.
func (sp *serverParser) maxResultBytes(raw json.RawMessage) (int64, error) {
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if strictjson.Kind(raw) != "number" || err != nil || n < minMaxResultBytes || n > maxMaxResultBytes {
		got := strictjson.Kind(raw)
		if got == "number" {
			got = string(raw)
		}
		return 0, sp.fail("maxResultBytes", string(raw), "want an integer number of bytes from %d to %d, got %s", minMaxResultBytes, maxMaxResultBytes, got)
	}
	return n, nil
}

// base is the folder relative paths in the file are taken from: the
// mcp.json's own.
func (sp *serverParser) base() string { return filepath.Dir(sp.file) }

// dir reads "cwd": an existing directory, relative to the mcp.json.
func (sp *serverParser) dir(raw string) (string, error) {
	v, err := sp.expand("cwd", raw)
	if err != nil {
		return "", err
	}
	if v == "" {
		return "", sp.fail("cwd", raw, "cwd is empty")
	}
	if !filepath.IsAbs(v) {
		v = filepath.Join(sp.base(), v)
	}
	abs, err := filepath.Abs(v)
	if err != nil {
		return "", &ConfigError{File: sp.file, Server: sp.name, Field: "cwd", Value: raw, Msg: "invalid directory", Err: err}
	}
	fi, err := os.Stat(abs)
	switch {
	case err != nil:
		return "", &ConfigError{File: sp.file, Server: sp.name, Field: "cwd", Value: raw, Msg: fmt.Sprintf("directory %s", abs), Err: errors.Unwrap(err)}
	case !fi.IsDir():
		return "", sp.fail("cwd", raw, "%s is not a directory", abs)
	}
	return abs, nil
}

// envFile reads "envFile": NAME=value lines (blank lines and # comments
// skipped, "export " and one pair of surrounding quotes dropped), relative
// to the mcp.json. The values are taken as written: they are not expanded.
func (sp *serverParser) envFile(raw string) ([]kv, error) {
	path, err := sp.expand("envFile", raw)
	if err != nil {
		return nil, err
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(sp.base(), path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &ConfigError{File: sp.file, Server: sp.name, Field: "envFile", Value: raw, Msg: "cannot read " + path, Err: errors.Unwrap(err)}
	}
	var out []kv
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		k, v, ok := strings.Cut(line, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" || strings.ContainsAny(k, " \t") {
			// The line may hold a secret: name its number, not its text.
			return nil, sp.fail("envFile", raw, "%s:%d: want NAME=value", path, i+1)
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		// "$$" keeps a literal "$" through env's expansion.
		out = append(out, kv{k, strings.ReplaceAll(v, "$", "$$")})
	}
	return out, nil
}

// transport decides the server's Type from its explicit "type" or, without
// one, from whether it has "url" or "command". why says which, for errors.
func (sp *serverParser) transport(has map[string]bool, typ string) (t, why string, err error) {
	if !has["type"] {
		switch {
		case has["url"] && has["command"]:
			return "", "", sp.fail("", "", `has both "url" and "command"; use "url" for Streamable HTTP or "command" for stdio, not both`)
		case has["url"]:
			return TypeHTTP, `it has "url"`, nil
		case has["command"]:
			return TypeStdio, `it has "command"`, nil
		}
		return "", "", sp.fail("", "", `has neither "url" (Streamable HTTP) nor "command" (stdio)`)
	}
	switch typ {
	case "http", "streamable-http":
		return TypeHTTP, fmt.Sprintf("type %q", typ), nil
	case "stdio":
		return TypeStdio, `type "stdio"`, nil
	case "sse":
		return "", "", sp.fail("type", typ, `SSE transport is not supported; use Streamable HTTP (the server's Streamable HTTP endpoint as "url", with "type": "http" or no type)`)
	}
	return "", "", sp.fail("type", typ, `unknown type %q; want "stdio", "http" or "streamable-http"`, typ)
}

func (sp *serverParser) str(field string, raw json.RawMessage) (string, error) {
	if k := strictjson.Kind(raw); k != "string" {
		return "", sp.fail(field, string(raw), "want a string, got %s", k)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", &ConfigError{File: sp.file, Server: sp.name, Field: field, Value: string(raw), Msg: "invalid string", Err: err}
	}
	return s, nil
}

func (sp *serverParser) strs(m strictjson.Member) ([]string, error) {
	var raws []json.RawMessage
	if strictjson.Kind(m.Raw) != "array" || json.Unmarshal(m.Raw, &raws) != nil {
		return nil, sp.fail(m.Key, string(m.Raw), "want an array of strings, got %s", strictjson.Kind(m.Raw))
	}
	out := make([]string, 0, len(raws))
	for i, raw := range raws {
		s, err := sp.str(fmt.Sprintf("%s[%d]", m.Key, i), raw)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// strMap decodes an object of strings, keeping file order so that errors
// are reported for the first bad entry in the file.
func (sp *serverParser) strMap(m strictjson.Member) ([]kv, error) {
	if k := strictjson.Kind(m.Raw); k != "object" {
		return nil, sp.fail(m.Key, string(m.Raw), "want an object of strings, got %s", k)
	}
	ms, err := strictjson.Members(m.Raw)
	if dup, ok := errors.AsType[*strictjson.DuplicateKeyError](err); ok {
		return nil, sp.fail(m.Key+"."+dup.Key, "", "duplicate key")
	} else if err != nil {
		return nil, sp.walkErr(sp.name, err)
	}
	out := make([]kv, 0, len(ms))
	for _, e := range ms {
		v, err := sp.str(m.Key+"."+e.Key, e.Raw)
		if err != nil {
			return nil, err
		}
		out = append(out, kv{e.Key, v})
	}
	return out, nil
}

// expand expands the variables in the value of field.
func (sp *serverParser) expand(field, value string) (string, error) {
	v, err := expand(value, sp.lookup)
	if err != nil {
		return "", sp.fail(field, value, "%s", err)
	}
	return v, nil
}

func (sp *serverParser) url(raw string) (string, error) {
	v, err := sp.expand("url", raw)
	if err != nil {
		return "", err
	}
	u, err := url.Parse(v)
	if err != nil {
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err // ue repeats the URL, which Msg already quotes
		}
		return "", &ConfigError{File: sp.file, Server: sp.name, Field: "url", Value: raw, Msg: fmt.Sprintf("invalid URL %q", v), Err: err}
	}
	// Redacted hides a password in the URL; the rest helps find the mistake.
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return "", sp.fail("url", raw, "URL %q must start with http:// or https://", u.Redacted())
	case u.Host == "":
		return "", sp.fail("url", raw, "URL %q has no host", u.Redacted())
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return "", sp.fail("url", raw, "URL %q: port %s is out of range (1-65535)", u.Redacted(), port)
		}
	}
	return v, nil
}

func (sp *serverParser) headers(entries []kv) (map[string]string, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(entries))
	canon := make(map[string]string) // lower-case name -> name as written
	for _, e := range entries {
		field := "headers." + e.key
		if !isToken(e.key) {
			return nil, sp.fail("headers", e.key, "invalid header name %q", e.key)
		}
		for _, r := range reservedHeaders {
			if strings.EqualFold(e.key, r) {
				return nil, sp.fail(field, e.value, "%s is set by the transport and cannot be configured", r)
			}
		}
		if prev, ok := canon[strings.ToLower(e.key)]; ok {
			return nil, sp.fail(field, e.value, "same header as %q (header names are case-insensitive)", prev)
		}
		canon[strings.ToLower(e.key)] = e.key
		v, err := sp.expand(field, e.value)
		if err != nil {
			return nil, err
		}
		// The expanded value may be a secret, so it is not quoted.
		if strings.ContainsFunc(v, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) {
			return nil, sp.fail(field, e.value, "value contains a control character such as a newline (after expansion)")
		}
		out[e.key] = v
	}
	return out, nil
}

func (sp *serverParser) env(entries []kv) (map[string]string, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(entries))
	for _, e := range entries {
		if e.key == "" || strings.ContainsAny(e.key, "=\x00") {
			return nil, sp.fail("env", e.key, "invalid variable name %q", e.key)
		}
		v, err := sp.expand("env."+e.key, e.value)
		if err != nil {
			return nil, err
		}
		out[e.key] = v
	}
	return out, nil
}

// isToken reports whether s is a valid HTTP header name (RFC 9110, 5.6.2).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}
