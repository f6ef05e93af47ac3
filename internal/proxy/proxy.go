// Package proxy forwards MCP Streamable HTTP to an agent and keeps the
// caller unaware of the agent's restarts: New and NewRouted are the reverse
// proxy behind the mcphttp middleware (proxy.go); Redial re-sends a request
// whose connection a dead agent refused to its new process (redial.go);
// Continuity keeps a client's session, and tells it what became of its
// streams, across the agent's restarts (continuity.go,
// continuity_streams.go); a call's stream the agent cut mid-way still ends
// with the call's typed error (cut.go). What passes through is observed elsewhere
// (package observe); which agent runs where is the supervisor's.
package proxy

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"

	"github.com/switchboard-run/switchboard/internal/mcphttp"
	"github.com/switchboard-run/switchboard/internal/rpccode"
	"github.com/switchboard-run/switchboard/internal/studioapi"
)

// The proxy forwards MCP Streamable HTTP to an agent. Everything it must get
// right is about not getting in the way:
//
//   - SSE responses stream: FlushInterval -1 flushes after every write, so
//     a progress notification reaches the client when the agent sends it,
//     not when the tool returns.
//   - Mcp-Session-Id, MCP-Protocol-Version, Last-Event-ID and Authorization
//     pass through untouched (ReverseProxy forwards every end-to-end header);
//     the mcphttp middleware in front applies the session rules, and the
//     agent's own middleware applies them again.
//   - Origin is checked here and not forwarded: the browser talks to the
//     studio, and the agent behind it sees a loopback request from the
//     studio, whose Host is the agent's own address.
//   - Errors are JSON-RPC error bodies, so an MCP client shows them. A call
//     the agent dropped is answered with its own id and
//     rpccode.OutcomeUnknown: by ErrorHandler before the agent's headers,
//     by one last SSE event after them (cut.go).

// Options configure New. The zero value of every field means its
// default.
type Options struct {
	// Middleware configures the mcphttp middleware in front of the proxy.
	Middleware *mcphttp.Options
	// Transport carries requests upstream; default a loopback-friendly clone
	// of http.DefaultTransport that ignores proxy environment variables.
	Transport http.RoundTripper
	// Logger; default: discard.
	Logger *slog.Logger
}

// New returns a handler that forwards MCP Streamable HTTP requests
// (POST, GET, DELETE) to upstream, the full URL of an MCP endpoint, behind
// the mcphttp middleware. The studio uses one per agent, with the agent's
// current address; a test can put it in front of any MCP server.
func New(upstream *url.URL, opts *Options) http.Handler {
	return NewRouted(func(*http.Request) (*url.URL, string) { return upstream, upstream.Host }, opts)
}

// Target returns where a request goes and a name for it in errors.
type Target func(*http.Request) (target *url.URL, name string)

