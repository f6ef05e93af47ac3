package pool

// The authorization code grant with PKCE (OAuth 2.1 §4.1), the default: a
// person signs in in a browser (OAuthOptions.Interactive). go-sdk's
// AuthorizationCodeHandler runs it (discovery, pre-registered client, a
// Client ID Metadata Document or dynamic registration, the resource
// indicator, the iss check) for a 2025-06-18 or later server; a 2025-03-26
// server whose metadata go-sdk refuses is signed in to by grant_legacy.go.
// A pool with nobody to ask runs no grant: the error says to sign in.

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"

	"github.com/switchboard-run/switchboard/internal/tokenstore"
)

// obtainNeedsLogin is the authorization code grant of a pool with nobody
// to ask: `switchboard login` signs in instead.
func obtainNeedsLogin(_ context.Context, a *authenticator, _ *http.Request, _ *refusal, _ *tokenstore.Record) (*tokenstore.Record, error) {
	return nil, fmt.Errorf("server %q: %w: run `switchboard login %s`", a.name, ErrLoginRequired, a.name)
}

// obtainAuthorizationCode has the person sign in and keeps the token;
// a.flow held.
func obtainAuthorizationCode(ctx context.Context, a *authenticator, req *http.Request, r *refusal, held *tokenstore.Record) (*tokenstore.Record, error) {
	if asm := a.legacyMetadata(ctx, r); asm != nil {
		return obtainLegacy(ctx, a, asm, r, held) // grant_legacy.go
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
		return withHeld(discovered, held)
	}
	var got *oauth2.Config
	var tok *oauth2.Token
	cfg.NewTokenSource = func(ctx context.Context, c *oauth2.Config, t *oauth2.Token) (oauth2.TokenSource, error) {
		got, tok = c, t
		return oauth2.StaticTokenSource(t), nil // refreshes are ours (grant_refresh.go), so that they are stored
	}
	h, err := auth.NewAuthorizationCodeHandler(cfg)
	if err != nil {
		return nil, fmt.Errorf("server %q: %w", a.name, err)
	}
	// The handler reads the refusal's challenges itself (go-sdk's own
	// parse); it is given the refusal as it came.
	if err := h.Authorize(ctx, req, r.newResp()); err != nil {
		return nil, fmt.Errorf("server %q: sign-in: %w", a.name, err)
	}
	if tok == nil {
		return nil, fmt.Errorf("server %q: sign-in ended without a token", a.name)
	}
	rec := a.record(tok, nil, got.Endpoint.TokenURL, got.ClientID, got.ClientSecret, got.Endpoint.AuthStyle, got.Scopes)
	// The revocation endpoint is for logout; the handler does not return
	// the metadata it read, so it is looked up again (one GET, at sign-in).
	if _, asm, err := a.discover(ctx, a.key.URL, r.challenges); err == nil {
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
		GrantTypes:              []string{string(GrantAuthorizationCode), "refresh_token"},
		ResponseTypes:           []string{"code"},
		TokenEndpointAuthMethod: "none",
	}
}
