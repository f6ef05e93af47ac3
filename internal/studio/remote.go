package studio

// Agents on other hosts. An agent folder whose agent.json gives a url
// (agentdef.Definition.Remote) is an agent the studio proxies to and does
// not run. It is a supervisor.Member like the processes the studio runs,
// so its route, its session continuity, the console, /api/agents and the
// metrics treat it as they treat those: its state is always
// studioapi.StateRemote, which is routable, and its Upstream is its url.
//
// What differs is what a refused connection means. The studio knows when
// its own agent's new process listens (the supervisor reads its ready
// line), so proxy.Redial waits for that and sends the request to the new
// address. A remote agent keeps its address, and the studio learns that
// it is back only by asking: its /healthz, beside its MCP endpoint, is
// checked every RemoteCheckInterval while it answers, and after a failure
// at once and then with a backoff from remoteRetryMin up to that
// interval (see check for what counts as an answer). A request whose connection the remote refused (nothing of it
// was sent) marks the remote unreachable and starts those checks; it is
// held (at most RestartWait, and only while the remote has been
// unreachable for less than that, so that a long outage answers at once)
// until a check succeeds, then sent again, once. Otherwise the client gets
// 503 with Retry-After and a JSON-RPC error saying nothing was sent:
// unlike the proxy's 502 (the agent did not answer a request it may have
// run), a refused connection proves the request never left.
//
// A remote that restarted answers 404 to the sessions of its previous
// process, as a local agent's new process does, and session continuity
// (proxy.Continuity, in front of this transport) re-establishes them the
// same way.
//
// Credentials. The client's Authorization (the studio's own token, in
// token mode) is for the studio and never leaves it: every request to a
// remote carries the remote's own bearer token (agent.json's token_env,
// looked up when the studio starts) or no Authorization at all. The
// continuity layer above still sees, and binds sessions to, the client's
// credential. The token is redacted from everything the studio records,
// and the URL is shown without user info (refused by agentdef), query and
// fragment.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-run/switchboard/internal/fleetmetrics"
	"github.com/switchboard-run/switchboard/internal/mcphttp"
	"github.com/switchboard-run/switchboard/internal/proxy"
	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/internal/supervisor"
	"github.com/switchboard-run/switchboard/pool/mcpconfig"
	"github.com/switchboard-run/switchboard/runtime/agentdef"
)

// DefaultRemoteCheckInterval is how often a remote agent that answers is
// checked.
const DefaultRemoteCheckInterval = 10 * time.Second

// remoteRetryMin is the first delay before checking again a remote agent
// that did not answer; it doubles up to the check interval.
const remoteRetryMin = 250 * time.Millisecond

// remoteCheckTimeout bounds one check of a remote agent's /healthz.
const remoteCheckTimeout = 3 * time.Second

// maxRemoteHistory bounds a remote agent's history of reachability
// changes.
const maxRemoteHistory = 50

// Events of a remote agent's history.
const (
	eventReachable   = "reachable"
	eventUnreachable = "unreachable"
)

// remote is an agent on another host: a supervisor.Member whose Run checks
// its health instead of running a process.
type remote struct {
	def      *agentdef.Definition
	endpoint *url.URL          // its MCP endpoint, as configured
	health   *url.URL          // its /healthz, beside the endpoint
	shown    string            // endpoint without user info, query and fragment
	rt       http.RoundTripper // to the remote, with its token
	interval time.Duration
	logger   *slog.Logger

	firstDone chan struct{}
	firstOnce sync.Once
	kick      chan struct{} // buffered: check now

	mu        sync.Mutex    // protects following fields
	changed   chan struct{} // closed and replaced when reachability changes
	checked   bool          // a check has finished
	reachable bool
	checkedAt time.Time
	since     time.Time // when reachable last changed
	lastErr   string
	metrics   string
	history   []studioapi.ControlEvent
}

var _ supervisor.Member = (*remote)(nil)

// newRemote returns the member for def, reached through base with token
// (empty: none) as its bearer token.
func newRemote(def *agentdef.Definition, token string, base http.RoundTripper, interval time.Duration, logger *slog.Logger) (*remote, error) {
	u, err := url.Parse(def.URL)
	if err != nil {
		// agentdef parsed it already; this is unreachable.
		return nil, fmt.Errorf("agent %s: url: %w", def.Name, err)
	}
	shown := *u
	shown.User, shown.RawQuery, shown.ForceQuery, shown.Fragment, shown.RawFragment = nil, "", false, "", ""
	return &remote{
		def: def, endpoint: u, health: fleetmetrics.Beside(u, "healthz"), shown: shown.String(),
		rt: &bearer{base: base, token: token}, interval: interval, logger: logger.With("agent", def.Name),
		firstDone: make(chan struct{}), kick: make(chan struct{}, 1), changed: make(chan struct{}),
	}, nil
}

