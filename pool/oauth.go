package pool

// OAuth 2.1 for Streamable HTTP servers, as the MCP authorization spec
// (2025-11-25, basic/authorization) describes it, done as an
// http.RoundTripper below the recorder: the recorder (and so classify) sees
// only the answer to the request as finally sent, never the 401 that asked
// for a token.
//
// A server needs no configuration to be recognised: its 401 with
// WWW-Authenticate names its protected-resource metadata (RFC 9728), which
// names the authorization server (RFC 8414). What the pool then does:
//
//   - a token stored for (URL, identity) by `switchboard login` or by an
//     earlier grant is sent; one that expires within refreshMargin is
//     refreshed first;
//   - on a 401: the stored token is re-read (another process may have
//     signed in), else refreshed with its refresh token, else a new grant
//     is run: client credentials when the server's config says so (headless
//     agents), the authorization code flow with PKCE when the pool has
//     someone to ask (OAuthOptions.Interactive, as `switchboard login`
//     does); with neither, the 401 is returned as it came;
//   - on a 403 with error="insufficient_scope" (step-up): a new grant for
//     the union of the scopes held and the scopes asked for.
//
// The request is then sent once more, at most once (maxAuthRetries). That
// is safe because a 401 or 403 of a bearer-token check is produced before
// the MCP message is dispatched: the resource server validates the token
// before it processes the request (MCP authorization, "Token Handling":
// servers "MUST validate access tokens before processing the request";
// RFC 6750 §3 places the challenge at the resource server's door). The
// resend carries the same body, read again through GetBody; a request
// whose body cannot be read again is never resent.
//
// Tokens are keyed by (URL, identity) and stored 0600 by
// internal/tokenstore; one identity's token is never sent for another. No
// token is ever logged: records redact themselves, and the only things
// logged here are server names, grants and error texts of the pool's own.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/switchboard-run/switchboard/internal/tokenstore"
)

// Grants a Server's OAuth may use.
const (
	GrantAuthorizationCode = "authorization_code"
	GrantClientCredentials = "client_credentials"
)

// Token endpoint client authentication methods (RFC 7591 §2).
const (
	AuthMethodBasic = "client_secret_basic"
	AuthMethodPost  = "client_secret_post"
)

// maxAuthRetries bounds the resends after a token was obtained for a 401 or
// 403: a second refusal of a fresh token is the server's final word.
const maxAuthRetries = 1

// refreshMargin: a token that expires sooner than this is refreshed before
// it is sent, so that it does not expire in flight.
const refreshMargin = 30 * time.Second

// maxChallengeBody bounds how much of a 401/403 body is kept to return it
// when no token can be had.
const maxChallengeBody = 4 << 10

// ErrLoginRequired is wrapped by the error of an authorization that needs a
// person and has none to ask: run `switchboard login SERVER`.
var ErrLoginRequired = errors.New("sign-in required")

// An OAuthConfig says what discovery alone cannot: a pre-registered
// client, the grant, the scopes. A Server without one still gets OAuth by
// discovery and dynamic client registration.
type OAuthConfig struct {
	// ClientID and ClientSecret are a pre-registered client's. Empty:
	// dynamic client registration (RFC 7591) at sign-in.
	ClientID     string
	ClientSecret string
	// Grant is GrantAuthorizationCode (default: a person signs in) or
	// GrantClientCredentials (headless: ClientID and ClientSecret required).
	Grant string
	// TokenEndpointAuthMethod is AuthMethodBasic or AuthMethodPost; empty:
	// chosen from the authorization server's metadata, basic when offered
	// (RFC 6749 §2.3.1: servers MUST support it).
	TokenEndpointAuthMethod string
	// Scopes, when set, are requested instead of those in WWW-Authenticate
	// or the metadata's scopes_supported.
	Scopes []string
	// CallbackPort fixes the loopback redirect's port (for a client
	// registered with one); zero: any free port.
	CallbackPort int
	// PrivateKeyPEM, for the client credentials grant, authenticates the
	// client with a signed assertion (AuthMethodPrivateKeyJWT) instead of a
	// secret; SigningAlgorithm is ES256 (default for an EC key) or RS256.
	PrivateKeyPEM    string
	SigningAlgorithm string
	// ClientMetadataURL is the client's Client ID Metadata Document (an
	// https URL with a path), used as its client id by an authorization
	// server that supports them; tried before the other registrations.
	ClientMetadataURL string
	// Enterprise, when set, gets tokens by enterprise-managed authorization
	// (oauth_enterprise.go) instead of Grant: from the person's sign-in at
	// the enterprise's identity provider.
	Enterprise *EnterpriseConfig
}

