// Package oauthtest runs a small, real OAuth 2.1 authorization server and an
// MCP server protected by go-sdk's auth.RequireBearerToken, both on
// loopback, for end-to-end tests of the pool's OAuth and of `switchboard
// login`.
//
// The authorization server publishes RFC 8414 metadata, registers clients
// (RFC 7591), auto-approves /authorize for the user named in the request's
// test-only "user" parameter (default "alice"), checks PKCE S256 at /token,
// issues and rotates refresh tokens, runs the client credentials grant with
// client_secret_basic or client_secret_post, and revokes tokens (RFC 7009).
// The MCP server's "whoami" tool answers with the user its token belongs
// to, so that a test can tell whose token a call carried.
package oauthtest

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// Server is the authorization server and the MCP server it protects.
type Server struct {
	AS  *httptest.Server
	MCP *httptest.Server
	// URL is the MCP endpoint.
	URL string

	mu          sync.Mutex // protects following fields
	ttl         time.Duration
	clients     map[string]*client
	codes       map[string]*grant
	access      map[string]*grant
	refresh     map[string]*grant
	requiredSet []string          // scopes the MCP endpoint demands
	issued      []string          // every access and refresh token ever issued
	idTokens    map[string]string // ID token (of the IdP) → user
	jags        map[string]*grant // ID-JAG (of the IdP) → what it grants
	Counts      Counts

	// IdP is the enterprise identity provider of StartIdP; nil before.
	IdP *httptest.Server

	// Set by NewLegacy before serving, read-only after.
	issuerPath    string // the AS's endpoints and issuer are under this path of AS.URL
	tokenEndpoint string // when set, the metadata's token_endpoint
}

// Counts are what the servers saw, for tests to assert on.
type Counts struct {
	Registrations, Authorizations, CodeExchanges, Refreshes, ClientCredentials, Revocations int
	BasicAuth, PostAuth, JWTAuth                                                            int // client authentications at /token, by method
	MCPUnauthorized                                                                         int // 401 and 403 answers of the MCP endpoint
	TokenExchanges, JWTBearerGrants                                                         int // at the IdP, at the AS (enterprise-managed authorization)
}

type client struct {
	id, secret string
	redirects  []string
	key        *ecdsa.PublicKey // private_key_jwt
}

type grant struct {
	client, user, challenge, redirect, resource string
	scopes                                      []string
	expiry                                      time.Time
}

// New starts both servers. Tokens live for ttl; scopes are the scopes the
// MCP endpoint requires (advertised in WWW-Authenticate and
// scopes_supported). Both are closed when t's test ends.
func New(t interface{ Cleanup(func()) }, ttl time.Duration, scopes ...string) *Server {
	s := &Server{ttl: ttl, clients: map[string]*client{}, codes: map[string]*grant{}, access: map[string]*grant{}, refresh: map[string]*grant{}, requiredSet: scopes}
	s.AS = httptest.NewServer(http.HandlerFunc(s.serveAS))
	t.Cleanup(s.AS.Close)

	mux := http.NewServeMux()
	s.MCP = httptest.NewServer(mux)
	t.Cleanup(s.MCP.Close)
	s.URL = s.MCP.URL + "/mcp"
	prmURL := s.MCP.URL + "/.well-known/oauth-protected-resource/mcp"
	mux.Handle("/.well-known/oauth-protected-resource/mcp", auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource: s.URL, AuthorizationServers: []string{s.AS.URL}, ScopesSupported: scopes,
	}))
	protect := auth.RequireBearerToken(s.verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: prmURL, Scopes: scopes})
	mux.Handle("/mcp", s.countRefusals(protect(s.mcpHandler(t))))
	return s
}

