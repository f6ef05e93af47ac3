package console

// The inspector: a page per (agent, server) for every server an agent's
// tools/mcp.json names, third-party ones included, at
// /agents/<name>/servers/<server>, and its API:
//
//	GET  /api/agents/<name>/servers                   the servers tools/mcp.json names
//	GET  /api/agents/<name>/servers/<server>          its tools (with schemas), resources, templates, prompts
//	POST /api/agents/<name>/servers/<server>/read     {"uri"}: resources/read      } checkMutation
//	POST /api/agents/<name>/servers/<server>/prompt   {"name","arguments"}: prompts/get }
//	GET  /api/agents/<name>/servers/<server>/rpc      the inspector's own recent requests and answers
//
// The studio talks to the server itself, through the studio's pool, with
// the server's entry from mcp.json (its headers, env and OAuth as the
// agent would use them; none of them is ever shown). A stdio server is
// started only for an agent that allows stdio, as the agent itself would.
// A read and a prompt run code on the server, so they are POSTs behind
// the same checks as the page's other actions.
//
// The raw JSON-RPC history is what the inspector asked and what it was
// answered, written as the JSON-RPC messages of the MCP method at the
// pool's API: one entry per call (a listing's pages are one entry, and the
// pool's own initialize and retries are not shown). It is kept per (agent,
// server) in a bounded ring, redacted with the console's scrubber and the
// server's own header and env values, each message cut at rpcMaxBytes.
// Everything a server wrote is escaped: html/template on the page,
// textContent in inspector.js.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/logging"
	"github.com/switchboard-run/switchboard/internal/mcphttp"
	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/pool"
	"github.com/switchboard-run/switchboard/pool/mcpconfig"
)

const (
	// inspectTimeout bounds one request the inspector makes; a server's
	// own "timeout" is used when shorter.
	inspectTimeout = 30 * time.Second
	// rpcRing is how many requests the history keeps per (agent, server).
	rpcRing = 32
	// rpcMaxBytes caps one recorded message; the page shows where it was cut.
	rpcMaxBytes = 8 << 10
	// maxShownText caps the text of one resource's contents or one prompt
	// message returned to the page.
	maxShownText = 64 << 10
)

// Errors the inspector answers with, matched by errors.Is.
var (
	// ErrNoServer: the agent's tools/mcp.json names no such server.
	ErrNoServer = errors.New("no such server in the agent's tools/mcp.json")
)

// InspectServer is one server an agent's tools/mcp.json names, as the
// inspector lists it: no headers, env or OAuth secrets.
type InspectServer struct {
	Agent    string `json:"agent"`
	Name     string `json:"name"`
	Type     string `json:"type"`
	Endpoint string `json:"endpoint"` // the URL without query and user info, or the command line, redacted
	// Refused says why the inspector will not start it (a stdio server of
	// an agent without allow_stdio); empty when it may.
	Refused string `json:"refused,omitempty"`
	// Sibling is the agent of the studio the server is (its URL is that
	// agent's proxy route), whose page has the forms that call its tools;
	// empty for any other server.
	Sibling string `json:"sibling,omitempty"`
}

// InspectResource is one entry of resources/list.
type InspectResource struct {
	URI         string `json:"uri"`
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	MIMEType    string `json:"mimeType,omitempty"`
	Size        int64  `json:"size,omitempty"`
}