// OAuthOptions configure the pool's OAuth. The zero value: tokens in
// tokenstore.DefaultDir, nobody to ask.
type OAuthOptions struct {
	// TokenDir holds the token files; empty: tokenstore.DefaultDir().
	TokenDir string
	// Interactive, when set, lets the pool run the authorization code flow:
	// a person opens a URL and the browser comes back to RedirectURL.
	Interactive *Interactive
	// Disabled turns OAuth off: 401s are returned as they come.
	Disabled bool
}

// Interactive is the person's side of the authorization code flow.
type Interactive struct {
	// RedirectURL is the loopback URL the authorization server sends the
	// browser back to (RFC 8252 §7.3).
	RedirectURL string
	// Fetch shows args.URL to the person and returns the code and state the
	// redirect brought back.
	Fetch auth.AuthorizationCodeFetcher
}

// authKey is what a token is for.
func authKey(srv *Server) tokenstore.Key {
	return tokenstore.Key{URL: srv.URL, Identity: srv.Identity}
}

// oauthClients holds one authenticator per (URL, identity), so that every
// session of the key shares one token and one refresh.
type oauthClients struct {
	mu sync.Mutex // protects m; never held for I/O
	m  map[tokenstore.Key]*authenticator
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
	k := authKey(srv)
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.m[k]
	if !ok || !sameOAuth(a.cfg, srv.OAuth) {
		a = newAuthenticator(base, srv, opts, log)
		if c.m == nil {
			c.m = make(map[tokenstore.Key]*authenticator)
		}
		c.m[k] = a
	}
	return &oauthTransport{base: base, a: a}
}

func sameOAuth(a, b *OAuthConfig) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.ClientID == b.ClientID && a.ClientSecret == b.ClientSecret && a.Grant == b.Grant &&
		a.TokenEndpointAuthMethod == b.TokenEndpointAuthMethod && slices.Equal(a.Scopes, b.Scopes) &&
		a.CallbackPort == b.CallbackPort && a.PrivateKeyPEM == b.PrivateKeyPEM &&
		a.SigningAlgorithm == b.SigningAlgorithm && a.ClientMetadataURL == b.ClientMetadataURL &&
		a.Enterprise == b.Enterprise
}

// authenticator holds one key's token and runs its grants.
type authenticator struct {
	key         tokenstore.Key
	name        string // the server's name, for messages
	cfg         *OAuthConfig
	store       *tokenstore.Store // nil: nowhere to keep tokens
	interactive *Interactive
	client      *http.Client // for the authorization server
	log         *slog.Logger

	flow sync.Mutex // serializes loads, refreshes and grants of this key (held for I/O; one key only)

	mu       sync.Mutex // protects following fields
	rec      *tokenstore.Record
	loaded   bool      // rec was read from the store once
	lastNote time.Time // when a refusal was last recorded (noteRefusal)
	lastKind string    // and what it was: status, error, scope
}

func newAuthenticator(base http.RoundTripper, srv *Server, opts *OAuthOptions, log *slog.Logger) *authenticator {
	a := &authenticator{key: authKey(srv), name: srv.Name, cfg: srv.OAuth, log: log, client: &http.Client{Transport: base, Timeout: 30 * time.Second, CheckRedirect: checkCredentialRedirect}}
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
	return a
}

func (a *authenticator) grant() string {
	if a.cfg != nil && a.cfg.Grant != "" {
		return a.cfg.Grant
	}
	return GrantAuthorizationCode
}

