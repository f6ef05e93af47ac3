package studio

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-run/switchboard/delegation"
	"github.com/switchboard-run/switchboard/internal/console"
	"github.com/switchboard-run/switchboard/internal/mcphttp"
	"github.com/switchboard-run/switchboard/internal/observe"
	"github.com/switchboard-run/switchboard/internal/proxy"
	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/internal/supervisor"
	"github.com/switchboard-run/switchboard/pool"
)

// Routing is strict and done by hand on the escaped path: ServeMux would
// clean "/api/agents/x/../y/mcp" and redirect, and decode "%2F"; here
// anything but exactly /api/agents/<name>/mcp, with <name> a known agent,
// is a 404.
//
//	GET  /healthz                 200 "ok"
//	GET  /readyz                  200 once every agent runs, 503 before and while the studio shuts down (ready.go)
//	GET  /                        the studio page (package console)
//	GET  /static/studio.{css,js}  the page's style and script
//	GET  /metrics                 Prometheus metrics: the studio's and every agent's (package fleetmetrics)
//	GET  /api/agents              the agents, their state and tools
//	GET  /api/overview            what the page shows: agents, pools, recent delegations
//	GET  /api/delegations         the most recent tools/calls through the proxy
//	GET  /api/auth                the sign-in state of the agents' OAuth servers (auth.go)
//	GET|POST /login, POST /logout the console's sign-in in token mode (console/auth.go)
//	*    /api/agents/<name>/mcp   the agent's MCP endpoint, observed and proxied
//	     /runs/..., /agents/<name>, /api/runs..., /api/agents/<name>[/action]
//	                              the console's pages and API (package console)
//
// Everything but /healthz and /readyz passes the same gate: Host and Origin (DNS
// rebinding), then the bearer token when the studio has one, or a
// browser's session cookie from /login. The page is no exception: it
// names the agents and shows what they were asked. /login itself is
// checked for Host and Origin only, and so is /static/ (the script and
// style the sign-in page needs, the same in every studio).

func (s *Studio) routes() http.Handler {
	api := s.guard(http.HandlerFunc(s.serveAPI))
	page := s.guard(http.HandlerFunc(s.console.ServePage))
	// The page's script and style are the same in every studio and hold
	// nothing of this one: the sign-in page needs them before there is a
	// session, so they pass Host and Origin only.
	static := s.hostOrigin(http.HandlerFunc(s.console.ServeStatic))
	metrics := s.guard(s.fleet)
	// The sign-in page and the exchange of the token for a session are
	// reached without the token; Host and Origin are checked all the same.
	login := s.hostOrigin(http.HandlerFunc(s.console.ServeLogin))
	logout := s.guard(http.HandlerFunc(s.console.ServeLogout))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path := r.URL.EscapedPath()
		switch {
		case path == "/healthz":
			io.WriteString(w, "ok\n")
		case path == "/readyz":
			s.serveReadyz(w, r)
		case path == "/login":
			login.ServeHTTP(w, r)
		case path == "/logout":
			logout.ServeHTTP(w, r)
		case path == "/api" || strings.HasPrefix(path, "/api/"):
			api.ServeHTTP(w, r)
		case path == "/" || console.IsPage(path):
			page.ServeHTTP(w, r)
		case strings.HasPrefix(path, "/static/"):
			static.ServeHTTP(w, r)
		case path == "/metrics":
			metrics.ServeHTTP(w, r)
		default:
			console.NotFound(w, path)
		}
	})
}