// NewLegacy starts a server of the 2025-03-26 authorization spec, as the
// conformance suite's auth/2025-03-26-oauth-metadata-backcompat does: one
// origin is both the MCP server (at /mcp) and the authorization server,
// there is no protected-resource metadata, and the metadata at
// /.well-known/oauth-authorization-server names the issuer <origin>/oauth
// and endpoints under /oauth. With tokenEndpoint set, the metadata names
// that URL as its token endpoint instead (a server pointing the client
// elsewhere). AS and MCP are the same server.
func NewLegacy(t interface{ Cleanup(func()) }, ttl time.Duration, tokenEndpoint string) *Server {
	s := &Server{ttl: ttl, clients: map[string]*client{}, codes: map[string]*grant{}, access: map[string]*grant{}, refresh: map[string]*grant{},
		issuerPath: "/oauth", tokenEndpoint: tokenEndpoint}
	mux := http.NewServeMux()
	s.AS = httptest.NewServer(mux)
	s.MCP = s.AS
	t.Cleanup(s.AS.Close)
	s.URL = s.MCP.URL + "/mcp"
	mux.HandleFunc("/.well-known/oauth-authorization-server", s.serveAS)
	mux.Handle("/oauth/", http.StripPrefix("/oauth", http.HandlerFunc(s.serveAS)))
	protect := auth.RequireBearerToken(s.verify, nil)
	mux.Handle("/mcp", s.countRefusals(protect(s.mcpHandler(t))))
	return s
}

// mcpHandler is the protected MCP server: one tool, whoami.
func (s *Server) mcpHandler(t interface{ Cleanup(func()) }) http.Handler {
	mcpSrv := mcp.NewServer(&mcp.Implementation{Name: "protected", Version: "1"}, nil)
	mcp.AddTool(mcpSrv, &mcp.Tool{Name: "whoami", Description: "the user the token belongs to"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: req.Extra.TokenInfo.UserID}}}, nil, nil
		})
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return mcpSrv }, nil)
	// A session whose client could not say goodbye (its DELETE refused for a
	// revoked token) would outlive the test: close what is left.
	t.Cleanup(func() {
		for ss := range mcpSrv.Sessions() {
			ss.Close()
		}
	})
	return handler
}

// Require changes the scopes the MCP endpoint demands (for step-up).
func (s *Server) Require(scopes ...string) {
	s.mu.Lock()
	s.requiredSet = scopes
	s.mu.Unlock()
}

// RegisterClient pre-registers a confidential client.
func (s *Server) RegisterClient(id, secret string, redirects ...string) {
	s.mu.Lock()
	s.clients[id] = &client{id: id, secret: secret, redirects: redirects}
	s.mu.Unlock()
}

// RegisterKeyClient pre-registers a client that authenticates with
// private_key_jwt, ES256, with key.
func (s *Server) RegisterKeyClient(id string, key *ecdsa.PublicKey) {
	s.mu.Lock()
	s.clients[id] = &client{id: id, key: key}
	s.mu.Unlock()
}

// verifyAssertion checks a private_key_jwt client assertion (RFC 7523
// §3): signature, issuer and subject the client, audience the issuer, not
// expired. It returns the client id.
func (s *Server) verifyAssertionLocked(assertion string) (string, bool) {
	parts := strings.Split(assertion, ".")
	if len(parts) != 3 {
		return "", false
	}
	payload, err1 := base64.RawURLEncoding.DecodeString(parts[1])
	sig, err2 := base64.RawURLEncoding.DecodeString(parts[2])
	var claims struct {
		Iss, Sub, Aud string
		Exp           int64
	}
	if err1 != nil || err2 != nil || len(sig) != 64 || json.Unmarshal(payload, &claims) != nil {
		return "", false
	}
	c := s.clients[claims.Iss]
	if c == nil || c.key == nil || claims.Sub != claims.Iss || claims.Aud != s.AS.URL || time.Unix(claims.Exp, 0).Before(time.Now()) {
		return "", false
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	r, sv := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
	if !ecdsa.Verify(c.key, sum[:], r, sv) {
		return "", false
	}
	return c.id, true
}

// Snapshot returns the counts so far.
func (s *Server) Snapshot() Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Counts
}