// current returns the token to send, loading it from the store on first use
// and refreshing it when it is about to expire; nil when there is none.
func (a *authenticator) current(ctx context.Context) *tokenstore.Record {
	a.mu.Lock()
	rec, loaded := a.rec, a.loaded
	a.mu.Unlock()
	if loaded && (rec == nil || !expiring(rec)) {
		return rec
	}
	a.flow.Lock()
	defer a.flow.Unlock()
	a.mu.Lock()
	rec, loaded = a.rec, a.loaded
	a.mu.Unlock()
	if !loaded {
		rec = a.loadLocked()
	}
	if rec != nil && expiring(rec) {
		if fresh, err := a.refreshLocked(ctx, rec); err == nil {
			rec = fresh
		}
		// A failed refresh sends the old token: its 401 runs the full
		// recovery, which may still find a way.
	}
	return rec
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

// loadLocked reads the stored record; a.flow held.
func (a *authenticator) loadLocked() *tokenstore.Record {
	var rec *tokenstore.Record
	if a.store != nil {
		rec, _ = a.store.Load(a.key) // not found or unreadable: no token
	}
	a.mu.Lock()
	a.rec, a.loaded = rec, true
	a.mu.Unlock()
	return rec
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

// minNoteInterval spaces the same refusal recorded for one key: many calls
// refused at once for the same reason say no more than the first.
const minNoteInterval = time.Second

// maxReason bounds the reason kept with a refusal.
const maxReason = 300

// noteRefusal records, for `switchboard status` and the studio's page
// (internal/authstate), that the server refused a request and no token it
// accepts could be had: resp is the refusal, why the reason (nil when a
// fresh token was refused too). Called with no lock held.
func (a *authenticator) noteRefusal(resp *http.Response, why error) {
	if a.store == nil {
		return
	}
	now := oauthNow()
	challenges, _ := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	r := &tokenstore.Refusal{URL: a.key.URL, Identity: a.key.Identity, At: now.UTC(), Status: resp.StatusCode,
		Error: challengeParam(challenges, "error"), Scope: challengeParam(challenges, "scope")}
	kind := fmt.Sprint(r.Status, r.Error, r.Scope)
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
		r.Reason = why.Error()
		if len(r.Reason) > maxReason {
			r.Reason = r.Reason[:maxReason] + "…"
		}
	} else {
		r.Reason = "the server refused a fresh token"
	}
	if err := a.store.SaveRefusal(r); err != nil {
		a.log.Warn("recording the server's refusal", "server", a.name, "error", err)
	}
}

// authRefusal reports whether resp refuses the request for want of a
// token: a 401, or a 403 asking for more scope.
func authRefusal(resp *http.Response) bool {
	if resp.StatusCode == http.StatusUnauthorized {
		return true
	}
	challenges, _ := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	return resp.StatusCode == http.StatusForbidden && challengeParam(challenges, "error") == "insufficient_scope"
}

// recover finds a token after resp (401 or 403) refused the request sent
// with used. nil, nil: nothing to do, return the answer as it is.
func (a *authenticator) recover(ctx context.Context, req *http.Request, resp *http.Response, used *tokenstore.Record) (*tokenstore.Record, error) {
	challenges, _ := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	stepUp := resp.StatusCode == http.StatusForbidden && challengeParam(challenges, "error") == "insufficient_scope"
	if resp.StatusCode == http.StatusForbidden && !stepUp {
		return nil, nil // a refusal that no token changes
	}

	a.flow.Lock()
	defer a.flow.Unlock()
	if !stepUp {
		// Another request of this key, or `switchboard login` in another
		// process, may have got a token while this one waited.
		a.mu.Lock()
		cur := a.rec
		a.mu.Unlock()
		if cur != nil && !sameToken(cur, used) {
			return cur, nil
		}
		if stored := a.loadLocked(); stored != nil && !sameToken(stored, used) {
			return stored, nil
		}
		if used != nil {
			if fresh, err := a.refreshLocked(ctx, used); err == nil {
				return fresh, nil
			}
		}
	}
	switch {
	case a.cfg != nil && a.cfg.Enterprise != nil:
		return a.enterpriseLocked(ctx, challenges, used)
	case a.grant() == GrantClientCredentials:
		return a.clientCredentialsLocked(ctx, req, challenges, used)
	default:
		if a.interactive == nil {
			return nil, fmt.Errorf("server %q: %w: run `switchboard login %s`", a.name, ErrLoginRequired, a.name)
		}
		return a.authorizationCodeLocked(ctx, req, resp, used)
	}
}

func sameToken(a, b *tokenstore.Record) bool {
	return b != nil && a.AccessToken == b.AccessToken
}

// refreshLocked renews rec: with its refresh token, or, for client
// credentials, with a new grant at the token endpoint it came from.
func (a *authenticator) refreshLocked(ctx context.Context, rec *tokenstore.Record) (*tokenstore.Record, error) {
	if rec.RefreshToken == "" && a.cfg != nil && a.cfg.Enterprise != nil {
		// An ID-JAG grant has no refresh token: a fresh exchange is its
		// refresh (oauth_enterprise.go).
		return a.enterpriseLocked(ctx, nil, rec)
	}
	ctx = context.WithValue(ctx, oauth2.HTTPClient, a.client)
	var tok *oauth2.Token
	var err error
	switch {
	case rec.RefreshToken != "":
		cfg := &oauth2.Config{ClientID: rec.ClientID, ClientSecret: rec.ClientSecret,
			Endpoint: oauth2.Endpoint{TokenURL: rec.TokenURL, AuthStyle: oauth2.AuthStyle(rec.AuthStyle)}, Scopes: rec.Scopes}
		tok, err = cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: rec.RefreshToken}).Token()
	case a.grant() == GrantClientCredentials && a.cfg != nil && rec.TokenURL != "":
		var cc *clientcredentials.Config
		if cc, err = a.ccConfig(rec.TokenURL, rec.Issuer, rec.Scopes, oauth2.AuthStyle(rec.AuthStyle), url.Values{"resource": {rec.URL}}); err == nil {
			tok, err = cc.Token(ctx)
		}
	default:
		return nil, errors.New("no refresh token")
	}
	if err != nil {
		return nil, fmt.Errorf("server %q: refreshing the token: %w", a.name, err)
	}
	fresh := *rec
	fresh.AccessToken, fresh.TokenType, fresh.Expiry, fresh.Obtained = tok.AccessToken, tok.TokenType, tok.Expiry, oauthNow()
	if tok.RefreshToken != "" {
		fresh.RefreshToken = tok.RefreshToken // rotated (OAuth 2.1 §4.3.1)
	}
	if s := scopesOf(tok); s != nil {
		fresh.Scopes = s
	}
	return &fresh, a.setLocked(&fresh)
}

