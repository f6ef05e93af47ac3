package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-run/switchboard/internal/mcphttp"
	"github.com/switchboard-run/switchboard/internal/proxy/sessionstore"
)

// Session continuity: a session-era (2025-11-25) client keeps its session
// across its agent's restart.
//
// A restarted agent does not know the sessions of its previous process and
// answers 404 to them, as the spec says it must. Our pool re-initializes on
// that 404; most clients people use do not (the TypeScript SDK and
// @openai/agents treat it as terminal). The studio sits between them, saw
// the client's initialize, and supervises the agent, so it can do what the
// client does not: continuity is the proxy's upstream RoundTripper, and for
// every session it saw created it keeps what the client sent to set the
// session up (initialize, notifications/initialized, the last
// logging/setLevel, resources/subscribe). When the agent answers 404 to a
// session it keeps, it replays those on the client's behalf to establish a
// new upstream session, maps the client's session id to it, and sends the
// request again there. Mcp-Session-Id is rewritten both ways, so the client
// goes on with the id it was given.
//
// Why the retry is safe: a 404 for a session is answered before the request
// is dispatched (the agent's middleware and go-sdk both look the session up
// first), so nothing ran. A call that was in flight when the agent died is
// not touched: its connection broke after it was sent, and it stays the
// proxy's 502, outcome unknown.
//
// The client's session id stays valid until the client DELETEs it, or it is
// idle past the TTL (the proxy's middleware forgets the binding then,
// and tells continuity). The credential binding of internal/mcphttp stands:
// a request reaches this code only after the middleware has checked that its
// Authorization is the one that created the session, and the replayed
// initialize carries that same Authorization, so the new upstream session is
// bound upstream to the same credential. A kept session is also keyed by
// that credential's digest, and a request with another one is passed on
// untouched (to the 404 it deserves).
//
// Bounds: at most maxKeptSessions sessions are kept, and at most
// maxKeptBytes of setup per session; past either, a session works as
// before, without continuity.
//
// What is kept is the params of those requests (initialize's without its
// _meta, the level, the subscribed uris), never a header or a tool's
// arguments; the replay rebuilds the messages. With a Store
// (continuity_store.go) it also outlives the process: a studio or an
// agent that restarts finds its clients' sessions there, and an agent's
// replicas on one PostgreSQL database find each other's.

// maxKeptSessions bounds the sessions continuity keeps: the proxy's
// middleware holds at most as many bindings.
const maxKeptSessions = mcphttp.DefaultMaxSessions

// maxKeptBytes bounds the messages kept for one session. A real client's
// initialize is a few hundred bytes; one that sends more loses continuity,
// not its session.
const maxKeptBytes = 16 << 10

// maxKeptSubscriptions bounds the resources/subscribe requests kept for one
// session.
const maxKeptSubscriptions = 64

// renewTimeout bounds the re-establishment of one upstream session
// (initialize, initialized and the replayed requests), shared by every
// request waiting for it.
const renewTimeout = 10 * time.Second

// maxRenewBody bounds what continuity reads of a replayed request's answer.
const maxRenewBody = 1 << 20

// errNotRenewable: the agent's new process refused what its previous one
// accepted (a 4xx to the replayed initialize, another protocol version).
// The client is told 404 and starts over, as it would without continuity.
var errNotRenewable = errors.New("the agent refused to re-establish the session")

// Continuity is one agent's proxy's upstream RoundTripper; see the top of
// this file. Make it with NewContinuity.
type Continuity struct {
	base   http.RoundTripper
	ttl    time.Duration
	now    func() time.Time
	logger *slog.Logger

	// CloseAt, set before the first request, is where Expire sends its
	// DELETE; nil or a nil answer: the session is not closed upstream.
	CloseAt func() *url.URL
	// Store, set before the first request, keeps the sessions beyond this
	// process (continuity_store.go); nil: memory only.
	Store   sessionstore.Store
	closing sync.WaitGroup // expire's DELETEs in flight

	// life ends with EndStreams: the GET streams it carries and the
	// requests waiting for a renewal end with it.
	life    context.Context
	endLife context.CancelFunc

	mu       sync.Mutex              // protects following fields, and every keptSession's mutable fields
	sessions map[string]*keptSession // by the client's session id
	renewals int                     // upstream sessions re-established
	restored int                     // sessions read back from the Store
}

