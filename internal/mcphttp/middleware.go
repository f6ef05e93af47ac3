// Package mcphttp is the HTTP middleware that both the agent server and the
// studio proxy put in front of an MCP Streamable HTTP endpoint. It makes the
// server side as forgiving as the spec allows and as strict as it must be:
//
//   - An initialize POST that still carries an Mcp-Session-Id (a client that
//     reconnects with the id of the session it just terminated) starts a
//     fresh session: the stale header is dropped before the go-sdk handler,
//     which looks the session up before it reads the body and would answer
//     404, sees the request.
//   - A foreign Origin, or a foreign Host on a loopback listener, gets 403
//     (DNS rebinding; spec 2025-11-25, transports, Security Warning).
//   - Bodies are bounded (413), read once against the process's Budget
//     (503 past it, see budget.go and body.go), and must arrive within the
//     Budget's body deadline.
//   - Sessions are capped without eviction, and their creation is bounded in
//     rate: past either, an initialize gets 503 and every live session keeps
//     working (sessions.go). A large body on a session the middleware cannot
//     vouch for is refused (404) without being read.
//   - A tools/call can be refused on its parsed message before the body
//     reaches the server behind (Options.RefuseCall: an unreadable chain).
//   - A session id is bound to the credential (Authorization header) that
//     created it; another credential presenting it gets 404, as if the session
//     did not exist. So does an id this middleware never saw created, or has
//     forgotten (DELETE, an upstream 404, idle past the TTL): nothing it forwards runs
//     on a session it cannot vouch for, and a 404 is the spec's signal to
//     re-initialize.
//   - An optional bearer token (401).
//   - A POST that is not one JSON-RPC 2.0 message gets a JSON-RPC error body,
//     where go-sdk would answer with text/plain.
//
// The checks run cheapest first (headers, then the body), and the body is
// read before the session binding is checked so that an initialize can shed
// its stale id first.
package mcphttp

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"
)

// DefaultMaxBodyBytes is the body limit when Options.MaxBodyBytes is zero.
// It matches go-sdk's mcp.DefaultMaxRequestBodyBytes.
const DefaultMaxBodyBytes = 4 << 20

// DefaultMaxSessions caps the session bindings a Handler remembers when
// Options.MaxSessions is zero. A go-sdk server session costs about 11 kB, so
// an agent at the cap holds about 11 MB of them; a person's tools open a
// few dozen.
const DefaultMaxSessions = 1024

// DefaultSessionsPerSecond and DefaultSessionBurst are the default rate of
// new sessions: a client's pool opens one per server and re-initializes
// rarely; a test that opens hundreds at once fits in the burst.
const (
	DefaultSessionsPerSecond = 100
	DefaultSessionBurst      = 512
)

// SessionIDHeader is the MCP Streamable HTTP transport's session header.
const SessionIDHeader = "Mcp-Session-Id"

// Options configure a Handler. The zero value of every field means its
// default.
type Options struct {
	// MaxBodyBytes bounds a request body; default DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Token, when set, is the bearer token every request must present in
	// its Authorization header.
	Token string
	// MaxSessions caps the session bindings; default DefaultMaxSessions.
	// When full, bindings idle past SessionIdleTTL are forgotten to make
	// room; if none is, an initialize gets 503 (ErrTooManySessions). A live
	// session is never evicted.
	MaxSessions int
	// SessionIdleTTL forgets a binding unused for this long (it should be at
	// least the upstream's own idle session timeout). Zero means bindings are
	// forgotten only on DELETE or on an upstream 404.
	SessionIdleTTL time.Duration
	// SessionsPerSecond and SessionBurst bound how fast new sessions are
	// created (a token bucket); past it an initialize gets 503
	// (ErrSessionRate). Defaults DefaultSessionsPerSecond and
	// DefaultSessionBurst; a negative rate: no bound.
	SessionsPerSecond float64
	SessionBurst      int
	// OnSessionExpired is called (outside any lock) with the id of each
	// binding forgotten for being idle past SessionIdleTTL, so that the
	// server behind can close the session too; nil: nothing is closed.
	OnSessionExpired func(id string)
	// Budget bounds connections, body bytes and body time for the whole
	// process; default: a Budget of its own with the defaults.
	Budget *Budget
	// RefuseCall, when set, is asked about every tools/call on a session
	// this handler vouches for, before the body reaches the server behind.
	// A non-empty answer is the call's result, with isError set, and the
	// call goes no further. It is where a check runs whose input is the
	// client's and whose cost would otherwise be the server's full decode
	// of it (a forged delegation chain of a million names).
	RefuseCall func(m *Message) string
	// Logger gets one debug line per decision; default: discard.
	Logger *slog.Logger
	// Now is the clock; default time.Now. For tests.
	Now func() time.Time
}

// Handler is the middleware. Build it with New.
type Handler struct {
	next       http.Handler
	refuseCall func(*Message) string
	maxBody    int64
	token      string
	logger     *slog.Logger
	budget     *Budget
	sessions   *sessionTable
}

// New returns next wrapped in the middleware.
func New(next http.Handler, opts *Options) *Handler {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = DefaultMaxSessions
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Budget == nil {
		o.Budget = NewBudget(nil)
	}
	switch {
	case o.SessionsPerSecond == 0:
		o.SessionsPerSecond = DefaultSessionsPerSecond
	case o.SessionsPerSecond < 0:
		o.SessionsPerSecond = 0
	}
	if o.SessionBurst <= 0 {
		o.SessionBurst = DefaultSessionBurst
	}
	return &Handler{
		next:       next,
		refuseCall: o.RefuseCall,
		maxBody:    o.MaxBodyBytes,
		token:      o.Token,
		logger:     o.Logger,
		budget:     o.Budget,
		sessions:   newSessionTable(o.MaxSessions, o.SessionIdleTTL, o.Now, o.OnSessionExpired, o.SessionsPerSecond, o.SessionBurst),
	}
}

