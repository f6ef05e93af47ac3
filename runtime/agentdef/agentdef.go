// Package agentdef loads agent definitions: a folder agents/<name>/ holding
// agent.json and, optionally, tools/mcp.json, the MCP servers (sibling
// agents, or any MCP server) the agent may delegate to, in the format of
// package mcpconfig.
//
//	def, err := agentdef.Load("agents/packrat")
//	var ce *mcpconfig.ConfigError
//	if errors.As(err, &ce) {
//		// ce.File, ce.Field, ce.Value: what to fix, in either file
//	}
//
// [Load] takes tools/mcp.json's ${VARIABLES} from the environment,
// [LoadWith] from a function; [LoadAll] loads every agent folder of a
// directory. The [Definition] is what runtime.New runs.
//
// agent.json looks like this (only name and description are required):
//
//	{
//	  "name": "packrat",
//	  "description": "Keeps notes and finds them again.",
//	  "instructions": "You are packrat, ...",
//	  "model": {"base_url": "", "name": "builtin", "api_key_env": "OPENAI_API_KEY", "max_retries": 2,
//	            "prices": {"gpt-4o-mini": {"input": 0.15, "cached_input": 0.075, "output": 0.60}}},
//	  "tools": ["packrat"],
//	  "max_steps": 10,
//	  "max_depth": 4,
//	  "max_calls_per_step": 16,
//	  "max_calls_per_turn": 64,
//	  "call_timeout": 120,
//	  "allow_stdio": false,
//	  "elicit": false,
//	  "context": {"max_tool_result_bytes": 65536, "max_tool_results_bytes": 196608, "max_tools": 128}
//	}
//
// The name must be the folder's name and match ^[a-z][a-z0-9-]{0,31}$
// (it is also the agent's URL path and the prefix of the tool names other
// agents see); the description is what other agents read to decide when to
// delegate. The fields are documented on [Definition] and [Model], their
// bounds in the constants below. model.prices gives each model's price in
// USD per million tokens ([Price]: input and output required, cached_input
// optional), as providers publish them; "context" bounds what a turn puts
// into the model's context ([Context]; an absent member is the runtime's
// default).
//
// An agent that runs on another host is a folder holding only an
// agent.json that gives its url (and, optionally, the environment variable
// holding the bearer token the studio sends it):
//
//	{
//	  "name": "packrat",
//	  "description": "Keeps notes and finds them again.",
//	  "url": "http://${PACKRAT_HOST:-packrat.default.svc}:8080/mcp",
//	  "token_env": "PACKRAT_TOKEN"
//	}
//
// The studio proxies to it and starts no process for it ([Definition.Remote]).
// Its url takes ${VARIABLES} as tools/mcp.json's do, must be http:// or
// https:// and carry no user info (a credential goes in token_env). Only
// name, description (optional for it), url and token_env are allowed: what
// else an agent.json says (its model, tools, instructions, bounds) and its
// tools/mcp.json are read where the agent runs, so here they would be
// ignored, and are an error that says so instead.
//
// As with mcp.json, unknown fields, duplicate fields and values of the wrong
// type are errors that name the file, the field and the value: a typo that
// was ignored would quietly run the agent with a default. Every such error,
// in agent.json or tools/mcp.json, is a [*mcpconfig.ConfigError].
package agentdef

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/internal/strictjson"
	"github.com/switchboard-run/switchboard/pool/mcpconfig"
)

