package pool

// Servers of the 2025-03-26 authorization spec, whose metadata names an
// issuer with a path.
//
// Under 2025-03-26 a server publishes no protected-resource metadata: the
// MCP server's origin is the authorization server, and its RFC 8414
// metadata is at <origin>/.well-known/oauth-authorization-server
// (2025-03-26 basic/authorization, "Server Metadata Discovery"). Servers of
// that era commonly mount their OAuth endpoints under a path and say so in
// the metadata's issuer (".../oauth"); the conformance suite's
// auth/2025-03-26-oauth-metadata-backcompat is one. go-sdk's discovery
// requires the issuer to equal the URL the metadata was derived from (RFC
// 8414 §3.3) and refuses it.
//
// §3.3 is there so that metadata fetched for one issuer cannot name
// another's endpoints (a mix-up). Here there is only one party: by the
// 2025-03-26 rule the origin that serves the MCP endpoint is the
// authorization server. So the pool accepts such metadata only when every
// URL in it (the issuer and each endpoint it uses) is on the MCP server's
// own origin, there is no protected-resource metadata at all (a server
// that publishes any is judged by the 2025-11-25 rules, go-sdk's), and the
// server supports PKCE with S256; anything else still fails as go-sdk
// fails it. The flow is then the one go-sdk runs (the same registration,
// PKCE, resource indicator, iss check), driven here with the metadata as
// found.

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"

	"github.com/switchboard-run/switchboard/internal/tokenstore"
)

// maxMetadataBytes bounds a metadata document, as go-sdk's 1 MiB does.
const maxMetadataBytes = 1 << 20

// legacyMetadata returns the authorization server metadata of a 2025-03-26
// server whose issuer go-sdk would refuse, or nil when the server is not
// one (go-sdk's flow then decides).
func (a *authenticator) legacyMetadata(ctx context.Context, r *refusal) *oauthex.AuthServerMeta {
	if r.param("resource_metadata") != "" {
		return nil // a 2025-06-18 or later server
	}
	resource, err := url.Parse(a.key.URL)
	if err != nil || !httpsOrLoopback(resource) {
		return nil
	}
	for _, u := range prmURLs("", a.key.URL) {
		if m, err := oauthex.GetProtectedResourceMetadata(ctx, u[0], u[1], a.client); err == nil && m != nil {
			return nil
		}
	}
	root := &url.URL{Scheme: resource.Scheme, Host: resource.Host}
	asm, err := a.getMetadata(ctx, root.String()+"/.well-known/oauth-authorization-server")
	if err != nil || asm == nil {
		return nil
	}
	if asm.Issuer == root.String() || asm.Issuer == root.String()+"/" {
		return nil // go-sdk accepts it as it is
	}
	for _, u := range []string{asm.Issuer, asm.AuthorizationEndpoint, asm.TokenEndpoint, asm.RegistrationEndpoint, asm.RevocationEndpoint} {
		if u != "" && !sameOrigin(mustParse(u), a.key.URL) {
			return nil
		}
	}
	if asm.AuthorizationEndpoint == "" || asm.TokenEndpoint == "" || !slices.Contains(asm.CodeChallengeMethodsSupported, "S256") {
		return nil
	}
	return asm
}

func mustParse(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		return &url.URL{}
	}
	return u
}

// httpsOrLoopback: where a client may fetch metadata (go-sdk's rule).
func httpsOrLoopback(u *url.URL) bool {
	if u.Scheme == "https" {
		return true
	}
	if u.Scheme != "http" {
		return false
	}
	host := u.Hostname()
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// getMetadata fetches an RFC 8414 document; nil, nil on a 4xx (none there).
func (a *authenticator) getMetadata(ctx context.Context, u string) (*oauthex.AuthServerMeta, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := a.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, maxChallengeBody))
		if resp.StatusCode >= 400 && resp.StatusCode < 500 {
			return nil, nil
		}
		return nil, fmt.Errorf("%s answered %s", u, resp.Status)
	}
	var asm oauthex.AuthServerMeta
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxMetadataBytes)).Decode(&asm); err != nil {
		return nil, fmt.Errorf("%s: %w", u, err)
	}
	return &asm, nil
}

