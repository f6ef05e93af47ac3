package pool

// Enterprise-managed authorization (SEP-990, the "enterprise-managed
// authorization" extension): the person signs in once at the enterprise's
// identity provider, and the client turns that sign-in into a token for the
// MCP server without a consent screen of its own:
//
//  1. the ID token from the identity provider is exchanged there for an
//     Identity Assertion JWT Authorization Grant (ID-JAG) for the MCP
//     server's authorization server and resource (RFC 8693 token exchange,
//     go-sdk's oauthex.ExchangeToken);
//  2. the ID-JAG is presented to the MCP server's authorization server as a
//     JWT bearer grant (RFC 7523), with the client's own credentials there,
//     for the access token.
//
// go-sdk's auth/extauth.EnterpriseHandler does the same but always
// authenticates step 2 with client_secret_post; here the method is chosen
// from the authorization server's metadata as for every other grant
// (client_secret_basic when offered, RFC 6749 §2.3.1), and the token is
// kept in the token store and obtained again from a fresh ID token on a
// 401 (an ID-JAG grant has no refresh token).

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/switchboard-run/switchboard/internal/tokenstore"
)

// grantJWTBearer is RFC 7523's grant type.
const grantJWTBearer = "urn:ietf:params:oauth:grant-type:jwt-bearer"

// An EnterpriseConfig is the identity provider's side of enterprise-managed
// authorization; the OAuthConfig's ClientID and ClientSecret are the
// client's at the MCP server's authorization server.
type EnterpriseConfig struct {
	// IdPIssuer is the identity provider's issuer URL; its metadata names
	// its token endpoint unless IdPTokenEndpoint does.
	IdPIssuer        string
	IdPTokenEndpoint string
	// IdPClientID and IdPClientSecret are the client's at the identity
	// provider (no secret: a public client).
	IdPClientID     string
	IdPClientSecret string
	// IDToken returns the person's current ID token at the identity
	// provider (from an OpenID Connect sign-in there).
	IDToken func(ctx context.Context) (string, error)
}

// obtainEnterprise runs the two exchanges after a refusal; a.flow held.
func obtainEnterprise(ctx context.Context, a *authenticator, _ *http.Request, r *refusal, held *tokenstore.Record) (*tokenstore.Record, error) {
	return a.enterpriseLocked(ctx, r.challenges, held)
}

// renewEnterprise renews a token that has no refresh token (an ID-JAG
// grant never has one): a fresh exchange is its refresh; a.flow held.
func renewEnterprise(ctx context.Context, a *authenticator, rec *tokenstore.Record) (*tokenstore.Record, error) {
	return a.enterpriseLocked(ctx, nil, rec)
}

// enterpriseLocked runs the two exchanges and keeps the token; a.flow held.
func (a *authenticator) enterpriseLocked(ctx context.Context, challenges []oauthex.Challenge, held *tokenstore.Record) (*tokenstore.Record, error) {
	e := a.cfg.Enterprise
	if a.cfg.ClientID == "" || e.IdPClientID == "" || e.IDToken == nil || e.IdPIssuer == "" && e.IdPTokenEndpoint == "" {
		return nil, fmt.Errorf("server %q: enterprise-managed authorization needs the client id at the authorization server, the identity provider, the client id there and an ID token", a.name)
	}
	prm, asm, err := a.discover(ctx, a.key.URL, challenges)
	if err != nil {
		return nil, err
	}
	idpToken := e.IdPTokenEndpoint
	if idpToken == "" {
		idp, err := auth.GetAuthServerMetadata(ctx, e.IdPIssuer, a.client)
		if err != nil {
			return nil, fmt.Errorf("server %q: identity provider metadata: %w", a.name, err)
		}
		if idp == nil || idp.TokenEndpoint == "" {
			return nil, fmt.Errorf("server %q: identity provider %s publishes no token endpoint", a.name, e.IdPIssuer)
		}
		idpToken = idp.TokenEndpoint
	}
	idToken, err := e.IDToken(ctx)
	if err != nil {
		return nil, fmt.Errorf("server %q: the ID token: %w", a.name, err)
	}
	if idToken == "" {
		return nil, fmt.Errorf("server %q: %w: no ID token from the identity provider", a.name, ErrLoginRequired)
	}
	scopes := a.scopesFor(challenges, prm, held)
	idpClient := &oauthex.ClientCredentials{ClientID: e.IdPClientID}
	if e.IdPClientSecret != "" {
		idpClient.ClientSecretAuth = &oauthex.ClientSecretAuth{ClientSecret: e.IdPClientSecret}
	}
	jag, err := oauthex.ExchangeToken(ctx, idpToken, &oauthex.TokenExchangeRequest{
		RequestedTokenType: oauthex.TokenTypeIDJAG,
		Audience:           asm.Issuer,
		Resource:           prm.Resource,
		Scope:              scopes,
		SubjectToken:       idToken,
		SubjectTokenType:   oauthex.TokenTypeIDToken,
	}, idpClient, a.client)
	if err != nil {
		return nil, fmt.Errorf("server %q: token exchange at the identity provider: %w", a.name, err)
	}
	if typ, _ := jag.Extra("issued_token_type").(string); typ != "" && typ != oauthex.TokenTypeIDJAG {
		return nil, fmt.Errorf("server %q: the identity provider issued a %s, not an ID-JAG", a.name, typ)
	}
	// clientcredentials lets grant_type be replaced and sends no empty
	// "code" (oauth2.Config.Exchange would).
	style := a.authStyle(asm)
	cc := &clientcredentials.Config{ClientID: a.cfg.ClientID, ClientSecret: a.cfg.ClientSecret, TokenURL: asm.TokenEndpoint, AuthStyle: style,
		EndpointParams: url.Values{"grant_type": {grantJWTBearer}, "assertion": {jag.AccessToken}}}
	tok, err := cc.Token(context.WithValue(ctx, oauth2.HTTPClient, a.client))
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode == http.StatusBadRequest && re.ErrorCode == "invalid_grant" {
			return nil, fmt.Errorf("server %q: %w: the authorization server refused the identity provider's grant (%s)", a.name, ErrLoginRequired, re.ErrorDescription)
		}
		return nil, fmt.Errorf("server %q: JWT bearer grant: %w", a.name, err)
	}
	tok.RefreshToken = "" // none is meant for this grant; a new ID-JAG is the refresh
	rec := a.record(tok, asm, asm.TokenEndpoint, a.cfg.ClientID, "", style, scopes)
	return rec, a.setLocked(rec)
}