// Definition is one agent.
type Definition struct {
	Dir          string // the agent's folder
	Name         string
	Description  string
	Instructions string
	Model        Model
	// Tools names the native toolsets (Go code registered in package agents)
	// this agent offers, e.g. ["packrat"].
	Tools []string
	// MaxSteps bounds the model turn loop (default 10).
	MaxSteps int
	// MaxDepth bounds the delegation chain this agent accepts (default
	// delegation.DefaultMaxDepth).
	MaxDepth int
	// MaxCallsPerStep and MaxCallsPerTurn bound the delegations one model
	// step, and one whole turn, may make (defaults DefaultMaxCallsPerStep
	// and DefaultMaxCallsPerTurn): a model, or a task written to make it,
	// must not fan out into thousands of calls.
	MaxCallsPerStep int
	MaxCallsPerTurn int
	// CallTimeout bounds each delegation to a sibling ("call_timeout", in
	// seconds); zero: none of its own, the turn's deadline only. A
	// server's mcp.json "timeout" takes precedence for calls to that
	// server. A sibling that hangs or drips would otherwise hold the turn
	// until its caller gives up.
	CallTimeout time.Duration
	// AllowStdio permits starting stdio servers declared in tools/mcp.json.
	AllowStdio bool
	// Elicit lets the servers this agent calls ask its caller
	// (elicitation/create, forwarded up the delegation chain to the person
	// who asked). Default false: a server reaches the person only through
	// agents that say so, and without it a server's request is declined.
	Elicit bool
	// Context bounds what a turn puts into the model's context; its zero
	// fields are the runtime's defaults.
	Context Context
	// MCP is tools/mcp.json; an agent without one has an empty Config.
	MCP *mcpconfig.Config

	// URL is the MCP endpoint of an agent that runs on another host, with
	// its ${VARIABLES} expanded; empty for an agent the studio runs. See
	// [Definition.Remote].
	URL string
	// TokenEnv names the environment variable whose value the studio
	// sends to the agent at URL as its bearer token; empty: none is sent.
	// Only the name is read here: the studio looks the value up when it
	// starts, so that loading a definition never needs the secret.
	TokenEnv string
}

// Remote reports whether the agent runs on another host: its agent.json
// gives a url, which the studio proxies to without starting a process.
func (d *Definition) Remote() bool { return d.URL != "" }

// Context is agent.json's "context": how much of what the tools return,
// and how many tools, go to the model in one request. A zero field means
// the runtime's default (runtime.DefaultMaxToolResultBytes and the
// others). What is cut is cut from the model's copy only: the turn's
// record keeps every result whole.
type Context struct {
	// MaxToolResultBytes bounds the text of one tool result in a request.
	MaxToolResultBytes int
	// MaxToolResultsBytes bounds the text of all the tool results in one
	// request, those of earlier steps included.
	MaxToolResultsBytes int
	// MaxTools bounds the tools offered to the model in one request.
	MaxTools int
}

// Model says which model drives the agent's turn.
type Model struct {
	// BaseURL of an OpenAI-compatible API; empty means the builtin model.
	BaseURL string
	// Name of the model, e.g. "gpt-4o-mini", "llama3.1", or "builtin".
	Name string
	// APIKeyEnv names the environment variable holding the API key.
	APIKeyEnv string
	// MaxRetries is how many times a failed model request of one step is
	// sent again (a 429, a 5xx, a reset or refused connection); nil means
	// the runtime's default. From 0 to MaxMaxRetries.
	MaxRetries *int
	// Prices are what each model's tokens cost, by model name, so that a
	// turn's Usage says what it cost in USD. A model without a price costs
	// nothing on the bill (it is not known, not free).
	Prices map[string]Price
}

// Price is what a model's tokens cost, in USD per million tokens, as
// providers publish them ("$0.15 / 1M input tokens").
type Price struct {
	Input float64
	// CachedInput is the price of the prompt tokens the provider served
	// from its cache; nil means they cost Input.
	CachedInput *float64
	Output      float64
}

// Defaults and limits of agent.json.
const (
	DefaultModel    = "builtin"
	DefaultMaxSteps = 10
	MaxMaxSteps     = 100
	MaxMaxDepth     = delegation.MaxChainDepth
	// A step of a careful plan calls a handful of tools; a turn, a few
	// dozen.
	DefaultMaxCallsPerStep = 16
	DefaultMaxCallsPerTurn = 64
	MaxMaxCalls            = 1000
	// MaxMaxRetries bounds model.max_retries: past a few retries with
	// backoff an endpoint is down, and the person who asked is waiting.
	MaxMaxRetries = 10
	// The bounds of "context". A tool result under 1 KiB is too little
	// for a model to act on; 16 MiB (64 MiB for all of a request's) is
	// past any model's context, so a larger number is a mistake. MaxMaxTools
	// is the pool's cap of tools kept per server.
	MinContextBytes        = 1 << 10
	MaxMaxToolResultBytes  = 16 << 20
	MaxMaxToolResultsBytes = 64 << 20
	MaxMaxTools            = 2000
	// MaxCallTimeout bounds "call_timeout", as mcp.json's "timeout" is: a
	// day is past any call worth waiting for.
	MaxCallTimeout = 24 * time.Hour
)

