package pool

// What every grant needs to know about the server before it asks for a
// token: where its metadata is (RFC 9728, RFC 8414), which scopes to ask
// for, how to authenticate at the token endpoint, and how a token response
// becomes a stored record.

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"

	"github.com/switchboard-run/switchboard/internal/tokenstore"
)

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
	return withHeld(s, held)
}

// withHeld adds to s the scopes held has and s lacks.
func withHeld(s []string, held *tokenstore.Record) []string {
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
	var method AuthMethod
	if a.cfg != nil {
		method = a.cfg.TokenEndpointAuthMethod
	}
	if method == "" {
		switch supported := asm.TokenEndpointAuthMethodsSupported; {
		case len(supported) == 0, slices.Contains(supported, string(AuthMethodBasic)):
			method = AuthMethodBasic
		case slices.Contains(supported, string(AuthMethodPost)):
			method = AuthMethodPost
		}
	}
	if method == AuthMethodPost {
		return oauth2.AuthStyleInParams
	}
	return oauth2.AuthStyleInHeader
}

// record is the stored form of a token response.
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