// RefusesUnread reports whether h refuses r before reading its body: a
// request on a session h cannot vouch for (unknown, forgotten, another
// credential's) gets 404 whatever it holds, and one that announces a body
// larger than any initialize (which must be read first: it may carry a
// stale id, see ServeHTTP) is refused without reading it. A flood of large
// bodies with an invented session id costs a map lookup each. An observer
// that reads bodies itself (the studio's) asks first.
func (h *Handler) RefusesUnread(r *http.Request) bool {
	if _, read := r.Context().Value(bodyKey{}).(*bodyResult); read || r.ContentLength <= smallBody {
		return false
	}
	id := r.Header.Get(SessionIDHeader)
	return id != "" && h.sessions.known(id, credential(r)) != nil
}

// Sessions reports how many session bindings h remembers.
func (h *Handler) Sessions() int { return h.sessions.len() }

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := CheckHost(r); err != nil {
		WriteJSONError(w, http.StatusForbidden, err.Error())
		return
	}
	if err := CheckOrigin(r); err != nil {
		WriteJSONError(w, http.StatusForbidden, err.Error())
		return
	}
	if h.token != "" && !CheckBearer(r, h.token) {
		WriteUnauthorized(w)
		return
	}

	if h.RefusesUnread(r) {
		h.logger.Debug("refusing a large body on a session this handler does not vouch for", "bytes", r.ContentLength)
		writeSessionNotFound(w)
		return
	}
	r, release := ReadRequest(w, r, h.budget, h.maxBody)
	defer release()
	res := r.Context().Value(bodyKey{}).(*bodyResult)
	if res.status != 0 {
		WriteJSONRPCError(w, res.status, res.msg.ID, res.rpcErr.Code, res.rpcErr.Message)
		return
	}
	msg := &res.msg
	if msg.Method == "initialize" {
		if stale := r.Header.Get(SessionIDHeader); stale != "" {
			// The client is starting over; whatever session it names is not
			// the one it wants. Spec 2025-11-25, transports, Session
			// Management: the initialize request starts a session.
			h.logger.Debug("initialize carried a session id; starting a fresh session", "stale_session", stale)
			r.Header.Del(SessionIDHeader)
		}
	}

	cred := credential(r)
	id := r.Header.Get(SessionIDHeader)
	if id != "" {
		if err := h.sessions.check(id, cred); err != nil {
			h.logger.Debug("refusing session", "session", id, "reason", err)
			writeSessionNotFound(w)
			return
		}
	}

	if h.refuseCall != nil && msg.Method == "tools/call" {
		if text := h.refuseCall(msg); text != "" {
			writeToolError(w, msg.ID, text)
			h.sessions.touch(id)
			return
		}
	}

	rec := &statusWriter{ResponseWriter: w}
	if msg.Method == "initialize" && r.Method == http.MethodPost {
		if err := h.sessions.reserve(); err != nil {
			h.logger.Debug("refusing initialize", "reason", err)
			text := fmt.Sprintf("server overloaded: %v (the cap is %d); end unused sessions with DELETE, or wait until idle ones expire", err, h.sessions.max)
			retry := "60"
			if errors.Is(err, ErrSessionRate) {
				text, retry = fmt.Sprintf("server overloaded: %v (%g a second); try again", err, h.sessions.rate), "1"
			}
			w.Header().Set("Retry-After", retry)
			WriteJSONRPCError(w, http.StatusServiceUnavailable, msg.ID, CodeServerOverloaded, text)
			return
		}
		var bound atomic.Bool // the slot became a binding
		defer func() {
			if !bound.Load() {
				h.sessions.unreserve()
			}
		}()
		rec.onHeader = func(status int, hdr http.Header) {
			// Bind before the header reaches the client, so the client's
			// first request on the session cannot race the binding.
			if newID := hdr.Get(SessionIDHeader); status == http.StatusOK && newID != "" && bound.CompareAndSwap(false, true) {
				h.sessions.bind(newID, cred)
			}
		}
	}
	h.next.ServeHTTP(rec, r)
	rec.ensureHeader()

	if id == "" {
		return
	}
	switch {
	case rec.status == http.StatusNotFound:
		// The upstream no longer knows the session (expired, restarted).
		h.sessions.forget(id)
	case r.Method == http.MethodDelete && rec.status/100 == 2:
		h.sessions.forget(id)
	default:
		h.sessions.touch(id)
	}
}

// writeToolError answers a tools/call with a result whose isError is set
// (MCP 2025-11-25, tools, Error Handling: a tool execution error).
func writeToolError(w http.ResponseWriter, id json.RawMessage, text string) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	type content struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	writeJSON(w, http.StatusOK, struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  any             `json:"result"`
	}{"2.0", id, struct {
		Content []content `json:"content"`
		IsError bool      `json:"isError"`
	}{[]content{{"text", text}}, true}})
}

func writeSessionNotFound(w http.ResponseWriter) {
	// A null id: the error is about the HTTP request, not about one JSON-RPC
	// message. go-sdk clients then classify the 404 as session expiry
	// (mcp.ErrSessionMissing), which is what it is to them.
	WriteJSONRPCError(w, http.StatusNotFound, nil, CodeInvalidRequest, "session not found")
}