// ccConfig is the client credentials grant at tokenURL. With a private key
// the client authenticates with a fresh assertion for the issuer audience
// instead of its secret.
func (a *authenticator) ccConfig(tokenURL, issuer string, scopes []string, style oauth2.AuthStyle, params url.Values) (*clientcredentials.Config, error) {
	cc := &clientcredentials.Config{ClientID: a.cfg.ClientID, ClientSecret: a.cfg.ClientSecret,
		TokenURL: tokenURL, Scopes: scopes, AuthStyle: style, EndpointParams: params}
	if a.cfg.PrivateKeyPEM != "" {
		audience := issuer
		if audience == "" {
			audience = tokenURL
		}
		assertion, err := clientAssertion(a.cfg.PrivateKeyPEM, a.cfg.SigningAlgorithm, a.cfg.ClientID, audience)
		if err != nil {
			return nil, fmt.Errorf("server %q: client assertion: %w", a.name, err)
		}
		for k, v := range assertion {
			params[k] = v
		}
		cc.ClientSecret, cc.AuthStyle = "", oauth2.AuthStyleInParams
	}
	return cc, nil
}

// discover finds the protected-resource and authorization-server metadata
// the way the spec orders it: the challenge's resource_metadata, then the
// well-known URL at the endpoint's path, then at the root.
func (a *authenticator) discover(ctx context.Context, resource string, challenges []oauthex.Challenge) (*oauthex.ProtectedResourceMetadata, *oauthex.AuthServerMeta, error) {
	var prm *oauthex.ProtectedResourceMetadata
	for _, u := range prmURLs(challengeParam(challenges, "resource_metadata"), resource) {
		m, err := oauthex.GetProtectedResourceMetadata(ctx, u[0], u[1], a.client)
		if err == nil && m != nil {
			prm = m
			break
		}
	}
	if prm == nil || len(prm.AuthorizationServers) == 0 {
		return nil, nil, fmt.Errorf("server %q: no protected resource metadata names an authorization server", a.name)
	}
	asm, err := auth.GetAuthServerMetadata(ctx, prm.AuthorizationServers[0], a.client)
	if err != nil {
		return nil, nil, fmt.Errorf("server %q: authorization server metadata: %w", a.name, err)
	}
	if asm == nil {
		return nil, nil, fmt.Errorf("server %q: authorization server %s publishes no metadata", a.name, prm.AuthorizationServers[0])
	}
	return prm, asm, nil
}

