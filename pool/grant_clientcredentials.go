package pool

// The client credentials grant (RFC 6749 §4.4) for headless agents: the
// client's own credentials (a secret, or a signed assertion, oauth_jwt.go)
// buy the token, so renewing one that has no refresh token is the same
// grant again at the token endpoint it came from.

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/switchboard-run/switchboard/internal/tokenstore"
)

// obtainClientCredentials runs the grant after discovery; a.flow held.
func obtainClientCredentials(ctx context.Context, a *authenticator, _ *http.Request, r *refusal, held *tokenstore.Record) (*tokenstore.Record, error) {
	if a.cfg.ClientID == "" || a.cfg.ClientSecret == "" && a.cfg.PrivateKeyPEM == "" {
		return nil, fmt.Errorf("server %q: the client credentials grant needs a client id and a secret or private key", a.name)
	}
	prm, asm, err := a.discover(ctx, a.key.URL, r.challenges)
	if err != nil {
		return nil, err
	}
	scopes := a.scopesFor(r.challenges, prm, held)
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

// renewClientCredentials runs the grant again where rec came from, without
// discovery; a.flow held.
func renewClientCredentials(ctx context.Context, a *authenticator, rec *tokenstore.Record) (*tokenstore.Record, error) {
	if rec.TokenURL == "" {
		return nil, errNoRefresh
	}
	cc, err := a.ccConfig(rec.TokenURL, rec.Issuer, rec.Scopes, oauth2.AuthStyle(rec.AuthStyle), url.Values{"resource": {rec.URL}})
	if err != nil {
		return nil, fmt.Errorf("server %q: refreshing the token: %w", a.name, err)
	}
	tok, err := cc.Token(context.WithValue(ctx, oauth2.HTTPClient, a.client))
	if err != nil {
		return nil, fmt.Errorf("server %q: refreshing the token: %w", a.name, err)
	}
	return renewed(a, rec, tok)
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
