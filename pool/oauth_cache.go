package pool

// The per-key token cache: one authenticator per (URL, identity), shared by
// every session of the key, so that they send one token and share one
// refresh or sign-in.
//
// The authenticators live exactly as long as the sessions that use them,
// as the pool's semaphores do (Pool.sems): oauthClients holds them by weak
// pointer, each entry's transport holds its authenticator, and when the
// key's last session is closed (by the idle sweep, an invalidation,
// Shutdown) and its last request has returned, the authenticator is
// collected and its map slot removed by a cleanup. A pool that sees many
// identities over time therefore keeps no authenticator per identity it
// ever served. Nothing is lost by forgetting one: the token is in the token
// store, and the next session of the key reads it again.
//
// One key's loads, refreshes and grants are serialized by flowLock, a
// channel of one slot: it is held across the network I/O of a grant
// (another caller of the key needs its outcome, not a second sign-in), but
// a caller waiting for it gives up as soon as its own context ends, while
// the holder's sign-in goes on for the others. No sync.Mutex is held for
// I/O: authenticator.mu guards only the fields below it.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"time"
	"weak"

	"github.com/switchboard-run/switchboard/internal/tokenstore"
)

// oauthClients is the pool's per-key token cache.
type oauthClients struct {
	mu sync.Mutex                                     // protects m; never held for I/O
	m  map[tokenstore.Key]weak.Pointer[authenticator] // live authenticators only, see forget
}

// transport returns base wrapped with OAuth for srv, or base itself when the
// server sends its own Authorization header, or OAuth is off.
func (c *oauthClients) transport(base http.RoundTripper, srv *Server, opts *OAuthOptions, log *slog.Logger) http.RoundTripper {
	if opts != nil && opts.Disabled {
		return base
	}
	for k := range srv.Headers {
		if strings.EqualFold(k, "Authorization") {
			return base // the configuration's own credentials win
		}
	}
	return &oauthTransport{base: base, a: c.authenticator(base, srv, opts, log)}
}

// authenticator returns the key's live authenticator, or a new one when it
// has none or its configuration changed.
func (c *oauthClients) authenticator(base http.RoundTripper, srv *Server, opts *OAuthOptions, log *slog.Logger) *authenticator {
	k := authKey(srv)
	c.mu.Lock()
	defer c.mu.Unlock()
	if a := c.m[k].Value(); a != nil && sameOAuth(a.cfg, srv.OAuth) {
		return a
	}
	a := newAuthenticator(base, srv, opts, log)
	if c.m == nil {
		c.m = make(map[tokenstore.Key]weak.Pointer[authenticator])
	}
	wp := weak.Make(a)
	c.m[k] = wp
	runtime.AddCleanup(a, c.forget, cacheSlot{key: k, wp: wp})
	return a
}

// A cacheSlot names an authenticator's place in oauthClients.m for the
// cleanup that removes it; it holds the authenticator weakly, so that the
// cleanup does not keep it alive.
type cacheSlot struct {
	key tokenstore.Key
	wp  weak.Pointer[authenticator]
}

// forget removes a collected authenticator's slot, unless the key already
// has a newer one.
func (c *oauthClients) forget(s cacheSlot) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m[s.key] == s.wp {
		delete(c.m, s.key)
	}
}

// len is the number of authenticators the cache holds (for tests).
func (c *oauthClients) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// A flowLock serializes one key's loads, refreshes and grants. Unlike a
// sync.Mutex, a caller waiting for it gives up when its context ends.
type flowLock chan struct{}

// testHookFlowWait runs when a caller finds the flow taken and starts
// waiting; tests use it to know a waiter is waiting.
var testHookFlowWait = func() {}

// lock takes l, or returns ctx's error once ctx ends first.
func (l flowLock) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case l <- struct{}{}:
		return nil
	default:
	}
	testHookFlowWait()
	select {
	case l <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l flowLock) unlock() { <-l }

// authenticator holds one key's token and runs its grant. How the key gets
// a token (obtain) and renews one (renew) is chosen once, by newAuthenticator,
// from the configuration.
type authenticator struct {
	key         tokenstore.Key
	name        string // the server's name, for messages
	cfg         *OAuthConfig
	store       *tokenstore.Store // nil: nowhere to keep tokens
	interactive *Interactive
	client      *http.Client // for the authorization server
	log         *slog.Logger

	obtain obtainFunc // a new token after a refusal the held one cannot answer
	renew  renewFunc  // a fresh token for a held one about to expire or refused

	flow flowLock // serializes loads, refreshes and grants of this key (held for I/O; one key only)

	mu       sync.Mutex // protects following fields; never held for I/O
	rec      *tokenstore.Record
	loaded   bool      // rec was read from the store once
	lastNote time.Time // when a refusal was last recorded (noteRefusal)
	lastKind string    // and what it was: status, error, scope
}