// Tokens returns every access and refresh token the server has issued,
// revoked ones included, for a test to look for them where they must not be.
func (s *Server) Tokens() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.issued)
}

// ExpireAll makes every access token expired, as time passing would.
func (s *Server) ExpireAll() {
	s.mu.Lock()
	for _, g := range s.access {
		g.expiry = time.Now().Add(-time.Minute)
	}
	s.mu.Unlock()
}

// RevokeUser revokes every access and refresh token of user, as an
// administrator would.
func (s *Server) RevokeUser(user string) {
	s.mu.Lock()
	for _, m := range []map[string]*grant{s.access, s.refresh} {
		for k, g := range m {
			if g.user == user {
				delete(m, k)
			}
		}
	}
	s.mu.Unlock()
}

// UserOf reports whose access token tok is ("" when unknown).
func (s *Server) UserOf(tok string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g := s.access[tok]; g != nil {
		return g.user
	}
	return ""
}

func (s *Server) countRefusals(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		required := slices.Clone(s.requiredSet)
		s.mu.Unlock()
		rec := &statusWriter{ResponseWriter: w}
		// Step-up: the scopes demanded now may exceed the middleware's.
		if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			s.mu.Lock()
			g := s.access[tok]
			s.mu.Unlock()
			if g != nil && g.expiry.After(time.Now()) {
				for _, sc := range required {
					if !slices.Contains(g.scopes, sc) {
						w.Header().Set("WWW-Authenticate", `Bearer error="insufficient_scope", scope="`+strings.Join(required, " ")+`", resource_metadata="`+s.MCP.URL+`/.well-known/oauth-protected-resource/mcp"`)
						s.mu.Lock()
						s.Counts.MCPUnauthorized++
						s.mu.Unlock()
						http.Error(w, "insufficient scope", http.StatusForbidden)
						return
					}
				}
			}
		}
		next.ServeHTTP(rec, r)
		if rec.status == http.StatusUnauthorized || rec.status == http.StatusForbidden {
			s.mu.Lock()
			s.Counts.MCPUnauthorized++
			s.mu.Unlock()
		}
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *Server) verify(_ context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.access[tok]
	if g == nil {
		return nil, auth.ErrInvalidToken
	}
	if g.resource != "" && g.resource != s.URL {
		return nil, auth.ErrInvalidToken // a token for another resource (RFC 8707)
	}
	return &auth.TokenInfo{UserID: g.user, Scopes: g.scopes, Expiration: g.expiry}, nil
}

func (s *Server) serveAS(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/.well-known/oauth-authorization-server":
		s.mu.Lock()
		scopes := slices.Clone(s.requiredSet)
		s.mu.Unlock()
		base := s.AS.URL + s.issuerPath
		tokenURL := base + "/token"
		if s.tokenEndpoint != "" {
			tokenURL = s.tokenEndpoint
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"issuer":                                base,
			"authorization_endpoint":                base + "/authorize",
			"token_endpoint":                        tokenURL,
			"registration_endpoint":                 base + "/register",
			"revocation_endpoint":                   base + "/revoke",
			"scopes_supported":                      append(scopes, "offline_access"),
			"response_types_supported":              []string{"code"},
			"grant_types_supported":                 []string{"authorization_code", "refresh_token", "client_credentials", "urn:ietf:params:oauth:grant-type:jwt-bearer"},
			"code_challenge_methods_supported":      []string{"S256"},
			"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post", "none"},
		})
	case "/register":
		var m oauthex.ClientRegistrationMetadata
		if json.NewDecoder(r.Body).Decode(&m) != nil || len(m.RedirectURIs) == 0 {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_client_metadata"})
			return
		}
		id := rand.Text()
		s.mu.Lock()
		s.clients[id] = &client{id: id, redirects: m.RedirectURIs}
		s.Counts.Registrations++
		s.mu.Unlock()
		writeJSON(w, http.StatusCreated, map[string]any{"client_id": id, "redirect_uris": m.RedirectURIs, "token_endpoint_auth_method": "none"})
	case "/authorize":
		s.authorize(w, r)
	case "/token":
		s.token(w, r)
	case "/revoke":
		_ = r.ParseForm()
		s.mu.Lock()
		delete(s.access, r.Form.Get("token"))
		delete(s.refresh, r.Form.Get("token"))
		s.Counts.Revocations++
		s.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	default:
		http.NotFound(w, r)
	}
}