// prmURLs are the (metadata URL, expected resource) pairs to try.
func prmURLs(fromChallenge, resource string) [][2]string {
	var out [][2]string
	if fromChallenge != "" {
		out = append(out, [2]string{fromChallenge, resource})
	}
	u, err := url.Parse(resource)
	if err != nil {
		return out
	}
	m := *u
	m.RawQuery, m.Fragment = "", ""
	m.Path = "/.well-known/oauth-protected-resource/" + strings.TrimLeft(u.Path, "/")
	out = append(out, [2]string{m.String(), resource})
	m.Path = "/.well-known/oauth-protected-resource"
	root := *u
	root.Path, root.RawQuery, root.Fragment = "", "", ""
	return append(out, [2]string{m.String(), root.String()})
}

func challengeParam(cs []oauthex.Challenge, name string) string {
	for _, c := range cs {
		if strings.EqualFold(c.Scheme, "bearer") && c.Params[name] != "" {
			return c.Params[name]
		}
	}
	return ""
}

// scopesFor picks what to ask for: the configuration's, else the
// challenge's, else scopes_supported; on step-up, together with what is
// already held (SEP-2350: stepping up must not lose earlier grants).
func (a *authenticator) scopesFor(challenges []oauthex.Challenge, prm *oauthex.ProtectedResourceMetadata, held *tokenstore.Record) []string {
	var s []string
	switch {
	case a.cfg != nil && len(a.cfg.Scopes) > 0:
		s = slices.Clone(a.cfg.Scopes)
	case challengeParam(challenges, "scope") != "":
		s = strings.Fields(challengeParam(challenges, "scope"))
	case prm != nil:
		s = slices.Clone(prm.ScopesSupported)
	}
	if held != nil {
		for _, h := range held.Scopes {
			if !slices.Contains(s, h) {
				s = append(s, h)
			}
		}
	}
	return s
}

// authStyle picks the token endpoint's client authentication.
func (a *authenticator) authStyle(asm *oauthex.AuthServerMeta) oauth2.AuthStyle {
	method := ""
	if a.cfg != nil {
		method = a.cfg.TokenEndpointAuthMethod
	}
	if method == "" {
		switch supported := asm.TokenEndpointAuthMethodsSupported; {
		case len(supported) == 0, slices.Contains(supported, AuthMethodBasic):
			method = AuthMethodBasic
		case slices.Contains(supported, AuthMethodPost):
			method = AuthMethodPost
		}
	}
	if method == AuthMethodPost {
		return oauth2.AuthStyleInParams
	}
	return oauth2.AuthStyleInHeader
}

func (a *authenticator) clientCredentialsLocked(ctx context.Context, req *http.Request, challenges []oauthex.Challenge, held *tokenstore.Record) (*tokenstore.Record, error) {
	if a.cfg == nil || a.cfg.ClientID == "" || a.cfg.ClientSecret == "" && a.cfg.PrivateKeyPEM == "" {
		return nil, fmt.Errorf("server %q: the client credentials grant needs a client id and a secret or private key", a.name)
	}
	prm, asm, err := a.discover(ctx, a.key.URL, challenges)
	if err != nil {
		return nil, err
	}
	scopes := a.scopesFor(challenges, prm, held)
	style := a.authStyle(asm)
	cc, err := a.ccConfig(asm.TokenEndpoint, asm.Issuer, scopes, style, url.Values{"resource": {prm.Resource}})
	if err != nil {
		return nil, err
	}
	tok, err := cc.Token(context.WithValue(ctx, oauth2.HTTPClient, a.client))
	if err != nil {
		return nil, fmt.Errorf("server %q: client credentials grant: %w", a.name, err)
	}
	rec := a.record(tok, asm, asm.TokenEndpoint, a.cfg.ClientID, "", style, scopes)
	return rec, a.setLocked(rec)
}