// InspectTemplate is one entry of resources/templates/list.
type InspectTemplate struct {
	URITemplate string `json:"uriTemplate"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	MIMEType    string `json:"mimeType,omitempty"`
}

// InspectPrompt is one entry of prompts/list.
type InspectPrompt struct {
	Name        string                `json:"name"`
	Title       string                `json:"title,omitempty"`
	Description string                `json:"description,omitempty"`
	Arguments   []*mcp.PromptArgument `json:"arguments"`
}

// Inspection is what the inspector page shows of one server.
type Inspection struct {
	InspectServer
	Tools          []studioapi.ToolInfo `json:"tools"`
	ToolsError     string               `json:"toolsError,omitempty"`
	Resources      []InspectResource    `json:"resources"`
	ResourcesError string               `json:"resourcesError,omitempty"`
	Templates      []InspectTemplate    `json:"templates"`
	TemplatesError string               `json:"templatesError,omitempty"`
	Prompts        []InspectPrompt      `json:"prompts"`
	PromptsError   string               `json:"promptsError,omitempty"`
	RPC            []RPCEntry           `json:"rpc"`
}

// InspectContent is one part of what a read or a prompt answered: text
// (cut at maxShownText) or, for anything else, its kind, MIME type and size.
type InspectContent struct {
	Role     string `json:"role,omitempty"` // a prompt message's
	URI      string `json:"uri,omitempty"`  // a resource's
	Kind     string `json:"kind"`           // "text", "blob", "image", "audio", "resource", "resource_link"
	MIMEType string `json:"mimeType,omitempty"`
	Text     string `json:"text,omitempty"`
	Size     int    `json:"size"` // bytes of the text or the binary data
	Cut      bool   `json:"cut,omitempty"`
}

// InspectAnswer is the answer to a read or a prompt from the page.
type InspectAnswer struct {
	Description string           `json:"description,omitempty"`
	Contents    []InspectContent `json:"contents"`
}

// RPCEntry is one request of the inspector and its answer.
type RPCEntry struct {
	ID         int64           `json:"id"`
	Time       time.Time       `json:"time"`
	DurationMS float64         `json:"durationMs"`
	Method     string          `json:"method"`
	Request    json.RawMessage `json:"request"`
	Response   json.RawMessage `json:"response"`
	Failed     bool            `json:"failed,omitempty"`
}

// rpcLog holds the inspector's recent requests, per (agent, server). Its
// keys come from the agents' configs only, so it is bounded by them.
type rpcLog struct {
	mu     sync.Mutex            // protects following fields
	nextID int64                 // guarded by mu
	ring   map[string][]RPCEntry // agent+"/"+server → oldest first; guarded by mu
}

func (l *rpcLog) id() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.nextID++
	return l.nextID
}

func (l *rpcLog) add(key string, e RPCEntry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ring == nil {
		l.ring = make(map[string][]RPCEntry)
	}
	r := append(l.ring[key], e)
	if len(r) > rpcRing {
		r = append([]RPCEntry(nil), r[len(r)-rpcRing:]...)
	}
	l.ring[key] = r
}

// recent is key's entries, newest first.
func (l *rpcLog) recent(key string) []RPCEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.ring[key]
	out := make([]RPCEntry, len(r))
	for i, e := range r {
		out[len(r)-1-i] = e
	}
	return out
}

// inspected is one (agent, server) the inspector talks to.
type inspected struct {
	s       *Console
	info    InspectServer
	srv     *pool.Server
	timeout time.Duration
	secrets []string // the server's header and env values, redacted wherever shown
}

// InspectServers lists the servers agent's tools/mcp.json names, in file
// order; none for an unknown agent or one without the file.
func (s *Console) InspectServers(agent string) []InspectServer {
	m, ok := s.Procs[agent]
	if !ok || m == nil || m.Def() == nil || m.Def().MCP == nil {
		return []InspectServer{}
	}
	out := []InspectServer{}
	for _, srv := range m.Def().MCP.Servers {
		out = append(out, s.inspected(agent, srv).info)
	}
	return out
}

func (s *Console) inspected(agent string, srv *mcpconfig.Server) *inspected {
	in := &inspected{s: s, srv: srv.Pool(), timeout: inspectTimeout}
	if srv.Timeout > 0 {
		in.timeout = min(in.timeout, srv.Timeout)
	}
	// Every value of the agent's mcp.json that is, or may be, a credential
	// (headers, env, URL query and password, a ${VAR} expanded into a
	// URL's path or a stdio arg, OAuth client secrets), found the way the
	// agent finds them for its own outputs (mcpconfig.Config.Secrets): the
	// endpoint shown below quotes the URL's path and the command line.
	if def := s.Procs[agent].Def(); def != nil && def.MCP != nil {
		in.secrets = def.MCP.Secrets(os.Environ())
	}
	in.info = InspectServer{Agent: agent, Name: srv.Name, Type: srv.Type}
	switch srv.Type {
	case mcpconfig.TypeStdio:
		in.info.Endpoint = in.redact(strings.Join(append([]string{filepath.Base(srv.Command)}, srv.Args...), " "))
	default:
		if u, err := url.Parse(srv.URL); err == nil {
			u.User, u.RawQuery, u.Fragment = nil, "", ""
			in.info.Endpoint = in.redact(u.String())
			for _, name := range s.Names {
				if u.String() == s.AgentURL(name) {
					in.info.Sibling = name
				}
			}
		}
	}
	if err := s.Procs[agent].Def().CheckServer(srv); err != nil {
		in.info.Refused = err.Error()
	}
	return in
}

// inspect finds server in agent's tools/mcp.json.
func (s *Console) inspect(agent, server string) (*inspected, error) {
	m := s.Procs[agent]
	if m != nil && m.Def() != nil && m.Def().MCP != nil {
		if srv, ok := m.Def().MCP.Server(server); ok {
			return s.inspected(agent, srv), nil
		}
	}
	var names []string
	for _, i := range s.InspectServers(agent) {
		names = append(names, i.Name)
	}
	return nil, fmt.Errorf("%w: agent %s has no server %s; its servers: %s", ErrNoServer, agent, quote(server), strings.Join(names, ", "))
}

// redact removes the studio's secrets and the server's own from text.
func (in *inspected) redact(text string) string {
	return logging.Scrub(in.s.scrub(text), in.secrets...)
}

// redactJSON is redact for a JSON text, cut at rpcMaxBytes: the result is
// always valid JSON (a cut or broken one becomes a JSON string saying so).
func (in *inspected) redactJSON(raw []byte) json.RawMessage {
	if in.s.Scrub != nil {
		raw = in.s.Scrub.JSON(raw)
	}
	out := []byte(logging.Scrub(string(raw), in.secrets...))
	if len(out) > rpcMaxBytes || !json.Valid(out) {
		cut := out[:min(len(out), rpcMaxBytes)]
		s, _ := json.Marshal(fmt.Sprintf("%s… (%d bytes in all, cut at %d)", cut, len(out), rpcMaxBytes))
		return s
	}
	return out
}

// call makes one request to the server and records it: method and params
// as the JSON-RPC request, the result or the error as the answer.
func (in *inspected) call(ctx context.Context, method string, params any, do func(context.Context) (any, error)) (any, error) {
	if in.info.Refused != "" {
		return nil, errors.New(in.info.Refused)
	}
	ctx, cancel := context.WithTimeout(ctx, in.timeout)
	defer cancel()
	id := in.s.rpc.id()
	start := time.Now()
	res, err := do(ctx)
	e := RPCEntry{ID: id, Time: start, DurationMS: float64(time.Since(start).Microseconds()) / 1000, Method: method}
	req, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	e.Request = in.redactJSON(req)
	var resp []byte
	if err != nil {
		e.Failed = true
		resp, _ = json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"message": in.redact(err.Error())}})
	} else {
		resp, _ = json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": res})
	}
	e.Response = in.redactJSON(resp)
	in.s.rpc.add(in.info.Agent+"/"+in.info.Name, e)
	if err != nil {
		return nil, fmt.Errorf("%s to %s: %w", method, in.info.Name, logging.RedactError(err, in.secrets...))
	}
	return res, nil
}

func (in *inspected) errText(err error) string { return in.redact(err.Error()) }

// Inspect lists what the server offers, the four listings concurrently.
func (in *inspected) Inspect(ctx context.Context) Inspection {
	p := in.s.Pool
	d := Inspection{InspectServer: in.info, Tools: []studioapi.ToolInfo{}, Resources: []InspectResource{}, Templates: []InspectTemplate{}, Prompts: []InspectPrompt{}}
	var wg sync.WaitGroup
	wg.Go(func() {
		res, err := in.call(ctx, "tools/list", map[string]any{}, func(ctx context.Context) (any, error) {
			t, err := p.ListTools(ctx, in.srv)
			return map[string]any{"tools": t}, err
		})
		if err != nil {
			d.ToolsError = in.errText(err)
			return
		}
		for _, t := range res.(map[string]any)["tools"].([]*mcp.Tool) {
			schema, _ := json.Marshal(t.InputSchema)
			d.Tools = append(d.Tools, studioapi.ToolInfo{Name: t.Name, Description: t.Description, InputSchema: schema})
		}
	})
	wg.Go(func() {
		res, err := in.call(ctx, "resources/list", map[string]any{}, func(ctx context.Context) (any, error) {
			r, err := p.ListResources(ctx, in.srv)
			return map[string]any{"resources": r}, err
		})
		if err != nil {
			d.ResourcesError = in.errText(err)
			return
		}
		for _, r := range res.(map[string]any)["resources"].([]*mcp.Resource) {
			d.Resources = append(d.Resources, InspectResource{URI: r.URI, Name: r.Name, Title: r.Title, Description: r.Description, MIMEType: r.MIMEType, Size: r.Size})
		}
	})
	wg.Go(func() {
		res, err := in.call(ctx, "resources/templates/list", map[string]any{}, func(ctx context.Context) (any, error) {
			r, err := p.ListResourceTemplates(ctx, in.srv)
			return map[string]any{"resourceTemplates": r}, err
		})
		if err != nil {
			d.TemplatesError = in.errText(err)
			return
		}
		for _, r := range res.(map[string]any)["resourceTemplates"].([]*mcp.ResourceTemplate) {
			d.Templates = append(d.Templates, InspectTemplate{URITemplate: r.URITemplate, Name: r.Name, Description: r.Description, MIMEType: r.MIMEType})
		}
	})
	wg.Go(func() {
		res, err := in.call(ctx, "prompts/list", map[string]any{}, func(ctx context.Context) (any, error) {
			r, err := p.ListPrompts(ctx, in.srv)
			return map[string]any{"prompts": r}, err
		})
		if err != nil {
			d.PromptsError = in.errText(err)
			return
		}
		for _, r := range res.(map[string]any)["prompts"].([]*mcp.Prompt) {
			args := r.Arguments
			if args == nil {
				args = []*mcp.PromptArgument{}
			}
			d.Prompts = append(d.Prompts, InspectPrompt{Name: r.Name, Title: r.Title, Description: r.Description, Arguments: args})
		}
	})
	wg.Wait()
	d.RPC = in.s.rpc.recent(in.info.Agent + "/" + in.info.Name)
	return d
}

// shownText is text cut at maxShownText, on a rune boundary.
func shownText(text string) (string, bool) {
	if len(text) <= maxShownText {
		return text, false
	}
	cut := maxShownText
	for cut > 0 && text[cut]&0xC0 == 0x80 {
		cut--
	}
	return text[:cut], true
}

// Read reads the resource at uri.
func (in *inspected) Read(ctx context.Context, uri string) (InspectAnswer, error) {
	params := &mcp.ReadResourceParams{URI: uri}
	res, err := in.call(ctx, "resources/read", params, func(ctx context.Context) (any, error) {
		return in.s.Pool.ReadResource(ctx, in.srv, params)
	})
	if err != nil {
		return InspectAnswer{}, err
	}
	a := InspectAnswer{Contents: []InspectContent{}}
	for _, c := range res.(*mcp.ReadResourceResult).Contents {
		if c == nil {
			continue
		}
		ic := InspectContent{URI: c.URI, MIMEType: c.MIMEType}
		if c.Blob != nil {
			ic.Kind, ic.Size = "blob", len(c.Blob)
		} else {
			ic.Kind, ic.Size = "text", len(c.Text)
			ic.Text, ic.Cut = shownText(in.redact(c.Text))
		}
		a.Contents = append(a.Contents, ic)
	}
	return a, nil
}

// Prompt gets the prompt name with args.
func (in *inspected) Prompt(ctx context.Context, name string, args map[string]string) (InspectAnswer, error) {
	params := &mcp.GetPromptParams{Name: name, Arguments: args}
	res, err := in.call(ctx, "prompts/get", params, func(ctx context.Context) (any, error) {
		return in.s.Pool.GetPrompt(ctx, in.srv, params)
	})
	if err != nil {
		return InspectAnswer{}, err
	}
	r := res.(*mcp.GetPromptResult)
	a := InspectAnswer{Description: in.redact(r.Description), Contents: []InspectContent{}}
	for _, m := range r.Messages {
		if m == nil {
			continue
		}
		ic := InspectContent{Role: string(m.Role)}
		switch c := m.Content.(type) {
		case *mcp.TextContent:
			ic.Kind, ic.Size = "text", len(c.Text)
			ic.Text, ic.Cut = shownText(in.redact(c.Text))
		case *mcp.ImageContent:
			ic.Kind, ic.MIMEType, ic.Size = "image", c.MIMEType, len(c.Data)
		case *mcp.AudioContent:
			ic.Kind, ic.MIMEType, ic.Size = "audio", c.MIMEType, len(c.Data)
		case *mcp.EmbeddedResource:
			ic.Kind = "resource"
			if rc := c.Resource; rc != nil {
				ic.URI, ic.MIMEType = rc.URI, rc.MIMEType
				if rc.Blob != nil {
					ic.Size = len(rc.Blob)
				} else {
					ic.Size = len(rc.Text)
					ic.Text, ic.Cut = shownText(in.redact(rc.Text))
				}
			}
		case *mcp.ResourceLink:
			ic.Kind, ic.URI, ic.MIMEType = "resource_link", c.URI, c.MIMEType
		default:
			ic.Kind = fmt.Sprintf("%T", c)
		}
		a.Contents = append(a.Contents, ic)
	}
	return a, nil
}

// inspectRequest is the body of a read or a prompt from the page.
type inspectRequest struct {
	URI       string            `json:"uri"`
	Name      string            `json:"name"`
	Arguments map[string]string `json:"arguments"`
}

// serveInspector answers /api/agents/<agent>/servers[/<server>[/<op>]];
// rest is what follows "servers".
func (s *Console) serveInspector(w http.ResponseWriter, r *http.Request, agent, rest string) {
	get := func(serve func()) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET")
			mcphttp.WriteJSONError(w, http.StatusMethodNotAllowed, "GET "+r.URL.EscapedPath()+" only")
			return
		}
		serve()
	}
	if rest == "" {
		get(func() { mcphttp.WriteJSON(w, http.StatusOK, s.InspectServers(agent)) })
		return
	}
	server, op, _ := strings.Cut(strings.TrimPrefix(rest, "/"), "/")
	in, err := s.inspect(agent, server)
	if err != nil {
		mcphttp.WriteJSONError(w, http.StatusNotFound, err.Error())
		return
	}
	switch op {
	case "":
		get(func() { mcphttp.WriteJSON(w, http.StatusOK, in.Inspect(r.Context())) })
	case "rpc":
		get(func() { mcphttp.WriteJSON(w, http.StatusOK, s.rpc.recent(agent+"/"+server)) })
	case "read", "prompt":
		s.serveInspectAction(w, r, in, op)
	default:
		mcphttp.WriteJSONError(w, http.StatusNotFound, fmt.Sprintf("no such endpoint %s: the server's are /api/agents/%s/servers/%s[/read|/prompt|/rpc]", r.URL.EscapedPath(), agent, server))
	}
}

func (s *Console) serveInspectAction(w http.ResponseWriter, r *http.Request, in *inspected, op string) {
	var req inspectRequest
	if !readJSON(w, r, &req, "uri for a read; name and arguments, strings, for a prompt") {
		return
	}
	if in.info.Refused != "" {
		mcphttp.WriteJSONError(w, http.StatusForbidden, in.info.Refused)
		return
	}
	var a InspectAnswer
	var err error
	switch op {
	case "read":
		if req.URI == "" {
			mcphttp.WriteJSONError(w, http.StatusBadRequest, `the body needs "uri": the resource to read`)
			return
		}
		a, err = in.Read(r.Context(), req.URI)
	case "prompt":
		if req.Name == "" {
			mcphttp.WriteJSONError(w, http.StatusBadRequest, `the body needs "name": the prompt to get`)
			return
		}
		a, err = in.Prompt(r.Context(), req.Name, req.Arguments)
	}
	if err != nil {
		mcphttp.WriteJSONError(w, http.StatusBadGateway, in.errText(err))
		return
	}
	mcphttp.WriteJSON(w, http.StatusOK, a)
}

// inspectorPage is the template data of /agents/<name>/servers/<server>.
type inspectorPage struct {
	URL  string
	Time time.Time
	Inspection
}

// inspectorPagePath splits /agents/<agent>/servers/<server>; ok is false
// for any other path.
func inspectorPagePath(path string) (agent, server string, ok bool) {
	rest, ok := strings.CutPrefix(path, "/agents/")
	if !ok {
		return "", "", false
	}
	agent, server, ok = strings.Cut(rest, "/servers/")
	if !ok || strings.Contains(server, "/") {
		return "", "", false
	}
	return agent, server, true
}