func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.clients[q.Get("client_id")]
	redirect := q.Get("redirect_uri")
	switch {
	case c == nil:
		http.Error(w, "unknown client_id", http.StatusBadRequest)
		return
	case !slices.Contains(c.redirects, redirect) && len(c.redirects) > 0:
		http.Error(w, "redirect_uri not registered", http.StatusBadRequest)
		return
	case q.Get("response_type") != "code" || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "":
		http.Error(w, "PKCE S256 required", http.StatusBadRequest)
		return
	}
	user := q.Get("user")
	if user == "" {
		user = "alice"
	}
	code := rand.Text()
	s.codes[code] = &grant{client: c.id, user: user, challenge: q.Get("code_challenge"), redirect: redirect,
		resource: q.Get("resource"), scopes: strings.Fields(q.Get("scope"))}
	s.Counts.Authorizations++
	u, _ := url.Parse(redirect)
	v := u.Query()
	v.Set("code", code)
	v.Set("state", q.Get("state"))
	u.RawQuery = v.Encode()
	http.Redirect(w, r, u.String(), http.StatusFound)
}

func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request"})
		return
	}
	id, secret, basic := r.BasicAuth()
	if !basic {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.PostForm.Get("client_assertion_type") == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer" {
		var ok bool
		if id, ok = s.verifyAssertionLocked(r.PostForm.Get("client_assertion")); !ok {
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client"})
			return
		}
		secret = "(assertion)"
		s.Counts.JWTAuth++
	} else if c := s.clients[id]; c == nil || c.key != nil || c.secret != secret {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client"})
		return
	} else if secret != "" {
		if basic {
			s.Counts.BasicAuth++
		} else {
			s.Counts.PostAuth++
		}
	}
	var g grant
	switch r.PostForm.Get("grant_type") {
	case "authorization_code":
		code := s.codes[r.PostForm.Get("code")]
		delete(s.codes, r.PostForm.Get("code")) // single use
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		if code == nil || code.client != id || code.redirect != r.PostForm.Get("redirect_uri") ||
			base64.RawURLEncoding.EncodeToString(sum[:]) != code.challenge {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant"})
			return
		}
		g = *code
		s.Counts.CodeExchanges++
	case "refresh_token":
		old := s.refresh[r.PostForm.Get("refresh_token")]
		if old == nil || old.client != id {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant"})
			return
		}
		delete(s.refresh, r.PostForm.Get("refresh_token")) // rotated
		g = *old
		s.Counts.Refreshes++
	case "urn:ietf:params:oauth:grant-type:jwt-bearer":
		// An ID-JAG from StartIdP's identity provider (SEP-990), single use,
		// from a confidential client.
		jag := s.jags[r.PostForm.Get("assertion")]
		delete(s.jags, r.PostForm.Get("assertion"))
		if secret == "" || jag == nil || jag.expiry.Before(time.Now()) {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant"})
			return
		}
		g = *jag
		g.client = id
		s.Counts.JWTBearerGrants++
	case "client_credentials":
		if secret == "" {
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client"})
			return
		}
		g = grant{client: id, user: "client:" + id, resource: r.PostForm.Get("resource"), scopes: strings.Fields(r.PostForm.Get("scope"))}
		s.Counts.ClientCredentials++
	default:
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "unsupported_grant_type"})
		return
	}
	g.expiry = time.Now().Add(s.ttl)
	access := rand.Text()
	s.access[access] = &g
	s.issued = append(s.issued, access)
	out := map[string]any{"access_token": access, "token_type": "Bearer", "expires_in": int(s.ttl.Seconds()), "scope": strings.Join(g.scopes, " ")}
	if r.PostForm.Get("grant_type") != "client_credentials" {
		rt := rand.Text()
		s.refresh[rt] = &g
		s.issued = append(s.issued, rt)
		out["refresh_token"] = rt
	}
	writeJSON(w, http.StatusOK, out)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// FollowAuthorize is a test's browser: it opens the authorization URL as