// remoteToken is the bearer token of the remote agent def: the value of
// the variable its token_env names, in env (the last of a key winning)
// or else the studio's environment. An unset or empty one is an error
// naming the agent.json and the field: the agent would refuse every
// request.
func remoteToken(def *agentdef.Definition, env []string) (string, error) {
	if def.TokenEnv == "" {
		return "", nil
	}
	v, ok := "", false
	for _, kv := range slices.Backward(env) {
		if val, found := strings.CutPrefix(kv, def.TokenEnv+"="); found {
			v, ok = val, true
			break
		}
	}
	if !ok {
		v, ok = os.LookupEnv(def.TokenEnv)
	}
	if !ok || v == "" {
		return "", &mcpconfig.ConfigError{File: filepath.Join(def.Dir, agentdef.DefinitionFile), Field: "token_env", Value: def.TokenEnv,
			Msg: fmt.Sprintf("environment variable %s is not set (or empty); the studio sends its value as agent %s's bearer token", def.TokenEnv, def.Name)}
	}
	return v, nil
}

func (r *remote) Def() *agentdef.Definition  { return r.def }
func (r *remote) FirstDone() <-chan struct{} { return r.firstDone }

// Run checks the remote's health until ctx is done: every interval while
// it answers; after a failure (or a refused request, see lost) at once,
// then with a doubling delay from remoteRetryMin up to the interval.
func (r *remote) Run(ctx context.Context) {
	defer r.firstOnce.Do(func() { close(r.firstDone) })
	failures := 0
	for ctx.Err() == nil {
		err := r.check(ctx)
		if ctx.Err() != nil {
			return
		}
		r.record(err)
		r.firstOnce.Do(func() { close(r.firstDone) })
		delay := r.interval
		if err != nil {
			failures++
			delay = min(remoteRetryMin<<min(failures-1, 16), r.interval)
		} else {
			failures = 0
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-r.kick:
			t.Stop()
			failures = 0
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// check asks the remote's /healthz once. A 2xx is healthy; 401 and 403
// are not (the agent refuses the studio's token); any other 4xx is an
// answer from a server that has no /healthz, so it is reachable; a 5xx
// (a gateway whose backend is down) or no answer is not.
func (r *remote) check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, remoteCheckTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.health.String(), nil)
	if err != nil {
		return err
	}
	resp, err := r.rt.RoundTrip(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", r.health, err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	switch c := resp.StatusCode; {
	case c/100 == 2:
		return nil
	case c == http.StatusUnauthorized || c == http.StatusForbidden:
		// Every proxied request would be refused the same way.
		return fmt.Errorf("GET %s: %s: the agent refuses the studio's credentials (check token_env)", r.health, resp.Status)
	case c/100 == 4:
		// An MCP server that is not an agent serve may have no /healthz
		// (go-sdk's handler, mounted at the root, answers 400 or 405):
		// it answered, which is all a check can ask of it.
		return nil
	}
	return fmt.Errorf("GET %s: %s", r.health, resp.Status)
}

// record sets the remote's reachability from a check's outcome.
func (r *remote) record(err error) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.checkedAt = now
	if err != nil {
		r.lastErr = err.Error()
	} else {
		r.lastErr = ""
	}
	r.setReachableLocked(err == nil, now, r.lastErr)
	r.checked = true
}

// setReachableLocked records a change of reachability, with the event
// and the log line it deserves. r.mu must be held.
func (r *remote) setReachableLocked(ok bool, now time.Time, why string) {
	if ok == r.reachable && r.checked {
		return
	}
	first := !r.checked
	r.reachable, r.since = ok, now
	close(r.changed)
	r.changed = make(chan struct{})
	if first && ok {
		return // answering from the start: nothing happened
	}
	e := studioapi.ControlEvent{Time: now, Event: eventReachable}
	if !ok {
		e.Event, e.Reason = eventUnreachable, why
		r.logger.Warn("remote agent unreachable", "url", r.shown, "err", why)
	} else {
		r.logger.Info("remote agent reachable again", "url", r.shown)
	}
	if len(r.history) >= maxRemoteHistory {
		r.history = append(r.history[:0], r.history[1:]...)
	}
	r.history = append(r.history, e)
}

// lost is told that a connection to the remote was refused: it is
// unreachable now, and the checks begin again at once.
func (r *remote) lost(err error) {
	r.mu.Lock()
	r.lastErr = err.Error()
	r.setReachableLocked(false, time.Now(), r.lastErr)
	r.checked = true
	r.mu.Unlock()
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// answered is told that the remote answered a request: it is reachable,
// whatever the last check said.
func (r *remote) answered() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.reachable || !r.checked {
		r.lastErr = ""
		r.setReachableLocked(true, time.Now(), "")
		r.checked = true
	}
}

