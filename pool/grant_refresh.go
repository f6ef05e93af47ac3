package pool

// The refresh token grant (RFC 6749 §6, OAuth 2.1 §4.3): the first way to
// renew any token that has a refresh token, whichever grant got it. What
// renews a token without one is the grant's own (refreshOr's fallback):
// a new client credentials grant, a new enterprise exchange, or nothing
// (the authorization code grant needs the person).

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/oauth2"

	"github.com/switchboard-run/switchboard/internal/tokenstore"
)

// errNoRefresh: the token has no refresh token and its grant has no other
// way to renew it without the person.
var errNoRefresh = errors.New("no refresh token")

// refreshOr renews with the record's refresh token, else with fallback
// (nil: none).
func refreshOr(fallback renewFunc) renewFunc {
	return func(ctx context.Context, a *authenticator, rec *tokenstore.Record) (*tokenstore.Record, error) {
		switch {
		case rec.RefreshToken != "":
			return refresh(ctx, a, rec)
		case fallback != nil:
			return fallback(ctx, a, rec)
		default:
			return nil, errNoRefresh
		}
	}
}

// refresh exchanges rec's refresh token at the token endpoint it came from
// and keeps the token it gets; a.flow held.
func refresh(ctx context.Context, a *authenticator, rec *tokenstore.Record) (*tokenstore.Record, error) {
	cfg := &oauth2.Config{ClientID: rec.ClientID, ClientSecret: rec.ClientSecret,
		Endpoint: oauth2.Endpoint{TokenURL: rec.TokenURL, AuthStyle: oauth2.AuthStyle(rec.AuthStyle)}, Scopes: rec.Scopes}
	tok, err := cfg.TokenSource(context.WithValue(ctx, oauth2.HTTPClient, a.client), &oauth2.Token{RefreshToken: rec.RefreshToken}).Token()
	if err != nil {
		return nil, fmt.Errorf("server %q: refreshing the token: %w", a.name, err)
	}
	return renewed(a, rec, tok)
}

// renewed is rec with the access token of tok, kept; a.flow held.
func renewed(a *authenticator, rec *tokenstore.Record, tok *oauth2.Token) (*tokenstore.Record, error) {
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