func (a *authenticator) record(tok *oauth2.Token, asm *oauthex.AuthServerMeta, tokenURL, clientID, secret string, style oauth2.AuthStyle, asked []string) *tokenstore.Record {
	rec := &tokenstore.Record{
		URL: a.key.URL, Identity: a.key.Identity, TokenURL: tokenURL,
		ClientID: clientID, ClientSecret: secret, AuthStyle: int(style),
		Scopes: asked, AccessToken: tok.AccessToken, TokenType: tok.TokenType,
		RefreshToken: tok.RefreshToken, Expiry: tok.Expiry, Obtained: oauthNow(),
	}
	if asm != nil {
		rec.Issuer, rec.RevocationURL = asm.Issuer, asm.RevocationEndpoint
	}
	if s := scopesOf(tok); s != nil {
		rec.Scopes = s
	}
	return rec
}

// scopesOf is the token response's scope (RFC 6749 §5.1), when it has one.
func scopesOf(tok *oauth2.Token) []string {
	if s, ok := tok.Extra("scope").(string); ok && s != "" {
		return strings.Fields(s)
	}
	return nil
}

// authorizationCodeLocked runs the authorization code flow with PKCE
// through go-sdk's AuthorizationCodeHandler (discovery, pre-registered
// client or dynamic registration, the resource indicator, the iss check),
// and keeps the token it gets.
func (a *authenticator) authorizationCodeLocked(ctx context.Context, req *http.Request, resp *http.Response, held *tokenstore.Record) (*tokenstore.Record, error) {
	challenges, _ := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	if asm := a.legacyMetadata(ctx, challenges); asm != nil {
		return a.legacyAuthorizationCodeLocked(ctx, asm, challenges, held) // oauth_legacy.go
	}
	redirect := a.interactive.RedirectURL
	cfg := &auth.AuthorizationCodeHandlerConfig{
		RedirectURL:              redirect,
		AuthorizationCodeFetcher: a.interactive.Fetch,
		RequestRefreshToken:      true,
		Client:                   a.client,
	}
	if a.cfg != nil && a.cfg.ClientMetadataURL != "" {
		cfg.ClientIDMetadataDocumentConfig = &auth.ClientIDMetadataDocumentConfig{URL: a.cfg.ClientMetadataURL}
	}
	if a.cfg != nil && a.cfg.ClientID != "" {
		pc := &oauthex.ClientCredentials{ClientID: a.cfg.ClientID}
		if a.cfg.ClientSecret != "" {
			pc.ClientSecretAuth = &oauthex.ClientSecretAuth{ClientSecret: a.cfg.ClientSecret}
		}
		cfg.PreregisteredClient = pc
	} else {
		cfg.DynamicClientRegistrationConfig = &auth.DynamicClientRegistrationConfig{Metadata: registrationMetadata(redirect)}
	}
	cfg.ScopeFilter = func(discovered []string) []string {
		if a.cfg != nil && len(a.cfg.Scopes) > 0 {
			discovered = slices.Clone(a.cfg.Scopes)
		}
		if held != nil {
			for _, h := range held.Scopes {
				if !slices.Contains(discovered, h) {
					discovered = append(discovered, h)
				}
			}
		}
		return discovered
	}
	var got *oauth2.Config
	var tok *oauth2.Token
	cfg.NewTokenSource = func(ctx context.Context, c *oauth2.Config, t *oauth2.Token) (oauth2.TokenSource, error) {
		got, tok = c, t
		return oauth2.StaticTokenSource(t), nil // refreshes are ours (refreshLocked), so that they are stored
	}
	h, err := auth.NewAuthorizationCodeHandler(cfg)
	if err != nil {
		return nil, fmt.Errorf("server %q: %w", a.name, err)
	}
	if err := h.Authorize(ctx, req, resp); err != nil {
		return nil, fmt.Errorf("server %q: sign-in: %w", a.name, err)
	}
	if tok == nil {
		return nil, fmt.Errorf("server %q: sign-in ended without a token", a.name)
	}
	rec := a.record(tok, nil, got.Endpoint.TokenURL, got.ClientID, got.ClientSecret, got.Endpoint.AuthStyle, got.Scopes)
	// The revocation endpoint is for logout; the handler does not return
	// the metadata it read, so it is looked up again (one GET, at sign-in).
	if _, asm, err := a.discover(ctx, a.key.URL, challenges); err == nil {
		rec.Issuer, rec.RevocationURL = asm.Issuer, asm.RevocationEndpoint
	}
	return rec, a.setLocked(rec)
}