// awaitReachable waits, at most max, until a check finds the remote
// answering again, and reports whether one did. It does not wait for a
// remote that has been unreachable for longer than max: a long outage is
// answered at once, not after max every time.
func (r *remote) awaitReachable(ctx context.Context, max time.Duration) bool {
	if max <= 0 {
		return false
	}
	t := time.NewTimer(max)
	defer t.Stop()
	limit := time.Now().Add(-max)
	for {
		r.mu.Lock()
		ok, since, changed := r.reachable, r.since, r.changed
		r.mu.Unlock()
		switch {
		case ok:
			return true
		case since.Before(limit):
			return false
		}
		select {
		case <-changed:
		case <-t.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// noteMetrics is told how the last scrape of the remote's /metrics went
// (fleetmetrics.Agent.Scraped).
func (r *remote) noteMetrics(outcome string) {
	r.mu.Lock()
	r.metrics = outcome
	r.mu.Unlock()
}

// Status is the remote as the routes and the console read it: always
// routable, to its url.
func (r *remote) Status() supervisor.Status {
	u := *r.endpoint
	r.mu.Lock()
	defer r.mu.Unlock()
	info := &studioapi.RemoteAgent{URL: r.shown, Reachable: r.reachable, Error: r.lastErr, TokenEnv: r.def.TokenEnv, Metrics: r.metrics}
	if r.checked {
		at, since := r.checkedAt, r.since
		info.CheckedAt, info.Since = &at, &since
	}
	return supervisor.Status{State: studioapi.StateRemote, Upstream: &u, Remote: info}
}

// AwaitRunning returns at once: a remote is always routed to, and a
// request it refuses is held by remoteTransport instead.
func (r *remote) AwaitRunning(context.Context, time.Duration, string) supervisor.Status {
	return r.Status()
}

// History is the remote's reachability changes, newest first.
func (r *remote) History() []studioapi.ControlEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]studioapi.ControlEvent, len(r.history))
	for i, e := range r.history {
		out[len(out)-1-i] = e
	}
	return out
}

func (r *remote) Restart(string) error { return r.notSupervised() }
func (r *remote) Stop(string) error    { return r.notSupervised() }
func (r *remote) Start(string) error   { return r.notSupervised() }

func (r *remote) notSupervised() error {
	return fmt.Errorf("agent %s at %s: %w", r.def.Name, r.shown, supervisor.ErrNotSupervised)
}

// bearer sends every request with its own Authorization, replacing the
// client's: token as a bearer token, or none.
type bearer struct {
	base  http.RoundTripper
	token string
}

func (b *bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	out := req.Clone(req.Context())
	out.Header.Del("Authorization")
	if b.token != "" {
		out.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.base.RoundTrip(out)
}

// remoteTransport carries one remote agent's proxied requests: with the
// remote's token, and, for a refused connection, the hold and the one
// resend at the top of this file, or a 503 saying nothing was sent.
type remoteTransport struct {
	r    *remote
	wait time.Duration
	// life ends every request in flight, streams included, when the
	// studio closes: nothing else would end a remote's SSE stream.
	life context.Context
	// resent, optional, is told of every request sent again.
	resent func(context.Context)
}

func (t *remoteTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return proxy.RoundTripWithin(t.life, nil, req, t.roundTrip)
}

func (t *remoteTransport) roundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.r.rt.RoundTrip(req)
	if err == nil {
		t.r.answered()
		return resp, nil
	}
	if !dialFailed(err) {
		return nil, err
	}
	t.r.lost(err)
	replayable := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	if replayable && t.r.awaitReachable(req.Context(), t.wait) {
		again := req.Clone(req.Context())
		if req.GetBody != nil {
			body, gerr := req.GetBody()
			if gerr != nil {
				return t.refused(req, err), nil
			}
			again.Body = body
		}
		if t.resent != nil {
			t.resent(req.Context())
		}
		resp, err = t.r.rt.RoundTrip(again)
		if err == nil {
			t.r.answered()
			return resp, nil
		}
		if !dialFailed(err) {
			return nil, err
		}
		t.r.lost(err)
	}
	return t.refused(req, err), nil
}

// refused is the 503 for a request the remote's host refused: nothing
// was sent, so the client may send it again, after Retry-After.
func (t *remoteTransport) refused(req *http.Request, err error) *http.Response {
	var id json.RawMessage = json.RawMessage("null")
	if msg, ok := mcphttp.MessageFrom(req.Context()); ok && msg != nil && msg.ID != nil {
		id = msg.ID
	}
	body, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": id,
		"error": map[string]any{
			"code":    proxy.CodeServerError,
			"message": fmt.Sprintf("agent %s at %s refused the connection (nothing was sent): %v", t.r.def.Name, t.r.shown, err),
			"data":    map[string]any{"agent": t.r.def.Name, "state": studioapi.StateRemote, "reachable": false},
		},
	})
	return &http.Response{
		Status: "503 Service Unavailable", StatusCode: http.StatusServiceUnavailable,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"application/json"}, "Retry-After": {"1"}},
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}

// dialFailed reports whether err means the connection could not be made,
// so nothing of the request was sent (proxy.Redial's test, for a remote).
func dialFailed(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