// guard checks Host and Origin, then the token (if any), before next. Host
// and Origin come first: a rebinding page must not even learn whether a
// token is required. In token mode a browser signed in at /login passes
// with its session cookie instead (console/auth.go), on its own page only;
// a page asked for without either is sent to /login.
func (s *Studio) guard(next http.Handler) http.Handler {
	return s.hostOrigin(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.opts.Token == "" || mcphttp.CheckBearer(r, s.opts.Token) {
			// Nothing more to check, or the token: the connection has
			// proved itself to the connection budget.
			mcphttp.Vouch(r)
			next.ServeHTTP(w, r)
			return
		}
		ok, err := s.console.SessionOK(r)
		switch {
		case err != nil:
			mcphttp.WriteJSONError(w, http.StatusForbidden, err.Error())
			return
		case ok:
			mcphttp.Vouch(r)
			next.ServeHTTP(w, r)
			return
		}
		// A browser's navigation (it asks for HTML, with no token) to a
		// page is shown the way in; a program is told what it lacks.
		if path := r.URL.EscapedPath(); r.Method == http.MethodGet && (path == "/" || console.IsPage(path)) &&
			r.Header.Get("Authorization") == "" && strings.Contains(r.Header.Get("Accept"), "text/html") {
			http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		mcphttp.WriteUnauthorized(w)
	}))
}

// hostOrigin checks Host and Origin (DNS rebinding) before next.
func (s *Studio) hostOrigin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := mcphttp.CheckHost(r); err != nil {
			mcphttp.WriteJSONError(w, http.StatusForbidden, err.Error())
			return
		}
		if err := mcphttp.CheckOrigin(r); err != nil {
			mcphttp.WriteJSONError(w, http.StatusForbidden, err.Error())
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Studio) serveAPI(w http.ResponseWriter, r *http.Request) {
	path := r.URL.EscapedPath()
	get := func(what string, serve http.HandlerFunc) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET")
			mcphttp.WriteJSONError(w, http.StatusMethodNotAllowed, "GET "+path+" "+what)
			return
		}
		serve(w, r)
	}
	if s.console.ServeAPI(w, r, path) {
		return
	}
	switch path {
	case "/api/agents":
		get("lists the agents", s.console.ServeAgents)
		return
	case "/api/auth":
		get("is the sign-in state of the agents' OAuth servers", s.serveAuth)
		return
	}
	rest, ok := strings.CutPrefix(path, "/api/agents/")
	if !ok {
		console.NotFound(w, path)
		return
	}
	name, tail, ok := strings.Cut(rest, "/")
	if !ok || tail != "mcp" || !console.ValidName(name) {
		console.NotFound(w, path)
		return
	}
	m, ok := s.agents[name]
	if !ok {
		mcphttp.WriteJSONRPCErrorData(w, http.StatusNotFound, nil, proxy.CodeServerError,
			fmt.Sprintf("unknown agent %q; known agents: %s", name, strings.Join(s.names, ", ")),
			map[string]any{"agent": name, "known": s.names})
		return
	}
	s.observer.Serve(name, w, r, func(w http.ResponseWriter, r *http.Request) {
		held := time.Now()
		st := m.proc.AwaitRunning(r.Context(), s.opts.RestartWait, "")
		observe.NoteHeld(r.Context(), time.Since(held))
		if !st.Routable() {
			writeDown(w, name, st)
			return
		}
		ctx := context.WithValue(r.Context(), upstreamKey{}, st.Upstream)
		m.route.ServeHTTP(w, r.WithContext(ctx))
	})
}

// sessionIdleTTL forgets a proxied session's binding after this long
// unused: longer than the agents' own idle timeout (agent serve's default
// --session-timeout, 30m), so the agent, not the proxy, decides when a
// session expires, and its 404 prunes the binding.
const sessionIdleTTL = 31 * time.Minute

// upstreamKey carries the agent's address, read once with its state, to the
// proxy's Rewrite.
type upstreamKey struct{}

// upstreamBase is what carries requests to the agents, under the redial
// or a remote's transport.
func (s *Studio) upstreamBase() http.RoundTripper {
	var base http.RoundTripper = s.transport
	if s.opts.wrapUpstream != nil {
		base = s.opts.wrapUpstream(base)
	}
	return base
}