// An obtainFunc gets the key a new token after r refused the request sent
// with held (nil: none); a.flow held.
type obtainFunc func(ctx context.Context, a *authenticator, req *http.Request, r *refusal, held *tokenstore.Record) (*tokenstore.Record, error)

// A renewFunc replaces rec without the person; a.flow held.
type renewFunc func(ctx context.Context, a *authenticator, rec *tokenstore.Record) (*tokenstore.Record, error)

func newAuthenticator(base http.RoundTripper, srv *Server, opts *OAuthOptions, log *slog.Logger) *authenticator {
	a := &authenticator{key: authKey(srv), name: srv.Name, cfg: srv.OAuth, log: log, flow: make(flowLock, 1),
		client: &http.Client{Transport: newMetadataGuard(base, srv), Timeout: 30 * time.Second, CheckRedirect: checkCredentialRedirect}}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if opts == nil {
		opts = &OAuthOptions{}
	}
	a.interactive = opts.Interactive
	dir := opts.TokenDir
	if dir == "" {
		dir, _ = tokenstore.DefaultDir() // no directory: tokens live in memory only
	}
	if dir != "" {
		a.store = &tokenstore.Store{Dir: dir}
	}
	// The grant, chosen once. A refresh token, when the token has one, is
	// always the first way to renew it (grant_refresh.go); what renews a
	// token without one is the grant's own.
	switch {
	case a.cfg != nil && a.cfg.Enterprise != nil:
		a.obtain, a.renew = obtainEnterprise, refreshOr(renewEnterprise) // grant_enterprise.go
	case a.cfg != nil && a.cfg.Grant == GrantClientCredentials:
		a.obtain, a.renew = obtainClientCredentials, refreshOr(renewClientCredentials) // grant_clientcredentials.go
	case a.interactive == nil:
		a.obtain, a.renew = obtainNeedsLogin, refreshOr(nil) // grant_authcode.go
	default:
		a.obtain, a.renew = obtainAuthorizationCode, refreshOr(nil) // grant_authcode.go, grant_legacy.go
	}
	return a
}

// current returns the token to send, loading it from the store on first use
// and renewing it when it is about to expire; nil when there is none. The
// error is the store's (ErrTokenStore) or the caller's context ending while
// another request of the key holds the flow.
func (a *authenticator) current(ctx context.Context) (*tokenstore.Record, error) {
	a.mu.Lock()
	rec, loaded := a.rec, a.loaded
	a.mu.Unlock()
	if loaded && (rec == nil || !expiring(rec)) {
		return rec, nil
	}
	if err := a.flow.lock(ctx); err != nil {
		return nil, a.waitError(err)
	}
	defer a.flow.unlock()
	a.mu.Lock()
	rec, loaded = a.rec, a.loaded
	a.mu.Unlock()
	if !loaded {
		var err error
		if rec, err = a.loadLocked(); err != nil {
			return nil, err
		}
	}
	if rec != nil && expiring(rec) {
		if fresh, err := a.renew(ctx, a, rec); err == nil {
			rec = fresh
		}
		// A failed renewal sends the old token: its 401 runs the full
		// recovery, which may still find a way.
	}
	return rec, nil
}

// errGaveUpWaiting is wrapped, with the context's error, by the error of a
// caller whose context ended while another request of its key held the
// flow (a sign-in, a refresh): the caller returns at once, nothing sent.
var errGaveUpWaiting = errors.New("gave up waiting for the token another request is getting")

func (a *authenticator) waitError(err error) error {
	return fmt.Errorf("server %q: %w: %w", a.name, errGaveUpWaiting, err)
}

// expiring reports whether r should be refreshed before it is sent: it
// expires within refreshMargin, or within half its lifetime for a token
// that lives less than twice the margin (else every request would refresh
// it).
func expiring(r *tokenstore.Record) bool {
	if r.Expiry.IsZero() {
		return false
	}
	margin := refreshMargin
	if !r.Obtained.IsZero() {
		margin = min(margin, r.Expiry.Sub(r.Obtained)/2)
	}
	return r.Expiry.Sub(oauthNow()) < margin
}

