package pool_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/oauthtest"
	"github.com/switchboard-run/switchboard/internal/tokenstore"
	"github.com/switchboard-run/switchboard/pool"
)

// browser is a test's person: it signs in as whoever user names.
type browser struct {
	mu    sync.Mutex
	user  string
	opens int
}

func (b *browser) as(user string) {
	b.mu.Lock()
	b.user = user
	b.mu.Unlock()
}

func (b *browser) interactive() *pool.Interactive {
	return &pool.Interactive{
		RedirectURL: "http://127.0.0.1:1/callback", // never dialed: the browser stops at the redirect
		Fetch: func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
			b.mu.Lock()
			user := b.user
			b.opens++
			b.mu.Unlock()
			code, state, _, err := oauthtest.FollowAuthorize(ctx, args.URL, user)
			if err != nil {
				return nil, err
			}
			return &auth.AuthorizationResult{Code: code, State: state}, nil
		},
	}
}

func whoami(t *testing.T, p *pool.Pool, srv *pool.Server) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := p.CallTool(ctx, srv, &mcp.CallToolParams{Name: "whoami"})
	if err != nil {
		return "", err
	}
	return res.Content[0].(*mcp.TextContent).Text, nil
}

func mustWhoami(t *testing.T, p *pool.Pool, srv *pool.Server, want string) {
	t.Helper()
	got, err := whoami(t, p, srv)
	if err != nil {
		t.Fatalf("whoami: %v", err)
	}
	if got != want {
		t.Fatalf("whoami = %q, want %q", got, want)
	}
}

// TestOAuthSignInRefreshRevoke: a server that only answers 401 with
// WWW-Authenticate is signed in to by discovery and dynamic registration;
// an expired token is refreshed without the person; a revoked one sends the
// person back to sign in; the token survives the pool in a 0600 file and is
// never logged.
func TestOAuthSignInRefreshRevoke(t *testing.T) {
	as := oauthtest.New(t, time.Hour, "notes:read")
	dir := t.TempDir()
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b := &browser{user: "alice"}
	p := pool.New(&pool.Options{Logger: logger, OAuth: &pool.OAuthOptions{TokenDir: dir, Interactive: b.interactive()}})
	defer p.Close()
	srv := &pool.Server{Name: "remote", URL: as.URL}

	mustWhoami(t, p, srv, "alice")
	c := as.Snapshot()
	if c.Registrations != 1 || c.Authorizations != 1 || c.CodeExchanges != 1 || b.opens != 1 {
		t.Fatalf("after sign-in: %+v, browser opened %d times; want one registration, authorization and exchange", c, b.opens)
	}

	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	if len(files) != 1 {
		t.Fatalf("token files: %v, want 1", files)
	}
	fi, err := os.Stat(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v, want 0600", fi.Mode().Perm())
	}
	data, _ := os.ReadFile(files[0])
	stored := tokenOf(t, data)
	if as.UserOf(stored) != "alice" {
		t.Fatalf("stored token is not alice's")
	}

	// Expired at the server: one 401, one refresh, no person.
	as.ExpireAll()
	mustWhoami(t, p, srv, "alice")
	if c := as.Snapshot(); c.Refreshes != 1 || c.Authorizations != 1 {
		t.Fatalf("after expiry: %+v; want one refresh and no new authorization", c)
	}

	// A second pool (another process) uses the stored token as it is.
	p2 := pool.New(&pool.Options{OAuth: &pool.OAuthOptions{TokenDir: dir}})
	defer p2.Close()
	mustWhoami(t, p2, srv, "alice")
	if c := as.Snapshot(); c.Authorizations != 1 || c.Refreshes != 1 {
		t.Fatalf("second pool: %+v; want the stored token used as is", c)
	}

	// Revoked: refresh fails, the headless pool has nobody to ask and
	// returns the server's 401; the interactive one signs in again.
	as.RevokeUser("alice")
	_, err = whoami(t, p2, &pool.Server{Name: "remote", URL: as.URL, Identity: "other"})
	if pe, ok := errors.AsType[*pool.Error](err); !ok || pe.Kind != pool.KindTransport || !errors.Is(err, pool.ErrLoginRequired) || !strings.Contains(err.Error(), "switchboard login remote") {
		t.Fatalf("headless, no token: err = %v, want a transport *pool.Error wrapping ErrLoginRequired that names the command", err)
	}
	t.Logf("headless, no token: %v", err)
	// Mid-session, a revoked token that cannot be refreshed gives the
	// server's own 401, classified as such.
	_, err = whoami(t, p2, srv)
	if pe, ok := errors.AsType[*pool.Error](err); !ok || pe.Status != http.StatusUnauthorized || pe.Authenticate == "" {
		t.Fatalf("headless, revoked mid-session: err = %v, want a *pool.Error with status 401 and its WWW-Authenticate", err)
	}
	mustWhoami(t, p, srv, "alice")
	if c := as.Snapshot(); c.Authorizations != 2 || b.opens != 2 {
		t.Fatalf("after revocation: %+v, opens %d; want a second sign-in", c, b.opens)
	}

	for _, f := range files {
		data, _ := os.ReadFile(f)
		if tok := tokenOf(t, data); strings.Contains(logs.String(), tok) {
			t.Fatalf("the access token appears in the log")
		}
	}
	if strings.Contains(logs.String(), stored) {
		t.Fatalf("the first access token appears in the log")
	}
}