// File names inside an agent's folder.
const (
	DefinitionFile = "agent.json"
	MCPFile        = "tools/mcp.json" // slash-separated; see [Load]
)

// agentName is what an agent may be called; the name is also its folder,
// its URL path and part of the tool names other agents see.
var agentName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)

var (
	fields = []string{"name", "description", "instructions", "model", "tools", "max_steps", "max_depth", "max_calls_per_step", "max_calls_per_turn", "call_timeout", "allow_stdio", "elicit", "context", "url", "token_env"}
	// remoteFields are the fields an agent.json with a url may have.
	remoteFields  = []string{"name", "description", "url", "token_env"}
	modelFields   = []string{"base_url", "name", "api_key_env", "max_retries", "prices"}
	priceFields   = []string{"input", "cached_input", "output"}
	contextFields = []string{"max_tool_result_bytes", "max_tool_results_bytes", "max_tools"}
)

// Load reads the agent in dir: dir/agent.json and, if present,
// dir/tools/mcp.json. An error in either file is a [*mcpconfig.ConfigError]
// naming the file, and the field and value at fault; a missing agent.json
// is one too, wrapping [fs.ErrNotExist].
func Load(dir string) (*Definition, error) { return LoadWith(dir, os.LookupEnv) }

// LoadWith is Load with tools/mcp.json's variables looked up by lookup.
func LoadWith(dir string, lookup func(string) (string, bool)) (*Definition, error) {
	path := filepath.Join(dir, DefinitionFile)
	data, err := os.ReadFile(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is already in File
		}
		return nil, &mcpconfig.ConfigError{File: path, Msg: "cannot read file", Err: err}
	}
	folder := filepath.Base(filepath.Clean(dir))
	if abs, err := filepath.Abs(dir); err == nil {
		folder = filepath.Base(abs) // so that Load(".") knows its name
	}
	d, err := parse(path, folder, data, lookup)
	if err != nil {
		return nil, err
	}
	d.Dir = dir

	mcpPath := filepath.Join(dir, filepath.FromSlash(MCPFile))
	if d.Remote() {
		// Its siblings are configured where it runs: a tools/mcp.json
		// here would be silently ignored.
		if _, err := os.Stat(mcpPath); !errors.Is(err, fs.ErrNotExist) {
			return nil, &mcpconfig.ConfigError{File: mcpPath, Value: d.URL,
				Msg: fmt.Sprintf("agent %q runs elsewhere (its agent.json gives a url), so its tools/mcp.json is read on its own host, not here; remove this file", d.Name)}
		}
		d.MCP = &mcpconfig.Config{Path: mcpPath}
		return d, nil
	}
	d.MCP, err = mcpconfig.LoadWith(mcpPath, lookup)
	if errors.Is(err, fs.ErrNotExist) {
		d.MCP, err = &mcpconfig.Config{Path: mcpPath}, nil
	}
	if err != nil {
		return nil, err
	}
	return d, nil
}

// LoadAll loads every agents/<name>/ under agentsDir that has an agent.json,
// sorted by name. Other folders (Go packages, for example) are skipped. The
// first agent that fails to load fails LoadAll; its error names the file.
func LoadAll(agentsDir string) ([]*Definition, error) { return LoadAllWith(agentsDir, os.LookupEnv) }

// LoadAllWith is LoadAll with tools/mcp.json's variables looked up by lookup.
func LoadAllWith(agentsDir string, lookup func(string) (string, bool)) ([]*Definition, error) {
	entries, err := os.ReadDir(agentsDir) // sorted by file name, which is the agent name
	if err != nil {
		return nil, err
	}
	var defs []*Definition
	for _, e := range entries {
		dir := filepath.Join(agentsDir, e.Name())
		// Stat rather than e.IsDir, so that a symlinked agent folder counts.
		if info, err := os.Stat(dir); err != nil || !info.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, DefinitionFile)); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		d, err := LoadWith(dir, lookup)
		if err != nil {
			return nil, err
		}
		defs = append(defs, d)
	}
	return defs, nil
}

