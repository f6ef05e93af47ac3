package console

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-run/switchboard/internal/mcphttp"

	"github.com/switchboard-run/switchboard/internal/authstate"
)

// authState is what the Sign-in section shows.
func (s *Console) authState() authstate.Report {
	if s.Auth == nil {
		return authstate.Report{}
	}
	return s.Auth()
}

// authVersion is what of r the page shows, for its ETag: a sign-in happens
// outside the studio (`switchboard login`), and the page must show it.
func authVersion(r authstate.Report) string {
	b, _ := json.Marshal(r) // by value: fmt would print the pointers' addresses
	return string(b)
}

// Sign-in to the console in token mode. A browser cannot send the studio's
// bearer token with a page's link, so /login exchanges it, once, for a
// session cookie: random (256 bits), kept server-side (only its SHA-256
// digest), expiring after sessionTTL, HttpOnly (no script reads it),
// SameSite=Strict (no other site's page makes the browser send it), and
// Secure when the studio is reached over https. At most maxSessions are
// kept; a sign-in past them forgets the one that expires first.
//
// SameSite does not tell ports apart, and every page on localhost is one
// site: so the studio's gate (SessionOK) honours the cookie only on a
// request the browser says is same-origin or the person's own navigation
// (Sec-Fetch-Site), and, on a state change, only with this studio's exact
// Origin. Every action also keeps checkMutation's checks.
//
//	GET  /login   the sign-in page (no token needed to read it)
//	POST /login   {"token": …}: 204 and the cookie, or 401
//	POST /logout  forget the session and clear the cookie

// SessionCookie names the console's session cookie.
const SessionCookie = "switchboard_session"

// Bounds of the sign-ins.
const (
	sessionTTL  = 12 * time.Hour
	maxSessions = 64
)

// sessions are the live sign-ins, by the digest of their cookie, and the
// limiter of the attempts to make one (loginlimit.go).
type sessions struct {
	mu      sync.Mutex           // protects expires
	expires map[string]time.Time // guarded by mu

	limiterOnce sync.Once
	limiter     *loginLimiter // set once, by attempts
}

// attempts is the limiter of sign-in attempts.
func (s *sessions) attempts() *loginLimiter {
	s.limiterOnce.Do(func() { s.limiter = newLoginLimiter() })
	return s.limiter
}

func digest(v string) string {
	sum := sha256.Sum256([]byte(v))
	return hex.EncodeToString(sum[:])
}

// newSession returns a new session's cookie value.
func (s *sessions) newSession(now time.Time) string {
	v := randomHex(32)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.expires == nil {
		s.expires = map[string]time.Time{}
	}
	for k, exp := range s.expires {
		if !now.Before(exp) {
			delete(s.expires, k)
		}
	}
	for len(s.expires) >= maxSessions {
		var oldest string
		for k, exp := range s.expires {
			if oldest == "" || exp.Before(s.expires[oldest]) {
				oldest = k
			}
		}
		delete(s.expires, oldest)
	}
	s.expires[digest(v)] = now.Add(sessionTTL)
	return v
}

func (s *sessions) valid(v string, now time.Time) bool {
	if v == "" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	exp, ok := s.expires[digest(v)]
	return ok && now.Before(exp)
}

func (s *sessions) forget(v string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.expires, digest(v))
}

// ErrSessionForeign: a request carried a valid session cookie, but not
// from the studio's own page.
var ErrSessionForeign = errors.New("the session cookie is honoured only on the studio's own page")

// SessionOK reports whether r carries a live session cookie the studio's
// gate may take for the token; an error says why a valid cookie is not
// honoured on this request.
func (s *Console) SessionOK(r *http.Request) (bool, error) {
	c, err := r.Cookie(SessionCookie)
	if err != nil || !s.sessions.valid(c.Value, time.Now()) {
		return false, nil
	}
	switch v := r.Header.Get("Sec-Fetch-Site"); v {
	case "", "same-origin", "none":
	default:
		return false, fmt.Errorf("%w: Sec-Fetch-Site %q", ErrSessionForeign, v)
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if o := r.Header.Get("Origin"); o != "" && o != "http://"+r.Host && o != "https://"+r.Host {
			return false, fmt.Errorf("%w: Origin %q on a %s", ErrSessionForeign, o, r.Method)
		}
	}
	return true, nil
}

// ServeLogin serves /login: the page (GET) and the exchange of the token
// for a session (POST). It is reached without the token.
func (s *Console) ServeLogin(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		var buf bytes.Buffer
		next := r.URL.Query().Get("next")
		if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
			next = "/" // only a path of this studio: no open redirect
		}
		if err := pageTemplate.ExecuteTemplate(&buf, "login", map[string]any{"URL": s.URL, "Time": time.Now(), "TokenMode": s.Token != "", "Next": next}); err != nil {
			s.Logger.Error("rendering the sign-in page", "err", err)
			http.Error(w, "rendering the page failed", http.StatusInternalServerError)
			return
		}
		pageHeaders(w)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Write(buf.Bytes())
		return
	}
	var req struct {
		Token string `json:"token"`
	}
	if !readJSON(w, r, &req, "token") {
		return
	}
	if s.Token == "" {
		mcphttp.WriteJSONError(w, http.StatusConflict, "this studio has no token: its pages need no sign-in")
		return
	}
	lim, from := s.sessions.attempts(), remoteAddr(r)
	if wait, ok := lim.admit(from); !ok {
		tooMany(w, wait)
		return
	}
	a := sha256.Sum256([]byte(strings.TrimSpace(req.Token)))
	b := sha256.Sum256([]byte(s.Token))
	if subtle.ConstantTimeCompare(a[:], b[:]) != 1 {
		if wait := lim.failed(from); wait > 0 {
			tooMany(w, wait)
			return
		}
		mcphttp.WriteJSONError(w, http.StatusUnauthorized, "that is not the studio's token (the value of SWITCHBOARD_TOKEN)")
		return
	}
	lim.succeeded(from)
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: s.sessions.newSession(time.Now()), Path: "/",
		MaxAge: int(sessionTTL / time.Second), HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: s.secure(r)})
	w.WriteHeader(http.StatusNoContent)
}

// tooMany answers an attempt at signing in that must wait: 429, and when
// to try again, in whole seconds (rounded up, so that the next attempt is
// heard).
func tooMany(w http.ResponseWriter, wait time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(int((wait+time.Second-1)/time.Second)))
	mcphttp.WriteJSONError(w, http.StatusTooManyRequests, "too many wrong tokens from this address: try again after Retry-After seconds")
}

// remoteAddr is r's source address; invalid when it has none (a request
// that did not come over a network).
func remoteAddr(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// ServeLogout serves POST /logout: the session is forgotten and its cookie
// cleared. It is behind the gate, so only a signed-in page reaches it.
func (s *Console) ServeLogout(w http.ResponseWriter, r *http.Request) {
	var req struct{}
	if !readJSON(w, r, &req, "no fields: {}") {
		return
	}
	if c, err := r.Cookie(SessionCookie); err == nil {
		s.sessions.forget(c.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: s.secure(r)})
	w.WriteHeader(http.StatusNoContent)
}

// secure: the cookie is sent over https only when the studio is reached
// over https (a TLS connection, or a studio URL that says so).
func (s *Console) secure(r *http.Request) bool {
	return r.TLS != nil || strings.HasPrefix(s.URL, "https://")
}