// user, and returns the code and state from the redirect, without following
// it to the redirect URL.
func FollowAuthorize(ctx context.Context, authURL, user string) (code, state, location string, err error) {
	u, err := url.Parse(authURL)
	if err != nil {
		return "", "", "", err
	}
	q := u.Query()
	q.Set("user", user)
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", "", "", err
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		return "", "", "", err
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || resp.StatusCode != http.StatusFound {
		return "", "", "", &url.Error{Op: "authorize", URL: authURL, Err: http.ErrNoLocation}
	}
	return loc.Query().Get("code"), loc.Query().Get("state"), loc.String(), nil
}

// StartIdP starts an enterprise identity provider for enterprise-managed
// authorization (SEP-990): its metadata at
// /.well-known/openid-configuration, and a token endpoint that exchanges an
// ID token from IDToken (any client id, a public client) for an ID-JAG for
// this server's authorization server and MCP endpoint (RFC 8693), which the
// authorization server then takes as a JWT bearer grant (RFC 7523). It
// returns the IdP's issuer URL.
func (s *Server) StartIdP(t interface{ Cleanup(func()) }) string {
	s.mu.Lock()
	s.idTokens, s.jags = map[string]string{}, map[string]*grant{}
	s.mu.Unlock()
	s.IdP = httptest.NewServer(http.HandlerFunc(s.serveIdP))
	t.Cleanup(s.IdP.Close)
	return s.IdP.URL
}

// IDToken issues an ID token for user at the identity provider (opaque: only
// this IdP reads it), as an OpenID Connect sign-in there would.
func (s *Server) IDToken(user string) string {
	tok := rand.Text()
	s.mu.Lock()
	s.idTokens[tok] = user
	s.issued = append(s.issued, tok)
	s.mu.Unlock()
	return tok
}

func (s *Server) serveIdP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/.well-known/openid-configuration":
		writeJSON(w, http.StatusOK, map[string]any{
			"issuer": s.IdP.URL, "token_endpoint": s.IdP.URL + "/token", "authorization_endpoint": s.IdP.URL + "/authorize",
			"grant_types_supported": []string{"urn:ietf:params:oauth:grant-type:token-exchange"}, "code_challenge_methods_supported": []string{"S256"},
		})
	case "/token":
		if err := r.ParseForm(); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request"})
			return
		}
		f := r.PostForm
		s.mu.Lock()
		defer s.mu.Unlock()
		user, ok := s.idTokens[f.Get("subject_token")]
		if f.Get("grant_type") != "urn:ietf:params:oauth:grant-type:token-exchange" || f.Get("client_id") == "" || !ok ||
			f.Get("subject_token_type") != "urn:ietf:params:oauth:token-type:id_token" ||
			f.Get("requested_token_type") != "urn:ietf:params:oauth:token-type:id-jag" ||
			f.Get("audience") != s.AS.URL || f.Get("resource") != s.URL {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request"})
			return
		}
		jag := rand.Text()
		s.jags[jag] = &grant{user: user, resource: s.URL, scopes: strings.Fields(f.Get("scope")), expiry: time.Now().Add(5 * time.Minute)}
		s.issued = append(s.issued, jag)
		s.Counts.TokenExchanges++
		writeJSON(w, http.StatusOK, map[string]any{"access_token": jag, "issued_token_type": "urn:ietf:params:oauth:token-type:id-jag", "token_type": "N_A", "expires_in": 300})
	default:
		http.NotFound(w, r)
	}
}