// CheckServer reports whether the agent may start s: a stdio server runs a
// local process, which an agent must opt into with allow_stdio. The error
// matches [ErrStdioNotAllowed]. A stdio server in tools/mcp.json is not a
// load error, so that the rest of the agent keeps working without it.
func (d *Definition) CheckServer(s *mcpconfig.Server) error {
	if s.Type == mcpconfig.TypeStdio && !d.AllowStdio {
		return &stdioError{agent: d.Name, server: s.Name}
	}
	return nil
}

// parser parses one agent.json.
type parser struct{ file string }

func (p *parser) fail(field, value, format string, args ...any) error {
	return &mcpconfig.ConfigError{File: p.file, Field: field, Value: value, Msg: fmt.Sprintf(format, args...)}
}

// parse parses data as the agent.json at path in the folder named folder,
// with url's variables looked up by lookup.
func parse(path, folder string, data []byte, lookup func(string) (string, bool)) (*Definition, error) {
	p := &parser{file: path}
	if line, col, err := strictjson.SyntaxError(data); err != nil {
		return nil, &mcpconfig.ConfigError{File: path, Line: line, Col: col, Msg: "invalid JSON", Err: err}
	}
	ms, err := p.object("", data)
	if err != nil {
		return nil, err
	}

	d := &Definition{MaxSteps: DefaultMaxSteps, MaxDepth: delegation.DefaultMaxDepth,
		MaxCallsPerStep: DefaultMaxCallsPerStep, MaxCallsPerTurn: DefaultMaxCallsPerTurn}
	has := make(map[string]bool)
	for _, m := range ms {
		has[m.Key] = true
		var err error
		switch m.Key {
		case "name":
			d.Name, err = p.str(m.Key, m.Raw)
		case "description":
			d.Description, err = p.str(m.Key, m.Raw)
		case "instructions":
			d.Instructions, err = p.str(m.Key, m.Raw)
		case "model":
			d.Model, err = p.model(m.Raw)
		case "tools":
			d.Tools, err = p.tools(m.Raw)
		case "max_steps":
			d.MaxSteps, err = p.int(m.Key, m.Raw, 1, MaxMaxSteps)
		case "max_depth":
			d.MaxDepth, err = p.int(m.Key, m.Raw, 1, MaxMaxDepth)
		case "max_calls_per_step":
			d.MaxCallsPerStep, err = p.int(m.Key, m.Raw, 1, MaxMaxCalls)
		case "max_calls_per_turn":
			d.MaxCallsPerTurn, err = p.int(m.Key, m.Raw, 1, MaxMaxCalls)
		case "call_timeout":
			d.CallTimeout, err = p.seconds(m.Key, m.Raw, MaxCallTimeout)
		case "allow_stdio":
			d.AllowStdio, err = p.bool(m.Key, m.Raw)
		case "elicit":
			d.Elicit, err = p.bool(m.Key, m.Raw)
		case "context":
			d.Context, err = p.context(m.Raw)
		case "url":
			d.URL, err = p.remoteURL(m.Raw, lookup)
		case "token_env":
			d.TokenEnv, err = p.str(m.Key, m.Raw)
			if err == nil && !mcpconfig.ValidVarName(d.TokenEnv) {
				err = p.fail(m.Key, d.TokenEnv, "invalid environment variable name %q; want letters, digits and _, not starting with a digit", d.TokenEnv)
			}
		default:
			err = p.unknown("", m.Key, fields)
		}
		if err != nil {
			return nil, err
		}
	}

	if has["url"] {
		// Every field but these is read where the agent runs.
		for _, m := range ms {
			if !slices.Contains(remoteFields, m.Key) {
				return nil, p.fail(m.Key, "", "agent runs elsewhere (it gives a url): %s is set in the agent.json on its own host, not here; an agent.json with a url may have only %s", m.Key, strings.Join(remoteFields, ", "))
			}
		}
	} else if has["token_env"] {
		return nil, p.fail("token_env", d.TokenEnv, "is the bearer token for an agent on another host, and needs a url")
	}

	switch {
	case !has["name"]:
		return nil, p.fail("name", "", "required; it must be the folder name %q", folder)
	case !agentName.MatchString(d.Name):
		return nil, p.fail("name", d.Name, "invalid agent name %q; names must match ^[a-z][a-z0-9-]{0,31}$", d.Name)
	case d.Name != folder:
		return nil, p.fail("name", d.Name, "%q does not match the folder name %q", d.Name, folder)
	case !has["description"] && d.Remote():
		// Its own agent.json, where it runs, describes it.
	case !has["description"]:
		return nil, p.fail("description", "", "required; other agents read it to decide when to delegate")
	case strings.TrimSpace(d.Description) == "":
		return nil, p.fail("description", d.Description, "must not be empty; other agents read it to decide when to delegate")
	}
	return d, nil
}