// NewRouted is New with the upstream chosen per request by target: the
// studio's route to an agent puts the agent's current address in the
// request's context, and its target reads it there.
func NewRouted(target Target, opts *Options) *mcphttp.Handler {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Transport == nil {
		o.Transport = NewTransport()
	}
	logger := o.Logger
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			u, _ := target(pr.In)
			// Not SetURL: it joins paths, and the agent's endpoint is its
			// own path, whatever the studio's route was.
			pr.Out.URL.Scheme = u.Scheme
			pr.Out.URL.Host = u.Host
			pr.Out.URL.Path = u.Path
			pr.Out.URL.RawPath = u.RawPath
			pr.Out.Host = ""
			pr.Out.Header.Del("Origin")
			pr.Out.Header.Del(studioapi.HeaderAgentKey) // the studio's to check, nobody else's to see
		},
		// A call's SSE stream cut after its headers still ends with the
		// call's typed error (cut.go).
		ModifyResponse: func(resp *http.Response) error {
			watchCut(resp, func() string { _, name := target(resp.Request); return name }, logger)
			return nil
		},
		FlushInterval: -1,
		BufferPool:    copyBuffers,
		Transport:     o.Transport,
		ErrorLog:      log.New(proxyErrorLog{logger}, "", 0),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			_, name := target(r)
			if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
				// The client went away; nobody is left to answer.
				return
			}
			if errors.Is(err, ErrNotSent) {
				// Proved unsent (redial.go), and not sent again: nothing
				// ran, and the client may send it again.
				logger.Info("proxy: request not sent", "agent", name, "method", r.Method, "err", err)
				w.Header().Set("Retry-After", "1")
				mcphttp.WriteJSONRPCError(w, http.StatusServiceUnavailable, nil, CodeServerError,
					fmt.Sprintf("agent %s closed the connection before the request was sent; nothing ran: %v", name, err))
				return
			}
			logger.Warn("proxy: upstream request failed", "agent", name, "method", r.Method, "err", err)
			if m, ok := mcphttp.MessageFrom(r.Context()); ok && r.Method == http.MethodPost && m.Method != "" && len(m.ID) > 0 {
				// A request that went to the agent, which died (or cut the
				// connection) before it answered: it may have run. The
				// client gets that, typed, as the answer to its own
				// request: rpccode.OutcomeUnknown with the request's id,
				// in a 200, as the session era's resumed stream says it
				// (continuity_streams.go). A 502 with a null id was
				// outside any JSON-RPC exchange: the TypeScript SDK and
				// @openai/agents then fail the call with the HTTP status
				// alone ("502", -32000 in @openai/agents' words), and
				// nothing says which call, or that it may have run.
				mcphttp.WriteJSONRPCErrorData(w, http.StatusOK, m.ID, rpccode.OutcomeUnknown,
					fmt.Sprintf("agent %s did not answer %s: %v; it may have run, and its outcome is unknown", name, m.Method, err),
					map[string]any{"agent": name, "outcomeUnknown": true})
				return
			}
			// 502: the agent did not answer a notification, a response,
			// or a GET or DELETE. Whatever reached it may have taken
			// effect; a client must not assume otherwise.
			mcphttp.WriteJSONRPCError(w, http.StatusBadGateway, nil, CodeServerError,
				fmt.Sprintf("agent %s did not answer: %v", name, err))
		},
	}
	methods := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPost, http.MethodGet, http.MethodDelete:
			rp.ServeHTTP(w, r)
		default:
			w.Header().Set("Allow", "GET, POST, DELETE")
			mcphttp.WriteJSONError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed: MCP Streamable HTTP uses GET, POST and DELETE", r.Method))
		}
	})
	mo := &mcphttp.Options{Logger: logger}
	if o.Middleware != nil {
		mo = o.Middleware
	}
	return mcphttp.New(methods, mo)
}

// copyBuffers lends ReverseProxy the buffer it copies a response through.
// Without a pool it allocates 32 KiB per request: half of what the studio
// allocated per small call, and most of the garbage its collector then
// spent CPU on.
var copyBuffers httputil.BufferPool = &bufferPool{}

type bufferPool struct{ p sync.Pool }

// copyBufferSize is ReverseProxy's own default.
const copyBufferSize = 32 << 10

func (bp *bufferPool) Get() []byte {
	if b, ok := bp.p.Get().(*[]byte); ok {
		return *b
	}
	return make([]byte, copyBufferSize)
}

func (bp *bufferPool) Put(b []byte) {
	if cap(b) != copyBufferSize {
		return
	}
	b = b[:copyBufferSize]
	bp.p.Put(&b)
}

// proxyErrorLog receives ReverseProxy's own log lines. The one it writes
// every time an agent dies mid-response ("httputil: ReverseProxy read error
// during body copy: unexpected EOF") is an event the studio reports in its
// own words (the agent's exit, the call's outcome), so it goes to debug;
// anything else stays a warning.
type proxyErrorLog struct{ logger *slog.Logger }

func (l proxyErrorLog) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	if strings.Contains(msg, "read error during body copy") {
		l.logger.Debug("proxy: an agent's response ended early", "detail", msg)
	} else {
		l.logger.Warn("proxy: " + strings.TrimPrefix(msg, "httputil: "))
	}
	return len(p), nil
}

// CodeServerError is JSON-RPC's generic server error (rpccode.ServerError),
// the code of the proxy's and the studio's routes' refusals that a program
// need not tell apart (no such agent, agent restarting, not sent). A call
// the proxy forwarded and lost is rpccode.OutcomeUnknown instead.
const CodeServerError = rpccode.ServerError