// TestOAuthIdentitiesNeverShare: two identities of one server sign in
// separately, and each call carries its own identity's token.
func TestOAuthIdentitiesNeverShare(t *testing.T) {
	as := oauthtest.New(t, time.Hour)
	dir := t.TempDir()
	b := &browser{user: "alice"}
	p := pool.New(&pool.Options{OAuth: &pool.OAuthOptions{TokenDir: dir, Interactive: b.interactive()}})
	defer p.Close()
	alice := &pool.Server{Name: "remote", URL: as.URL, Identity: "alice"}
	bob := &pool.Server{Name: "remote", URL: as.URL, Identity: "bob"}

	mustWhoami(t, p, alice, "alice")
	b.as("bob")
	mustWhoami(t, p, bob, "bob") // a sign-in of its own, not alice's token
	b.as("mallory")              // any further sign-in would show up as mallory
	for range 3 {
		mustWhoami(t, p, alice, "alice")
		mustWhoami(t, p, bob, "bob")
	}
	if c := as.Snapshot(); c.Authorizations != 2 {
		t.Fatalf("authorizations = %d, want 2 (one per identity)", c.Authorizations)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	if len(files) != 2 {
		t.Fatalf("token files: %v, want one per identity", files)
	}
}

// TestOAuthClientCredentials: a headless agent gets its token with the
// client credentials grant, authenticating as configured (basic or post),
// and gets a new one when the server stops accepting the old.
func TestOAuthClientCredentials(t *testing.T) {
	for _, method := range []pool.AuthMethod{pool.AuthMethodBasic, pool.AuthMethodPost} {
		t.Run(string(method), func(t *testing.T) {
			as := oauthtest.New(t, time.Hour, "jobs")
			as.RegisterClient("agent-1", "s3cret")
			p := pool.New(&pool.Options{OAuth: &pool.OAuthOptions{TokenDir: t.TempDir()}})
			defer p.Close()
			srv := &pool.Server{Name: "jobs", URL: as.URL, OAuth: &pool.OAuthConfig{
				Grant: pool.GrantClientCredentials, ClientID: "agent-1", ClientSecret: "s3cret", TokenEndpointAuthMethod: method}}
			mustWhoami(t, p, srv, "client:agent-1")
			as.ExpireAll()
			mustWhoami(t, p, srv, "client:agent-1")
			c := as.Snapshot()
			if c.ClientCredentials != 2 {
				t.Fatalf("client credentials grants = %d, want 2", c.ClientCredentials)
			}
			basic, post := c.BasicAuth, c.PostAuth
			if method == pool.AuthMethodBasic && (basic != 2 || post != 0) || method == pool.AuthMethodPost && (post != 2 || basic != 0) {
				t.Fatalf("client authentication: basic %d, post %d; want all %s", basic, post, method)
			}
		})
	}
}

// TestOAuthClientCredentialsJWT: a headless agent authenticates with a
// signed assertion (private_key_jwt, ES256) instead of a secret, a new one
// for each token request.
func TestOAuthClientCredentialsJWT(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	as := oauthtest.New(t, time.Hour, "jobs")
	as.RegisterKeyClient("agent-2", &key.PublicKey)
	p := pool.New(&pool.Options{OAuth: &pool.OAuthOptions{TokenDir: t.TempDir()}})
	defer p.Close()
	srv := &pool.Server{Name: "jobs", URL: as.URL, OAuth: &pool.OAuthConfig{
		Grant: pool.GrantClientCredentials, ClientID: "agent-2", PrivateKeyPEM: keyPEM}}
	mustWhoami(t, p, srv, "client:agent-2")
	as.ExpireAll()
	mustWhoami(t, p, srv, "client:agent-2")
	if c := as.Snapshot(); c.JWTAuth != 2 || c.ClientCredentials != 2 {
		t.Fatalf("JWT authentications %d, grants %d; want 2 and 2", c.JWTAuth, c.ClientCredentials)
	}

	// Another key is refused: the server's 401 comes back.
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ = x509.MarshalPKCS8PrivateKey(other)
	bad := &pool.Server{Name: "jobs", URL: as.URL, Identity: "impostor", OAuth: &pool.OAuthConfig{
		Grant: pool.GrantClientCredentials, ClientID: "agent-2", PrivateKeyPEM: string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))}}
	if _, err := whoami(t, p, bad); err == nil {
		t.Fatal("a call with an assertion signed by another key succeeded")
	}
}