// object returns the members of the object raw, the value of field ("" for
// the whole file).
func (p *parser) object(field string, raw json.RawMessage) ([]strictjson.Member, error) {
	if k := strictjson.Kind(raw); k != "object" {
		if field == "" {
			return nil, p.fail("", "", "want a JSON object at the top level, got %s", k)
		}
		return nil, p.fail(field, string(raw), "want an object, got %s", k)
	}
	ms, err := strictjson.Members(raw)
	if dup, ok := errors.AsType[*strictjson.DuplicateKeyError](err); ok {
		return nil, p.fail(join(field, dup.Key), "", "duplicate field")
	} else if err != nil {
		return nil, &mcpconfig.ConfigError{File: p.file, Field: field, Msg: "invalid JSON", Err: err}
	}
	return ms, nil
}

func join(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

// unknown is the error for the field key, not in known, of the object
// prefix ("" for the whole file). It suggests the known field that differs
// only in case or underscores (maxSteps, allowStdio).
func (p *parser) unknown(prefix, key string, known []string) error {
	norm := func(s string) string { return strings.ToLower(strings.ReplaceAll(s, "_", "")) }
	hint := ""
	for _, k := range known {
		if norm(k) == norm(key) {
			hint = fmt.Sprintf("; did you mean %q?", k)
		}
	}
	what := "unknown field"
	if prefix != "" {
		what = fmt.Sprintf("unknown field in %q", prefix)
	}
	return p.fail(join(prefix, key), "", "%s; known fields are %s%s", what, strings.Join(known, ", "), hint)
}

func (p *parser) str(field string, raw json.RawMessage) (string, error) {
	if k := strictjson.Kind(raw); k != "string" {
		return "", p.fail(field, string(raw), "want a string, got %s", k)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", &mcpconfig.ConfigError{File: p.file, Field: field, Value: string(raw), Msg: "invalid string", Err: err}
	}
	return s, nil
}

func (p *parser) bool(field string, raw json.RawMessage) (bool, error) {
	if k := strictjson.Kind(raw); k != "boolean" {
		return false, p.fail(field, string(raw), "want true or false, got %s", k)
	}
	return bytes.HasPrefix(raw, []byte("true")), nil
}

// int decodes an integer in [lo, hi]. An explicit value out of range is an
// error, not a request for the default.
func (p *parser) int(field string, raw json.RawMessage, lo, hi int) (int, error) {
	got := strictjson.Kind(raw)
	if got == "number" {
		got = string(raw)
		if n, err := strconv.Atoi(got); err == nil && lo <= n && n <= hi {
			return n, nil
		}
	}
	return 0, p.fail(field, string(raw), "want an integer from %d to %d, got %s", lo, hi, got)
}

// seconds decodes a number of seconds, more than 0 and at most hi.
func (p *parser) seconds(field string, raw json.RawMessage, hi time.Duration) (time.Duration, error) {
	var secs float64
	if strictjson.Kind(raw) != "number" || json.Unmarshal(raw, &secs) != nil {
		return 0, p.fail(field, string(raw), "want a number of seconds, got %s", strictjson.Kind(raw))
	}
	d := time.Duration(secs * float64(time.Second))
	if secs <= 0 || d <= 0 || d > hi {
		return 0, p.fail(field, string(raw), "want seconds more than 0 and at most %d, got %v", int(hi.Seconds()), secs)
	}
	return d, nil
}

func (p *parser) model(raw json.RawMessage) (Model, error) {
	var m Model
	ms, err := p.object("model", raw)
	if err != nil {
		return m, err
	}
	for _, e := range ms {
		field := "model." + e.Key
		var err error
		switch e.Key {
		case "base_url":
			m.BaseURL, err = p.str(field, e.Raw)
			if err == nil && m.BaseURL != "" {
				err = p.checkURL(field, m.BaseURL)
			}
		case "name":
			m.Name, err = p.str(field, e.Raw)
		case "api_key_env":
			m.APIKeyEnv, err = p.str(field, e.Raw)
			if err == nil && m.APIKeyEnv != "" && !mcpconfig.ValidVarName(m.APIKeyEnv) {
				err = p.fail(field, m.APIKeyEnv, "invalid environment variable name %q; want letters, digits and _, not starting with a digit", m.APIKeyEnv)
			}
		case "max_retries":
			var n int
			n, err = p.int(field, e.Raw, 0, MaxMaxRetries)
			m.MaxRetries = &n
		case "prices":
			m.Prices, err = p.prices(e.Raw)
		default:
			err = p.unknown("model", e.Key, modelFields)
		}
		if err != nil {
			return m, err
		}
	}
	if m.Name == "" {
		m.Name = DefaultModel
	}
	return m, nil
}

// remoteURL parses "url": the endpoint of an agent on another host. Its
// variables and its checks are tools/mcp.json's, by the one parser of
// that format (package mcpconfig), so that a url means the same in both
// files; the error is rewritten to name this file and field. User info is
// refused: it would be shown wherever the URL is, and a credential
// belongs in token_env.
func (p *parser) remoteURL(raw json.RawMessage, lookup func(string) (string, bool)) (string, error) {
	s, err := p.str("url", raw)
	if err != nil {
		return "", err
	}
	if strings.TrimSpace(s) == "" {
		return "", p.fail("url", s, "empty URL; give the agent's MCP endpoint, e.g. http://packrat.default.svc:8080/mcp")
	}
	if lookup == nil {
		lookup = os.LookupEnv
	}
	doc, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"agent": map[string]any{"url": s}}})
	cfg, err := mcpconfig.Parse(p.file, doc, lookup)
	if ce, ok := errors.AsType[*mcpconfig.ConfigError](err); ok {
		return "", &mcpconfig.ConfigError{File: p.file, Field: "url", Value: s, Msg: ce.Msg, Err: ce.Err}
	} else if err != nil {
		return "", &mcpconfig.ConfigError{File: p.file, Field: "url", Value: s, Msg: "invalid URL", Err: err}
	}
	srv, ok := cfg.Server("agent")
	if !ok {
		return "", p.fail("url", s, "invalid URL %q", s)
	}
	u, err := url.Parse(srv.URL)
	if err != nil {
		return "", p.fail("url", s, "invalid URL")
	}
	switch {
	case u.User != nil:
		return "", p.fail("url", s, "URL %q carries user info; put the agent's credential in the environment variable token_env names", u.Redacted())
	case u.Fragment != "" || u.RawFragment != "":
		return "", p.fail("url", s, "URL %q has a fragment, which is never sent", u.Redacted())
	}
	return srv.URL, nil
}