// agentProxy returns the route to proc's current address. upstream, when
// not nil, carries its requests instead of the redial to a new process
// (a remote agent's, remote.go).
func (s *Studio) agentProxy(proc supervisor.Member, upstream http.RoundTripper) (*mcphttp.Handler, *proxy.Continuity) {
	name := proc.Def().Name
	if upstream == nil {
		upstream = &proxy.Redial{
			Base: s.upstreamBase(),
			Wait: s.opts.RestartWait,
			Await: func(ctx context.Context, max time.Duration, gone string) *url.URL {
				st := proc.AwaitRunning(ctx, max, gone)
				if st.State != studioapi.StateRunning {
					return nil
				}
				return st.Upstream
			},
			Resent: observe.NoteReplayed,
		}
	}
	cont := proxy.NewContinuity(upstream, s.opts.SessionIdleTTL, s.logger.With("agent", name))
	cont.Store = s.sessions.scope(name) // continuity.go: sessions outlive the studio too
	cont.SetClock(s.opts.Now)
	// Where an expired session is closed: the agent's current address, if
	// it has a process (one that restarted has no such session anyway),
	// or a remote's url.
	cont.CloseAt = func() *url.URL {
		if st := proc.Status(); st.Routable() {
			return st.Upstream
		}
		return nil
	}
	route := proxy.NewRouted(func(r *http.Request) (*url.URL, string) {
		u, _ := r.Context().Value(upstreamKey{}).(*url.URL)
		if u == nil {
			// Unreachable through serveAPI; fail closed.
			u = &url.URL{Scheme: "http", Host: "invalid.invalid", Path: "/mcp"}
		}
		return u, name
	}, &proxy.Options{
		Transport: cont, // proxy/continuity.go: sessions outlive the agent's restarts
		Logger:    s.logger,
		Middleware: &mcphttp.Options{
			MaxBodyBytes:   s.opts.MaxBodyBytes,
			Budget:         s.budget,
			SessionIdleTTL: s.opts.SessionIdleTTL,
			Now:            s.opts.Now,
			// The agent would refuse a call whose chain it cannot read, with
			// this very text; refused here, the body goes no further than
			// the parse the studio already made of it.
			RefuseCall: func(m *mcphttp.Message) string {
				return delegation.RefuseUnreadable(name, m.Tool, m.Meta[delegation.MetaKey])
			},
			Logger: s.logger.With("agent", name),
			// The token (if any) was checked by the studio for all of /api/.

			// A binding forgotten for idleness ends the session's continuity
			// and the session at the agent.
			OnSessionExpired: cont.Expire,
			// A session id this process never saw created, kept by the
			// studio before its restart.
			RestoreSession: cont.Restore,
		},
	})
	return route, cont
}

// toolServer is how the studio's own pool reaches agent name straight at
// its address st.Upstream (never through the studio's routes): with a
// remote agent's bearer token.
func (s *Studio) toolServer(name string, st supervisor.Status) *pool.Server {
	return &pool.Server{Name: name, URL: st.Upstream.String(), ProtocolVersion: pool.Protocol20251125, Headers: s.agentHeaders[name]}
}

// writeDown answers 503 for an agent that is not running, with how long to
// wait: until its next start, or a second while it is starting.
func writeDown(w http.ResponseWriter, name string, st supervisor.Status) {
	retry := time.Second
	if d := time.Until(st.NextStart); st.State == studioapi.StateRestarting && d > retry {
		retry = d
	}
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(retry.Seconds()))))
	msg := fmt.Sprintf("agent %s is %s", name, st.State)
	if st.LastErr != "" {
		msg += ": " + st.LastErr
	}
	mcphttp.WriteJSONRPCErrorData(w, http.StatusServiceUnavailable, nil, proxy.CodeServerError, msg,
		map[string]any{"agent": name, "state": st.State, "restarts": st.Restarts})
}