// TestOAuthClientCredentialsWrongSecret: a refused grant leaves the
// server's 401 as the answer.
func TestOAuthClientCredentialsWrongSecret(t *testing.T) {
	as := oauthtest.New(t, time.Hour)
	as.RegisterClient("agent-1", "s3cret")
	p := pool.New(&pool.Options{OAuth: &pool.OAuthOptions{TokenDir: t.TempDir()}})
	defer p.Close()
	srv := &pool.Server{Name: "jobs", URL: as.URL, OAuth: &pool.OAuthConfig{
		Grant: pool.GrantClientCredentials, ClientID: "agent-1", ClientSecret: "wrong"}}
	_, err := whoami(t, p, srv)
	if pe, ok := errors.AsType[*pool.Error](err); !ok || pe.Status != http.StatusUnauthorized {
		t.Fatalf("err = %v, want a *pool.Error with status 401", err)
	}
}

// TestOAuthStepUp: a 403 insufficient_scope signs in again for the union
// of the scopes held and asked for, and the call goes through.
func TestOAuthStepUp(t *testing.T) {
	as := oauthtest.New(t, time.Hour, "read")
	b := &browser{user: "alice"}
	p := pool.New(&pool.Options{OAuth: &pool.OAuthOptions{TokenDir: t.TempDir(), Interactive: b.interactive()}})
	defer p.Close()
	srv := &pool.Server{Name: "remote", URL: as.URL}
	mustWhoami(t, p, srv, "alice")
	as.Require("read", "write")
	mustWhoami(t, p, srv, "alice")
	if c := as.Snapshot(); c.Authorizations != 2 {
		t.Fatalf("authorizations = %d, want 2 (sign-in, step-up)", c.Authorizations)
	}
}

func tokenOf(t *testing.T, data []byte) string {
	t.Helper()
	_, rest, ok := bytes.Cut(data, []byte(`"access_token":"`))
	tok, _, ok2 := bytes.Cut(rest, []byte(`"`))
	if !ok || !ok2 || len(tok) == 0 {
		t.Fatalf("no access token in the record")
	}
	return string(tok)
}