func (p *parser) checkURL(field, raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err // ue repeats the URL, which Msg already quotes
		}
		return &mcpconfig.ConfigError{File: p.file, Field: field, Value: raw, Msg: fmt.Sprintf("invalid URL %q", raw), Err: err}
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return p.fail(field, raw, "URL %q must start with http:// or https://", u.Redacted())
	case u.Host == "":
		return p.fail(field, raw, "URL %q has no host", u.Redacted())
	}
	return nil
}

func (p *parser) tools(raw json.RawMessage) ([]string, error) {
	var raws []json.RawMessage
	if strictjson.Kind(raw) != "array" || json.Unmarshal(raw, &raws) != nil {
		return nil, p.fail("tools", string(raw), "want an array of strings, got %s", strictjson.Kind(raw))
	}
	tools := make([]string, 0, len(raws))
	for i, r := range raws {
		field := fmt.Sprintf("tools[%d]", i)
		s, err := p.str(field, r)
		switch {
		case err != nil:
			return nil, err
		case s == "":
			return nil, p.fail(field, s, "empty toolset name")
		case slices.Contains(tools, s):
			return nil, p.fail(field, s, "duplicate toolset %q", s)
		}
		tools = append(tools, s)
	}
	return tools, nil
}

// context parses "context". One tool result may not be larger than all of
// them together: the smaller bound would silently win.
func (p *parser) context(raw json.RawMessage) (Context, error) {
	var c Context
	ms, err := p.object("context", raw)
	if err != nil {
		return c, err
	}
	for _, e := range ms {
		field := "context." + e.Key
		var err error
		switch e.Key {
		case "max_tool_result_bytes":
			c.MaxToolResultBytes, err = p.int(field, e.Raw, MinContextBytes, MaxMaxToolResultBytes)
		case "max_tool_results_bytes":
			c.MaxToolResultsBytes, err = p.int(field, e.Raw, MinContextBytes, MaxMaxToolResultsBytes)
		case "max_tools":
			c.MaxTools, err = p.int(field, e.Raw, 1, MaxMaxTools)
		default:
			err = p.unknown("context", e.Key, contextFields)
		}
		if err != nil {
			return c, err
		}
	}
	if c.MaxToolResultBytes != 0 && c.MaxToolResultsBytes != 0 && c.MaxToolResultBytes > c.MaxToolResultsBytes {
		return c, p.fail("context.max_tool_result_bytes", strconv.Itoa(c.MaxToolResultBytes),
			"one tool result (%d bytes) cannot be larger than all of a request's (context.max_tool_results_bytes, %d bytes)", c.MaxToolResultBytes, c.MaxToolResultsBytes)
	}
	return c, nil
}