// NewContinuity returns the continuity of one agent's sessions, sent on
// through base; a session unused for ttl is no longer kept.
func NewContinuity(base http.RoundTripper, ttl time.Duration, logger *slog.Logger) *Continuity {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := &Continuity{base: base, ttl: ttl, now: time.Now, logger: logger, sessions: make(map[string]*keptSession)}
	c.life, c.endLife = context.WithCancel(context.Background())
	return c
}

// ErrStreamsEnded is why a request continuity carried ended early: its
// owner called EndStreams (the studio is closing).
var ErrStreamsEnded = errors.New("session continuity: streams ended, the proxy is closing")

// EndStreams ends every GET stream continuity carries and every request
// waiting for a session's renewal, now and from now on, so that their
// handlers return: a client holds its standalone stream open for as long
// as the session lives, and http.Server.Shutdown would wait for it in
// vain. A POST (a call, its answer streamed or not) is left to finish or
// to end with its agent. It is idempotent.
func (c *Continuity) EndStreams() { c.endLife() }

// SetClock sets the clock by which sessions are idle (default time.Now);
// call it before the first request, with the clock of the middleware in
// front, so that both agree on when a session expired.
func (c *Continuity) SetClock(now func() time.Time) {
	if now != nil {
		c.now = now
	}
}

// keptSession is what continuity knows of one client session. Every field
// is guarded by continuity.mu.
type keptSession struct {
	cred string // digest of the Authorization that created it
	// auth is that Authorization itself, which the agent bound the
	// session to: expire's DELETE must carry it. Never rendered.
	auth     string
	upstream string // the agent's session id it maps to now
	// initParams are the params of the client's initialize, without _meta.
	initParams  json.RawMessage
	initialized bool            // the client sent notifications/initialized
	version     string          // MCP-Protocol-Version the client uses; "" until seen
	level       string          // the last logging/setLevel's level; "": none
	subscribed  map[string]bool // the uris of resources/subscribe, less unsubscribes
	size        int             // bytes of the above
	lastUsed    time.Time
	persisted   time.Time // the last use the Store was told of
	renewing    *renewal  // non-nil while one re-establishment runs
	// streams: which request each call stream answers, by stream id, the
	// oldest first in streamOrder (continuity_streams.go).
	streams     map[string]keptStream
	streamOrder []string
	// standalone is the upstream session the client's standalone GET
	// stream was last opened on.
	standalone string
}

// renewal is one re-establishment, shared by every request of the session
// that met the 404 while it ran (as singleflight would share it).
type renewal struct {
	done chan struct{}
	up   string // set before done is closed
	err  error
}

func credDigest(r *http.Request) string {
	v := r.Header.Get("Authorization")
	if v == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(v))
	return hex.EncodeToString(sum[:])
}

// forget drops the client session id (DELETEd, or expired in the
// middleware's table).
func (c *Continuity) forget(ctx context.Context, id string) {
	c.mu.Lock()
	delete(c.sessions, id)
	c.mu.Unlock()
	c.unstore(ctx, id, time.Time{})
}

// closeTimeout bounds Expire's DELETE of one session at the agent.
const closeTimeout = 5 * time.Second

// Expire ends client session id, forgotten by the proxy's middleware for
// being idle past the TTL: its record here goes, and the agent is sent the
// DELETE the client never sent, so that the agent does not hold the session
// (its go-sdk state, its binding) until its own idle timeout. The DELETE
// goes out of the caller's path (the middleware calls this outside its
// lock, but on a request's goroutine), bounded by closeTimeout, tracked by
// Wait.
func (c *Continuity) Expire(id string) {
	c.mu.Lock()
	up, auth := id, ""
	if ks := c.sessions[id]; ks != nil {
		up, auth = ks.upstream, ks.auth
		delete(c.sessions, id)
	}
	c.mu.Unlock()
	// Only if no replica has used it since: the binding was idle here,
	// not necessarily everywhere.
	c.unstore(context.Background(), id, c.horizon())
	if c.CloseAt == nil {
		return
	}
	target := c.CloseAt()
	if target == nil {
		return
	}
	c.closing.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodDelete, target.String(), nil)
		if err != nil {
			c.logger.Warn("continuity: closing an expired session at the agent", "err", err)
			return
		}
		req.Header.Set(mcphttp.SessionIDHeader, up)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := c.base.RoundTrip(req)
		if err != nil {
			c.logger.Info("continuity: could not close an expired session at the agent", "err", err)
			return
		}
		io.Copy(io.Discard, io.LimitReader(resp.Body, maxRenewBody))
		resp.Body.Close()
		c.logger.Debug("continuity: closed an expired session at the agent", "status", resp.StatusCode)
	})
}