// TestOAuthRefreshBeforeExpiry: a token about to expire is refreshed before
// it is sent, so the server never refuses it; a token far from expiry is
// sent as it is.
func TestOAuthRefreshBeforeExpiry(t *testing.T) {
	as := oauthtest.New(t, time.Hour)
	b := &browser{user: "alice"}
	p := pool.New(&pool.Options{OAuth: &pool.OAuthOptions{TokenDir: t.TempDir(), Interactive: b.interactive()}})
	defer p.Close()
	srv := &pool.Server{Name: "remote", URL: as.URL}
	mustWhoami(t, p, srv, "alice")
	mustWhoami(t, p, srv, "alice")
	before := as.Snapshot()
	if before.MCPUnauthorized != 1 || before.Refreshes != 0 {
		t.Fatalf("after sign-in and a call: %+v; want the one 401 that started it and no refresh", before)
	}

	// Ten seconds before the hour is up (the server's clock has not moved:
	// it would still accept the token).
	restore := pool.SetOAuthNow(func() time.Time { return time.Now().Add(time.Hour - 10*time.Second) })
	mustWhoami(t, p, srv, "alice")
	restore()
	after := as.Snapshot()
	if after.Refreshes != 1 || after.MCPUnauthorized != 1 || after.Authorizations != 1 {
		t.Fatalf("call near expiry: %+v; want one refresh and no new 401 or sign-in", after)
	}
	mustWhoami(t, p, srv, "alice")
	if c := as.Snapshot(); c.Refreshes != 1 {
		t.Fatalf("call with the fresh token: %+v; want no further refresh", c)
	}
}

// TestOAuthStaticAuthorizationWins: a server configured with its own
// Authorization header gets no OAuth: its 401 is returned as it came.
func TestOAuthStaticAuthorizationWins(t *testing.T) {
	as := oauthtest.New(t, time.Hour)
	b := &browser{user: "alice"}
	p := pool.New(&pool.Options{OAuth: &pool.OAuthOptions{TokenDir: t.TempDir(), Interactive: b.interactive()}})
	defer p.Close()
	_, err := whoami(t, p, &pool.Server{Name: "remote", URL: as.URL, Headers: map[string]string{"Authorization": "Bearer static"}})
	if pe, ok := errors.AsType[*pool.Error](err); !ok || pe.Status != http.StatusUnauthorized {
		t.Fatalf("err = %v, want the server's 401", err)
	}
	if c := as.Snapshot(); c.Authorizations != 0 || b.opens != 0 {
		t.Fatalf("the pool signed in over a configured Authorization header: %+v", c)
	}
}

