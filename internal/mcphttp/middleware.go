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
//   - Sessions are capped, per client too, and their creation is bounded in
//     rate; at the cap the oldest session idle for a minute is reclaimed,
//     never one with a request in flight; past that an initialize gets 503
//     (sessions.go). A large body on a session the middleware cannot
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
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
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

// DefaultSessionReclaimIdle is how long a session must sit idle before a
// full table may reclaim it for a new one. A person's client that finds its
// session reclaimed gets 404 and initializes again (nothing ran); a client
// that fills the table with idle sessions holds it for a minute, not for the
// half hour of the idle TTL.
const DefaultSessionReclaimIdle = time.Minute

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
	// room, then the oldest idle past SessionReclaimIdle; if none is, an
	// initialize gets 503 (ErrTooManySessions). A session with a request in
	// flight is never evicted.
	MaxSessions int
	// MaxSessionsPerClient caps the bindings of one client: one non-empty
	// credential, or one remote address that is not loopback; default three
	// quarters of MaxSessions, so one client never holds them all. Past it
	// the client's own idle sessions are reclaimed, or its initialize gets
	// 503 (ErrClientSessions).
	MaxSessionsPerClient int
	// SessionReclaimIdle is how long a session must have been idle, with
	// no request in flight, to be reclaimed at the cap (or at its client's
	// share) for a new one; default DefaultSessionReclaimIdle.
	SessionReclaimIdle time.Duration
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
	// RestoreSession, when set, is asked (outside any lock, on the
	// request's context) about a session id this handler does not know,
	// with the digest of the request's credential (SHA-256 of its
	// Authorization header, hex; "" for none): true when a record that
	// outlives the process (internal/proxy's continuity store) vouches
	// that this credential created it. The binding is then restored,
	// within MaxSessions. It is how a session survives a restart of the
	// process, or reaches another replica; without it, an id this handler
	// did not see created is refused.
	RestoreSession func(ctx context.Context, id, cred string) bool
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
	restore    func(ctx context.Context, id, cred string) bool // may be nil
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
	if o.MaxSessionsPerClient <= 0 {
		o.MaxSessionsPerClient = max(1, o.MaxSessions*3/4)
	}
	if o.SessionReclaimIdle <= 0 {
		o.SessionReclaimIdle = DefaultSessionReclaimIdle
	}
	return &Handler{
		next:       next,
		refuseCall: o.RefuseCall,
		maxBody:    o.MaxBodyBytes,
		token:      o.Token,
		logger:     o.Logger,
		budget:     o.Budget,
		sessions:   newSessionTable(&o),
		restore:    o.RestoreSession,
	}
}

// vouch checks id for cred as the table does, restoring a binding that
// RestoreSession vouches for when the table does not know id.
func (h *Handler) vouch(r *http.Request, id, cred string, use bool) (*binding, error) {
	b, err := h.lookup(id, cred, use)
	if !errors.Is(err, errUnknownSession) || h.restore == nil {
		return b, err
	}
	if !h.restore(r.Context(), id, cred) {
		return nil, err
	}
	if err := h.sessions.adopt(id, cred, remoteAddr(r)); err != nil {
		return nil, err
	}
	h.logger.Debug("restored a session binding", "session", id)
	return h.lookup(id, cred, use)
}

// lookup is the table's check of id for cred: with use, the session is
// marked used and in flight (the caller ends it with sessions.done).
func (h *Handler) lookup(id, cred string, use bool) (*binding, error) {
	if use {
		return h.sessions.check(id, cred)
	}
	return nil, h.sessions.known(id, cred)
}

// RefusesUnread reports whether h refuses r before reading its body: a
// request on a session h cannot vouch for (unknown, forgotten, another
// credential's) gets 404 whatever it holds, and one that announces a body
// larger than any initialize (which must be read first: it may carry a
// stale id, see ServeHTTP) is refused without reading it. A flood of large
// bodies with an invented session id costs a map lookup each (and, with
// Options.RestoreSession, one lookup of the store behind it). An observer
// that reads bodies itself (the studio's) asks first.
func (h *Handler) RefusesUnread(r *http.Request) bool {
	if _, read := r.Context().Value(bodyKey{}).(*bodyResult); read || r.ContentLength <= smallBody {
		return false
	}
	id := r.Header.Get(SessionIDHeader)
	if id == "" {
		return false
	}
	_, err := h.vouch(r, id, credential(r), false)
	return err != nil
}

// Sessions reports how many session bindings h remembers.
func (h *Handler) Sessions() int { return h.sessions.len() }

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !Admit(w, r, h.token) {
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
		b, err := h.vouch(r, id, cred, true)
		if err != nil {
			h.logger.Debug("refusing session", "session", id, "reason", err)
			writeSessionNotFound(w)
			return
		}
		// In flight until it ends: a session with a request being served
		// is never reclaimed.
		defer h.sessions.done(b)
	}

	if h.refuseCall != nil && msg.Method == "tools/call" {
		if text := h.refuseCall(msg); text != "" {
			writeToolError(w, msg.ID, text)
			return
		}
	}

	rec := &statusWriter{ResponseWriter: w}
	if msg.Method == "initialize" && r.Method == http.MethodPost {
		addr := remoteAddr(r)
		if err := h.sessions.reserve(cred, addr); err != nil {
			h.logger.Debug("refusing initialize", "reason", err)
			text := fmt.Sprintf("server overloaded: %v (the cap is %d); end unused sessions with DELETE, or try again when one has been idle for %v", err, h.sessions.max, h.sessions.reclaimIdle)
			retry := strconv.Itoa(max(1, int(h.sessions.reclaimIdle.Seconds())))
			switch {
			case errors.Is(err, ErrSessionRate):
				text, retry = fmt.Sprintf("server overloaded: %v (%g a second); try again", err, float64(h.sessions.limit.Limit())), "1"
			case errors.Is(err, ErrClientSessions):
				text = fmt.Sprintf("server overloaded: %v (%d of %d); end unused sessions with DELETE, or try again when one of yours has been idle for %v", err, h.sessions.perClient, h.sessions.max, h.sessions.reclaimIdle)
			}
			w.Header().Set("Retry-After", retry)
			WriteJSONRPCError(w, http.StatusServiceUnavailable, msg.ID, CodeServerOverloaded, text)
			return
		}
		var bound atomic.Bool // the slot became a binding
		defer func() {
			if !bound.Load() {
				h.sessions.unreserve(cred, addr)
			}
		}()
		rec.onHeader = func(status int, hdr http.Header) {
			// Bind before the header reaches the client, so the client's
			// first request on the session cannot race the binding.
			if newID := hdr.Get(SessionIDHeader); status == http.StatusOK && newID != "" && bound.CompareAndSwap(false, true) {
				h.sessions.bind(newID, cred, addr)
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
	}
}

// remoteAddr is r's client address, as the sessions' per-address share
// counts it; invalid (so shared with everyone) when it cannot be read.
func remoteAddr(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
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