// Wait returns when Expire's DELETEs have finished.
func (c *Continuity) Wait() { c.closing.Wait() }

// Kept reports how many sessions continuity keeps and how many upstream
// sessions it has re-established.
func (c *Continuity) Kept() (sessions, renewals int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.sessions), c.renewals
}

// Restored reports how many sessions were read back from the Store.
func (c *Continuity) Restored() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.restored
}

// RoundTrip sends req upstream, on the session it maps to now. A GET (a
// stream that may stay open indefinitely) lasts until EndStreams at most.
func (c *Continuity) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet {
		return c.roundTrip(req)
	}
	return RoundTripWithin(c.life, ErrStreamsEnded, req, c.roundTrip)
}

func (c *Continuity) roundTrip(req *http.Request) (*http.Response, error) {
	id := req.Header.Get(mcphttp.SessionIDHeader)
	msg, _ := mcphttp.MessageFrom(req.Context())
	if id == "" {
		if msg != nil && msg.Method == "initialize" && req.Method == http.MethodPost {
			return c.initialize(req)
		}
		return c.base.RoundTrip(req)
	}
	cred := credDigest(req)
	c.mu.Lock()
	ks := c.sessions[id]
	if ks != nil && (ks.cred != cred || c.expiredLocked(ks)) {
		if ks.cred == cred {
			delete(c.sessions, id)
		}
		ks = nil
	}
	var up string
	var resume resumption
	var touch time.Time
	if ks != nil {
		ks.lastUsed = c.now()
		up = ks.upstream
		if ks.auth == "" {
			// Restored from the Store, which keeps no credential: this
			// request's is the one (its digest matched).
			ks.auth = req.Header.Get("Authorization")
		}
		if req.Method == http.MethodGet {
			resume = ks.resumptionLocked(req.Header.Get("Last-Event-ID"))
		}
		if c.Store != nil && ks.lastUsed.Sub(ks.persisted) >= c.touchEvery() {
			ks.persisted, touch = ks.lastUsed, ks.lastUsed
		}
	}
	c.mu.Unlock()
	if ks == nil {
		return c.base.RoundTrip(req)
	}
	if !touch.IsZero() {
		c.touchStored(req.Context(), id, touch)
	}
	if resume == resumeLost {
		lost, _ := c.lostStream(req, ks, req.Header.Get("Last-Event-ID"))
		return lost, nil
	}

	out := c.outbound(req, up, resume == resumeFresh)
	resp, err := c.base.RoundTrip(out)
	if err != nil || resp.StatusCode != http.StatusNotFound {
		return c.answered(req, msg, id, ks, up, resp, err)
	}
	// The agent does not know the upstream session: its process restarted
	// (or it expired the session). The 404 was answered before dispatch, so
	// nothing ran.
	notFound, _ := readSome(resp.Body, maxRenewBody)
	resp.Body.Close()
	if req.Method == http.MethodDelete {
		// The session the client is ending is already gone upstream.
		c.forget(req.Context(), id)
		return synthesized(req, http.StatusNoContent, nil, nil), nil
	}
	if lei := req.Header.Get("Last-Event-ID"); lei != "" && req.Method == http.MethodGet {
		if lost, ok := c.lostStream(req, ks, lei); ok {
			return lost, nil
		}
	}
	sent := resp.Request
	if sent == nil {
		sent = out
	}
	up, err = c.renew(req.Context(), ks, up, sent)
	switch {
	case errors.Is(err, errNotRenewable):
		c.forget(req.Context(), id)
		c.logger.Info("continuity: the agent refused to re-establish a session; the client gets its 404", "err", err)
		return synthesized(req, http.StatusNotFound, resp.Header, notFound), nil
	case err != nil:
		// Nothing ran; the session is kept for the client's next try.
		c.logger.Warn("continuity: could not re-establish a session after the agent's restart", "err", err)
		h := http.Header{"Retry-After": {"1"}}
		return synthesized(req, http.StatusServiceUnavailable, h,
			continuityError(msg, fmt.Sprintf("the agent restarted and its session could not be re-established yet (nothing ran): %v", err))), nil
	}
	again := c.outbound(req, up, true)
	again.URL.Host = sent.URL.Host
	if req.Method == http.MethodGet {
		c.mu.Lock()
		ks.standalone = up
		c.mu.Unlock()
	}
	resp, err = c.base.RoundTrip(again)
	return c.answered(req, msg, id, ks, up, resp, err)
}