// TestOAuthConcurrent401sRefreshOnce: calls refused at once for an expired
// token share one refresh; none of them signs in again.
func TestOAuthConcurrent401sRefreshOnce(t *testing.T) {
	as := oauthtest.New(t, time.Hour)
	b := &browser{user: "alice"}
	p := pool.New(&pool.Options{OAuth: &pool.OAuthOptions{TokenDir: t.TempDir(), Interactive: b.interactive()}})
	defer p.Close()
	srv := &pool.Server{Name: "remote", URL: as.URL}
	mustWhoami(t, p, srv, "alice")
	as.ExpireAll()
	const n = 8
	errs := make(chan error, n)
	for range n {
		go func() {
			got, err := whoami(t, p, srv)
			if err == nil && got != "alice" {
				err = errors.New("whoami = " + got)
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if c := as.Snapshot(); c.Refreshes != 1 || c.Authorizations != 1 {
		t.Fatalf("%d concurrent calls after expiry: %+v; want one refresh, no new sign-in", n, c)
	}
}

// TestOAuthPlain401IsTheServers: a 401 that names no protected-resource
// metadata (a server wanting a static token) is returned as it came, not
// turned into a sign-in the server never offered.
func TestOAuthPlain401IsTheServers(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="studio"`)
		http.Error(w, "missing token", http.StatusUnauthorized)
	}))
	defer hs.Close()
	p := pool.New(&pool.Options{OAuth: &pool.OAuthOptions{TokenDir: t.TempDir()}})
	defer p.Close()
	_, err := whoami(t, p, &pool.Server{Name: "studio", URL: hs.URL})
	if pe, ok := errors.AsType[*pool.Error](err); !ok || pe.Status != http.StatusUnauthorized || errors.Is(err, pool.ErrLoginRequired) {
		t.Fatalf("err = %v, want the server's own 401", err)
	}
}

// TestOAuthLegacyIssuerWithPath: a 2025-03-26 server (no protected-resource
// metadata; its origin is the authorization server) whose metadata names
// the issuer <origin>/oauth is signed in to, and its token refreshed, with
// the endpoints it names; the same metadata pointing the token endpoint at
// another origin is refused before anything is sent there or the person
// is asked.
func TestOAuthLegacyIssuerWithPath(t *testing.T) {
	as := oauthtest.NewLegacy(t, time.Hour, "")
	dir := t.TempDir()
	b := &browser{user: "alice"}
	p := pool.New(&pool.Options{OAuth: &pool.OAuthOptions{TokenDir: dir, Interactive: b.interactive()}})
	defer p.Close()
	srv := &pool.Server{Name: "legacy", URL: as.URL}
	mustWhoami(t, p, srv, "alice")
	if c := as.Snapshot(); c.Registrations != 1 || c.Authorizations != 1 || c.CodeExchanges != 1 {
		t.Fatalf("after sign-in: %+v; want one registration, authorization and exchange", c)
	}
	rec, err := (&tokenstore.Store{Dir: dir}).Load(tokenstore.Key{URL: as.URL})
	if err != nil || rec.Issuer != as.AS.URL+"/oauth" || rec.TokenURL != as.AS.URL+"/oauth/token" || rec.RevocationURL != as.AS.URL+"/oauth/revoke" {
		t.Fatalf("stored record %v (token URL %q, revocation %q), %v; want the issuer and endpoints under /oauth", rec, rec.TokenURL, rec.RevocationURL, err)
	}
	as.ExpireAll()
	mustWhoami(t, p, srv, "alice")
	if c := as.Snapshot(); c.Refreshes != 1 || c.Authorizations != 1 {
		t.Fatalf("after expiry: %+v; want one refresh, no new sign-in", c)
	}

	var foreignHits atomic.Int32
	foreign := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		foreignHits.Add(1)
		http.Error(w, "not here", http.StatusTeapot)
	}))
	defer foreign.Close()
	elsewhere := oauthtest.NewLegacy(t, time.Hour, foreign.URL+"/token")
	b2 := &browser{user: "alice"}
	p2 := pool.New(&pool.Options{OAuth: &pool.OAuthOptions{TokenDir: t.TempDir(), Interactive: b2.interactive()}})
	defer p2.Close()
	if _, err := whoami(t, p2, &pool.Server{Name: "elsewhere", URL: elsewhere.URL}); err == nil {
		t.Fatal("signed in with metadata naming another origin's token endpoint")
	}
	if foreignHits.Load() != 0 || b2.opens != 0 || elsewhere.Snapshot().Registrations != 0 {
		t.Fatalf("foreign token endpoint hit %d times, browser opened %d times, %+v; want nothing", foreignHits.Load(), b2.opens, elsewhere.Snapshot())
	}
}

// TestOAuthRefusalIsRecorded: a headless pool refused for want of a
// sign-in records the refusal in the token store (for `switchboard
// status` and the studio's page), step-up refusals with the scope asked
// for; a sign-in clears it.
func TestOAuthRefusalIsRecorded(t *testing.T) {
	as := oauthtest.New(t, time.Hour, "read")
	dir := t.TempDir()
	store := &tokenstore.Store{Dir: dir}
	key := tokenstore.Key{URL: as.URL}
	headless := pool.New(&pool.Options{OAuth: &pool.OAuthOptions{TokenDir: dir}})
	defer headless.Close()
	srv := &pool.Server{Name: "remote", URL: as.URL}
	if _, err := whoami(t, headless, srv); !errors.Is(err, pool.ErrLoginRequired) {
		t.Fatalf("headless, no token: %v", err)
	}
	r, err := store.LoadRefusal(key)
	if err != nil || r.Status != http.StatusUnauthorized || !strings.Contains(r.Reason, "switchboard login remote") || r.At.IsZero() {
		t.Fatalf("refusal after a headless 401: %+v, %v", r, err)
	}

	b := &browser{user: "alice"}
	person := pool.New(&pool.Options{OAuth: &pool.OAuthOptions{TokenDir: dir, Interactive: b.interactive()}})
	defer person.Close()
	mustWhoami(t, person, srv, "alice")
	if _, err := store.LoadRefusal(key); !errors.Is(err, tokenstore.ErrNotFound) {
		t.Fatalf("after sign-in the refusal is still there: %v", err)
	}
	mustWhoami(t, headless, srv, "alice") // the stored token, re-read

	// The server now wants more: the headless pool cannot step up.
	as.Require("read", "write")
	if _, err := whoami(t, headless, srv); err == nil {
		t.Fatal("a headless pool stepped up without a person")
	}
	r, err = store.LoadRefusal(key)
	if err != nil || r.Status != http.StatusForbidden || r.Error != "insufficient_scope" || r.Scope != "read write" {
		t.Fatalf("refusal after a step-up 403: %+v, %v", r, err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, f := range files {
		fi, _ := os.Stat(f)
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", f, fi.Mode().Perm())
		}
	}
}

// TestOAuthEnterprise: enterprise-managed authorization (SEP-990). A
// headless pool with the person's ID token at the identity provider
// exchanges it there for an ID-JAG, and that at the MCP server's
// authorization server (client_secret_basic) for an access token: no
// browser, no consent. An expired token is got again the same way (an
// ID-JAG grant has no refresh token); an ID token the IdP does not know
// gets no token at all.
func TestOAuthEnterprise(t *testing.T) {
	as := oauthtest.New(t, time.Hour, "notes")
	as.RegisterClient("xaa-client", "xaa-secret")
	idp := as.StartIdP(t)
	idToken := as.IDToken("dana")
	p := pool.New(&pool.Options{OAuth: &pool.OAuthOptions{TokenDir: t.TempDir()}})
	defer p.Close()
	ent := func(tok string) *pool.EnterpriseConfig {
		return &pool.EnterpriseConfig{IdPIssuer: idp, IdPClientID: "idp-client",
			IDToken: func(context.Context) (string, error) { return tok, nil }}
	}
	srv := &pool.Server{Name: "remote", URL: as.URL, OAuth: &pool.OAuthConfig{ClientID: "xaa-client", ClientSecret: "xaa-secret", Enterprise: ent(idToken)}}
	mustWhoami(t, p, srv, "dana")
	as.ExpireAll()
	mustWhoami(t, p, srv, "dana")
	if c := as.Snapshot(); c.TokenExchanges != 2 || c.JWTBearerGrants != 2 || c.BasicAuth != 2 || c.Authorizations != 0 || c.Refreshes != 0 {
		t.Fatalf("%+v; want two exchanges and two JWT bearer grants with client_secret_basic, no sign-in or refresh", c)
	}
	// About to expire: renewed by a new exchange before it is sent, so the
	// server refuses nothing.
	refused := as.Snapshot().MCPUnauthorized
	restore := pool.SetOAuthNow(func() time.Time { return time.Now().Add(time.Hour - 10*time.Second) })
	mustWhoami(t, p, srv, "dana")
	restore()
	if c := as.Snapshot(); c.TokenExchanges != 3 || c.JWTBearerGrants != 3 || c.MCPUnauthorized != refused {
		t.Fatalf("near expiry: %+v; want a third exchange and no new refusal (%d before)", c, refused)
	}

	stranger := &pool.Server{Name: "remote", URL: as.URL, Identity: "stranger", OAuth: &pool.OAuthConfig{ClientID: "xaa-client", ClientSecret: "xaa-secret", Enterprise: ent("not-an-id-token")}}
	if _, err := whoami(t, p, stranger); err == nil {
		t.Fatal("an unknown ID token got a token")
	}
	if c := as.Snapshot(); c.TokenExchanges != 3 || c.JWTBearerGrants != 3 {
		t.Fatalf("%+v; the unknown ID token was exchanged", c)
	}
}