// prices parses "model.prices": an object of model name to price.
func (p *parser) prices(raw json.RawMessage) (map[string]Price, error) {
	ms, err := p.object("model.prices", raw)
	if err != nil {
		return nil, err
	}
	prices := make(map[string]Price, len(ms))
	for _, e := range ms {
		field := "model.prices." + e.Key
		if strings.TrimSpace(e.Key) == "" {
			return nil, p.fail(field, "", "empty model name")
		}
		pr, err := p.price(field, e.Raw)
		if err != nil {
			return nil, err
		}
		prices[e.Key] = pr
	}
	return prices, nil
}

// price parses one model's price; input and output are required, so that
// a price table with a typo'd member does not bill a model's output at 0.
func (p *parser) price(field string, raw json.RawMessage) (Price, error) {
	var pr Price
	ms, err := p.object(field, raw)
	if err != nil {
		return pr, err
	}
	has := map[string]bool{}
	for _, e := range ms {
		f := field + "." + e.Key
		has[e.Key] = true
		var err error
		var v float64
		switch e.Key {
		case "input":
			pr.Input, err = p.usd(f, e.Raw)
		case "cached_input":
			v, err = p.usd(f, e.Raw)
			pr.CachedInput = &v
		case "output":
			pr.Output, err = p.usd(f, e.Raw)
		default:
			err = p.unknown(field, e.Key, priceFields)
		}
		if err != nil {
			return pr, err
		}
	}
	for _, k := range []string{"input", "output"} {
		if !has[k] {
			return pr, p.fail(join(field, k), "", "required: the price in USD per million tokens (0 for free)")
		}
	}
	return pr, nil
}

// usd decodes a price in USD per million tokens: a number, zero or more.
func (p *parser) usd(field string, raw json.RawMessage) (float64, error) {
	got := strictjson.Kind(raw)
	if got == "number" {
		got = string(raw)
		if v, err := strconv.ParseFloat(got, 64); err == nil && v >= 0 && !math.IsInf(v, 0) {
			return v, nil
		}
	}
	return 0, p.fail(field, string(raw), "want a price in USD per million tokens, a number 0 or more, got %s", got)
}