// outbound is req with the upstream session id; renewed drops Last-Event-ID,
// which names an event of a stream that died with the previous process.
func (c *Continuity) outbound(req *http.Request, up string, renewed bool) *http.Request {
	out := req.Clone(req.Context())
	out.Header.Set(mcphttp.SessionIDHeader, up)
	if renewed {
		out.Header.Del("Last-Event-ID")
		if req.GetBody != nil {
			if body, err := req.GetBody(); err == nil {
				out.Body = body
			}
		}
	}
	return out
}

// answered records what a successful request set up and maps the upstream
// session id in the response back to the client's.
func (c *Continuity) answered(req *http.Request, msg *mcphttp.Message, id string, ks *keptSession, up string, resp *http.Response, err error) (*http.Response, error) {
	if err != nil {
		return nil, err
	}
	if got := resp.Header.Get(mcphttp.SessionIDHeader); got != "" && got == up {
		resp.Header.Set(mcphttp.SessionIDHeader, id)
	}
	if resp.StatusCode/100 != 2 {
		return resp, nil
	}
	if req.Method == http.MethodDelete {
		c.forget(req.Context(), id)
		return resp, nil
	}
	if msg == nil || req.Method != http.MethodPost {
		return resp, nil
	}
	c.watchPrime(resp, ks, msg.ID, up)
	switch msg.Method {
	case "notifications/initialized", "logging/setLevel", "resources/subscribe", "resources/unsubscribe":
		body := bodyOf(req)
		c.mu.Lock()
		changed := c.recordLocked(ks, msg.Method, body, req.Header.Get("MCP-Protocol-Version"))
		var rec sessionstore.Record
		if changed {
			rec = c.recordOfLocked(id, ks)
		}
		c.mu.Unlock()
		if changed {
			// Before the answer reaches the client: its next request may
			// reach another replica, or this process's successor.
			c.store(req.Context(), rec)
		}
	}
	return resp, nil
}

// recordLocked records what the request of method with body changes in
// the session's setup, within maxKeptBytes, and reports whether anything
// changed. Only params are kept: the level, a subscription's uri.
func (c *Continuity) recordLocked(ks *keptSession, method string, body []byte, version string) bool {
	if body == nil {
		return false
	}
	var p struct {
		Params struct {
			URI   string `json:"uri"`
			Level string `json:"level"`
		} `json:"params"`
	}
	if method != "notifications/initialized" && json.Unmarshal(body, &p) != nil {
		return false
	}
	switch method {
	case "notifications/initialized":
		changed := !ks.initialized || (version != "" && version != ks.version)
		ks.initialized = true
		if version != "" && len(version) <= maxVersionBytes {
			ks.size += len(version) - len(ks.version)
			ks.version = version
		}
		return changed
	case "logging/setLevel":
		level := p.Params.Level
		if level == "" || level == ks.level || ks.size-len(ks.level)+len(level) > maxKeptBytes {
			return false
		}
		ks.size += len(level) - len(ks.level)
		ks.level = level
		return true
	case "resources/unsubscribe":
		if uri := p.Params.URI; ks.subscribed[uri] {
			delete(ks.subscribed, uri)
			ks.size -= len(uri)
			return true
		}
		return false
	case "resources/subscribe":
		uri := p.Params.URI
		if uri == "" || ks.subscribed[uri] || len(ks.subscribed) >= maxKeptSubscriptions || ks.size+len(uri) > maxKeptBytes {
			return false
		}
		if ks.subscribed == nil {
			ks.subscribed = make(map[string]bool)
		}
		ks.subscribed[uri] = true
		ks.size += len(uri)
		return true
	}
	return false
}

// maxVersionBytes bounds a protocol version kept (they are dates).
const maxVersionBytes = 32