// obtainLegacy is obtainAuthorizationCode for a server legacyMetadata
// accepted; a.flow held.
func obtainLegacy(ctx context.Context, a *authenticator, asm *oauthex.AuthServerMeta, r *refusal, held *tokenstore.Record) (*tokenstore.Record, error) {
	redirect := a.interactive.RedirectURL
	cfg := &oauth2.Config{RedirectURL: redirect, Endpoint: oauth2.Endpoint{AuthURL: asm.AuthorizationEndpoint, TokenURL: asm.TokenEndpoint}}
	switch {
	case a.cfg != nil && a.cfg.ClientMetadataURL != "" && asm.ClientIDMetadataDocumentSupported:
		cfg.ClientID, cfg.Endpoint.AuthStyle = a.cfg.ClientMetadataURL, oauth2.AuthStyleInParams
	case a.cfg != nil && a.cfg.ClientID != "":
		cfg.ClientID, cfg.ClientSecret, cfg.Endpoint.AuthStyle = a.cfg.ClientID, a.cfg.ClientSecret, a.authStyle(asm)
	case asm.RegistrationEndpoint != "":
		reg, err := oauthex.RegisterClient(ctx, asm.RegistrationEndpoint, registrationMetadata(redirect), a.client)
		if err != nil {
			return nil, fmt.Errorf("server %q: sign-in: registering the client: %w", a.name, err)
		}
		cfg.ClientID, cfg.ClientSecret = reg.ClientID, reg.ClientSecret
		cfg.Endpoint.AuthStyle = oauth2.AuthStyleInParams // "none", and client_secret_post
		if reg.TokenEndpointAuthMethod == "" || reg.TokenEndpointAuthMethod == string(AuthMethodBasic) {
			cfg.Endpoint.AuthStyle = oauth2.AuthStyleInHeader
		}
	default:
		return nil, fmt.Errorf("server %q: sign-in: the authorization server offers no way to register a client, and none is configured", a.name)
	}
	cfg.Scopes = a.scopesFor(r.challenges, nil, held)
	if slices.Contains(asm.ScopesSupported, "offline_access") && !slices.Contains(cfg.Scopes, "offline_access") {
		cfg.Scopes = append(cfg.Scopes, "offline_access") // SEP-2207, as go-sdk's RequestRefreshToken
	}

	verifier, state := oauth2.GenerateVerifier(), rand.Text()
	resource := oauth2.SetAuthURLParam("resource", a.key.URL)
	res, err := a.interactive.Fetch(ctx, &auth.AuthorizationArgs{URL: cfg.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), resource)})
	if err != nil {
		return nil, fmt.Errorf("server %q: sign-in: %w", a.name, err)
	}
	switch {
	case res.State != state:
		return nil, fmt.Errorf("server %q: sign-in: the redirect's state is not the one sent", a.name)
	case res.Iss != "" && res.Iss != asm.Issuer, res.Iss == "" && asm.AuthorizationResponseIssParameterSupported:
		// RFC 9207 §2.4, as go-sdk checks it.
		return nil, fmt.Errorf("server %q: sign-in: the redirect's issuer %q is not %q", a.name, res.Iss, asm.Issuer)
	}
	tok, err := cfg.Exchange(context.WithValue(ctx, oauth2.HTTPClient, a.client), res.Code, oauth2.VerifierOption(verifier), resource)
	if err != nil {
		return nil, fmt.Errorf("server %q: sign-in: token exchange: %w", a.name, err)
	}
	rec := a.record(tok, asm, asm.TokenEndpoint, cfg.ClientID, cfg.ClientSecret, cfg.Endpoint.AuthStyle, cfg.Scopes)
	return rec, a.setLocked(rec)
}