// registrationMetadata is what the pool registers itself as (RFC 7591): a
// public client (PKCE, no secret) that wants refresh tokens.
func registrationMetadata(redirect string) *oauthex.ClientRegistrationMetadata {
	return &oauthex.ClientRegistrationMetadata{
		RedirectURIs:            []string{redirect},
		ClientName:              "switchboard",
		GrantTypes:              []string{"authorization_code", "refresh_token"},
		ResponseTypes:           []string{"code"},
		TokenEndpointAuthMethod: "none",
	}
}

// oauthTransport sends a request with the key's token and recovers once
// from a 401 or a step-up 403.
type oauthTransport struct {
	base http.RoundTripper
	a    *authenticator
}

func (t *oauthTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	rec := t.a.current(ctx)
	resp, err := t.send(req, rec)
	for tries := 0; err == nil && tries < maxAuthRetries && challenged(resp) && replayable(req) && sameOrigin(req.URL, t.a.key.URL); tries++ {
		// Keep the refusal: it is the answer when no token can be had, and
		// the authorization handler consumes the body it is given.
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxChallengeBody))
		resp.Body.Close()
		refused := func() *http.Response {
			r := *resp
			r.Body = io.NopCloser(bytes.NewReader(body))
			return &r
		}
		fresh, ferr := t.a.recover(ctx, req, refused(), rec)
		// Only a server that names its protected-resource metadata says it
		// speaks OAuth; any other 401 (a static token missing) is its own
		// business and goes up as it came.
		challenges, _ := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
		oauth := challengeParam(challenges, "resource_metadata") != "" || rec != nil || t.a.cfg != nil
		if ferr != nil && oauth {
			t.a.log.WarnContext(ctx, "no token for the server", "server", t.a.name, "status", resp.StatusCode, "error", ferr)
			t.a.noteRefusal(resp, ferr)
		}
		if errors.Is(ferr, ErrLoginRequired) && oauth && isInitialize(req) {
			// A session that cannot start until a person signs in: the
			// dial fails with an error that says what to do (and, as a
			// dial failure, that nothing ran). Mid-session the 401 itself
			// goes up instead, so that classify keeps judging it.
			return nil, ferr
		}
		if ferr != nil || fresh == nil {
			// Nothing ran and nothing better is known: the server's own
			// refusal goes back up, where it is classified as any 401.
			return refused(), nil
		}
		rec = fresh
		again := req.Clone(ctx)
		if req.GetBody != nil {
			if again.Body, err = req.GetBody(); err != nil {
				return refused(), nil
			}
		}
		resp, err = t.send(again, rec)
		if err == nil && authRefusal(resp) {
			t.a.noteRefusal(resp, nil) // the token just got was refused too
		}
	}
	return resp, err
}

func (t *oauthTransport) send(req *http.Request, rec *tokenstore.Record) (*http.Response, error) {
	if rec == nil || !sameOrigin(req.URL, t.a.key.URL) {
		// The token is for its server's origin only (origin.go): the
		// entry's client refuses a redirect elsewhere, and should one
		// reach here anyway it goes without.
		return t.base.RoundTrip(req)
	}
	out := req.Clone(req.Context()) // a RoundTripper must not modify its request
	out.Header.Set("Authorization", "Bearer "+rec.AccessToken)
	return t.base.RoundTrip(out)
}

func challenged(resp *http.Response) bool {
	return resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden
}

// replayable: the body can be sent again (or there is none).
func replayable(req *http.Request) bool {
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}