// initializeParams returns the params of an initialize body without their
// _meta (a trace context, a client's own extensions: nothing the new
// session needs, and nothing to keep on disk).
func initializeParams(body []byte) (json.RawMessage, bool) {
	var m struct {
		Params map[string]json.RawMessage `json:"params"`
	}
	if json.Unmarshal(body, &m) != nil || m.Params == nil {
		return nil, false
	}
	delete(m.Params, "_meta")
	b, err := json.Marshal(m.Params)
	return b, err == nil
}

// initialize forwards a new session's initialize and keeps it.
func (c *Continuity) initialize(req *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	id := resp.Header.Get(mcphttp.SessionIDHeader)
	body := bodyOf(req)
	if id == "" || body == nil || len(body) > maxKeptBytes {
		return resp, nil // stateless, or too big to keep: no continuity
	}
	params, ok := initializeParams(body)
	if !ok {
		return resp, nil
	}
	now := c.now()
	ks := &keptSession{cred: credDigest(req), auth: req.Header.Get("Authorization"), upstream: id, standalone: id,
		initParams: params, size: len(params), lastUsed: now, persisted: now}
	c.mu.Lock()
	if len(c.sessions) >= maxKeptSessions {
		c.pruneLocked()
	}
	if len(c.sessions) >= maxKeptSessions {
		c.mu.Unlock()
		c.logger.Debug("continuity: keeping as many sessions as allowed; this one has none", "max", maxKeptSessions)
		return resp, nil
	}
	c.sessions[id] = ks
	rec := c.recordOfLocked(id, ks)
	c.mu.Unlock()
	// Kept before the client has the answer, so that its next request
	// finds it wherever it lands.
	c.store(req.Context(), rec)
	return resp, nil
}

func (c *Continuity) expiredLocked(ks *keptSession) bool {
	return c.ttl > 0 && c.now().Sub(ks.lastUsed) > c.ttl
}

// pruneLocked drops the sessions idle past the TTL. It runs only when the
// map is full, so its scan is bounded by the cap and rare.
func (c *Continuity) pruneLocked() {
	for id, ks := range c.sessions {
		if c.expiredLocked(ks) {
			delete(c.sessions, id)
		}
	}
}

// renew returns the upstream session the client's session maps to once
// failed (the one that met the 404) is replaced: the first request to get
// here establishes it, the others wait for that one. The work runs without
// the caller's cancellation (another caller may be waiting for it), bounded
// by renewTimeout.
func (c *Continuity) renew(ctx context.Context, ks *keptSession, failed string, sent *http.Request) (string, error) {
	c.mu.Lock()
	if ks.upstream != failed {
		up := ks.upstream
		c.mu.Unlock()
		return up, nil
	}
	rn := ks.renewing
	if rn == nil {
		rn = &renewal{done: make(chan struct{})}
		ks.renewing = rn
		snap := *ks // the replay reads a copy, outside the lock
		snap.subscribed = make(map[string]bool, len(ks.subscribed))
		for uri := range ks.subscribed {
			snap.subscribed[uri] = true
		}
		c.mu.Unlock()
		go func() {
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), renewTimeout)
			defer cancel()
			defer context.AfterFunc(c.life, cancel)()
			rn.up, rn.err = c.establish(wctx, &snap, sent)
			c.mu.Lock()
			if rn.err == nil {
				ks.upstream = rn.up
				c.renewals++
			}
			ks.renewing = nil
			c.mu.Unlock()
			close(rn.done)
		}()
	} else {
		c.mu.Unlock()
	}
	select {
	case <-rn.done:
		return rn.up, rn.err
	case <-ctx.Done():
		return "", ctx.Err()
	case <-c.life.Done():
		return "", ErrStreamsEnded
	}
}