// oauthNow is the clock of token expiry; tests move it.
var oauthNow = time.Now

// loadLocked reads the stored record: nil when none is stored, an error
// wrapping ErrTokenStore (and naming the file) when one is stored but
// cannot be read, in which case the key stays unloaded, so that the next
// request reads the file again once a person has fixed it. a.flow held.
func (a *authenticator) loadLocked() (*tokenstore.Record, error) {
	var rec *tokenstore.Record
	if a.store != nil {
		var err error
		rec, err = a.store.Load(a.key)
		switch {
		case errors.Is(err, tokenstore.ErrNotFound):
			rec = nil
		case err != nil:
			return nil, fmt.Errorf("server %q: %w: %w", a.name, ErrTokenStore, err)
		}
	}
	a.mu.Lock()
	a.rec, a.loaded = rec, true
	a.mu.Unlock()
	return rec, nil
}

// setLocked makes rec the key's token and stores it; a.flow held.
func (a *authenticator) setLocked(rec *tokenstore.Record) error {
	a.mu.Lock()
	a.rec, a.loaded = rec, true
	a.mu.Unlock()
	if a.store == nil {
		return nil
	}
	if err := a.store.Save(rec); err != nil {
		return err
	}
	return a.store.DeleteRefusal(a.key) // a new token: the last refusal is history
}

// recover finds a token after r (a 401, or a 403 asking for more scope)
// refused the request sent with used. nil, nil: nothing to do, return the
// answer as it is.
func (a *authenticator) recover(ctx context.Context, req *http.Request, r *refusal, used *tokenstore.Record) (*tokenstore.Record, error) {
	if r.status == http.StatusForbidden && !r.stepUp() {
		return nil, nil // a refusal that no token changes
	}
	if err := a.flow.lock(ctx); err != nil {
		return nil, a.waitError(err)
	}
	defer a.flow.unlock()
	if !r.stepUp() {
		// Another request of this key, or `switchboard login` in another
		// process, may have got a token while this one waited.
		a.mu.Lock()
		cur := a.rec
		a.mu.Unlock()
		if cur != nil && !sameToken(cur, used) {
			return cur, nil
		}
		stored, err := a.loadLocked()
		if err != nil {
			return nil, err // never a new grant over a file that cannot be read
		}
		if stored != nil && !sameToken(stored, used) {
			return stored, nil
		}
		if used != nil {
			if fresh, err := a.renew(ctx, a, used); err == nil {
				return fresh, nil
			}
		}
	}
	return a.obtain(ctx, a, req, r, used)
}

func sameToken(a, b *tokenstore.Record) bool {
	return b != nil && a.AccessToken == b.AccessToken
}

// minNoteInterval spaces the same refusal recorded for one key: many calls
// refused at once for the same reason say no more than the first.
const minNoteInterval = time.Second

// maxReason bounds the reason kept with a refusal.
const maxReason = 300

// noteRefusal records, for `switchboard status` and the studio's page
// (internal/authstate), that the server refused a request and no token it
// accepts could be had: r is the refusal, why the reason (nil when a fresh
// token was refused too). Called with no lock held.
func (a *authenticator) noteRefusal(r *refusal, why error) {
	if a.store == nil {
		return
	}
	now := oauthNow()
	rf := &tokenstore.Refusal{URL: a.key.URL, Identity: a.key.Identity, At: now.UTC(), Status: r.status,
		Error: r.param("error"), Scope: r.param("scope")}
	kind := fmt.Sprint(rf.Status, rf.Error, rf.Scope)
	a.mu.Lock()
	if kind == a.lastKind && now.Sub(a.lastNote) < minNoteInterval {
		a.mu.Unlock()
		return
	}
	a.lastNote, a.lastKind = now, kind
	a.mu.Unlock()
	if why != nil {
		// The pool's own words and the authorization server's error (never a
		// token), cut to a line.
		rf.Reason = why.Error()
		if len(rf.Reason) > maxReason {
			rf.Reason = rf.Reason[:maxReason] + "…"
		}
	} else {
		rf.Reason = "the server refused a fresh token"
	}
	if err := a.store.SaveRefusal(rf); err != nil {
		a.log.Warn("recording the server's refusal", "server", a.name, "error", err)
	}
}