// establish replays what the client sent to set its session up, on the
// agent process that answered sent, and returns the new session's id.
func (c *Continuity) establish(ctx context.Context, ks *keptSession, sent *http.Request) (string, error) {
	hdr := sent.Header.Clone()
	for _, h := range []string{mcphttp.SessionIDHeader, "MCP-Protocol-Version", "Last-Event-ID", "Content-Length"} {
		hdr.Del(h)
	}
	hdr.Set("Content-Type", "application/json")
	hdr.Set("Accept", "application/json, text/event-stream")
	post := func(body []byte, session string) (*http.Response, []byte, error) {
		r, err := http.NewRequestWithContext(ctx, http.MethodPost, sent.URL.String(), bytes.NewReader(body))
		if err != nil {
			return nil, nil, err
		}
		r.Header = hdr.Clone()
		// As the request that met the 404 was addressed: in-process
		// (HandlerTransport), go-sdk checks Host against its loopback
		// listener.
		r.Host = sent.Host
		if session != "" {
			r.Header.Set(mcphttp.SessionIDHeader, session)
		}
		resp, err := c.base.RoundTrip(r)
		if err != nil {
			return nil, nil, fmt.Errorf("replaying to %s: %w", sent.URL.Host, err)
		}
		defer resp.Body.Close()
		b, err := readSome(resp.Body, maxRenewBody)
		if err != nil {
			return nil, nil, fmt.Errorf("reading the agent's answer: %w", err)
		}
		if resp.StatusCode/100 != 2 {
			err := fmt.Errorf("the agent answered %s", resp.Status)
			if resp.StatusCode/100 == 4 {
				err = fmt.Errorf("%w: %w", errNotRenewable, err)
			}
			return nil, nil, err
		}
		return resp, b, nil
	}
	resp, body, err := post(replayMessage("initialize", ks.initParams), "")
	if err != nil {
		return "", fmt.Errorf("initialize: %w", err)
	}
	up := resp.Header.Get(mcphttp.SessionIDHeader)
	if up == "" {
		return "", fmt.Errorf("%w: its initialize answer has no %s", errNotRenewable, mcphttp.SessionIDHeader)
	}
	version := negotiatedVersion(body)
	if ks.version != "" && version != ks.version {
		return "", fmt.Errorf("%w: it now negotiates protocol version %q, the client's session uses %q", errNotRenewable, version, ks.version)
	}
	if version != "" {
		hdr.Set("MCP-Protocol-Version", version)
	}
	replays := [][]byte{[]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)}
	if ks.level != "" {
		p, _ := json.Marshal(map[string]string{"level": ks.level})
		replays = append(replays, replayMessage("logging/setLevel", p))
	}
	for uri := range ks.subscribed {
		p, _ := json.Marshal(map[string]string{"uri": uri})
		replays = append(replays, replayMessage("resources/subscribe", p))
	}
	for _, b := range replays {
		if _, _, err := post(b, up); err != nil {
			return "", fmt.Errorf("replaying the session's setup: %w", err)
		}
	}
	c.logger.Info("continuity: re-established a session after the agent's restart", "upstream", sent.URL.Host)
	return up, nil
}

// replayMessage is the request continuity sends in the client's place,
// with an id of its own: the answer is read by continuity, not the client.
func replayMessage(method string, params json.RawMessage) []byte {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "switchboard-continuity", "method": method, "params": params})
	return b
}

// negotiatedVersion finds result.protocolVersion in an initialize answer,
// a JSON body or an SSE stream of one; "" when there is none.
func negotiatedVersion(body []byte) string {
	var res struct {
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	if json.Unmarshal(body, &res) == nil {
		return res.Result.ProtocolVersion
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, maxRenewBody)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data:"); ok {
			if json.Unmarshal([]byte(strings.TrimSpace(data)), &res) == nil && res.Result.ProtocolVersion != "" {
				return res.Result.ProtocolVersion
			}
		}
	}
	return ""
}

// bodyOf is a copy of req's body, which the middleware has read and made
// replayable; nil when it is not.
func bodyOf(req *http.Request) []byte {
	if req.GetBody == nil {
		return nil
	}
	rc, err := req.GetBody()
	if err != nil {
		return nil
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return nil
	}
	return b
}

func readSome(r io.Reader, max int64) ([]byte, error) {
	return io.ReadAll(io.LimitReader(r, max))
}

// synthesized is an answer continuity gives in the agent's place.
func synthesized(req *http.Request, status int, hdr http.Header, body []byte) *http.Response {
	h := http.Header{}
	for k, v := range hdr {
		h[k] = v
	}
	h.Del("Content-Length")
	if body != nil && h.Get("Content-Type") == "" {
		h.Set("Content-Type", "application/json")
	}
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", status, http.StatusText(status)),
		StatusCode:    status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}

func continuityError(msg *mcphttp.Message, message string) []byte {
	var id json.RawMessage
	if msg != nil {
		id = msg.ID
	}
	if id == nil {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": id,
		"error": map[string]any{"code": CodeServerError, "message": message},
	})
	return b
}
