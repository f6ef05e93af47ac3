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
// internal/tokenstore; one identity's token is never sent for another. A
// stored token that cannot be read is an error (ErrTokenStore) naming the
// file, never taken for "no token". No token is ever logged: records
// redact themselves, and the only things logged here are server names,
// grants and error texts of the pool's own.
//
// The files, one concern each: this one, the configuration; oauth_cache.go,
// the per-key token cache (one authenticator per key while its sessions
// live, its context-aware flow lock, the grant chosen once);
// oauth_transport.go, the RoundTripper and the refusal, parsed once;
// oauth_discovery.go, metadata, scopes, client authentication, records;
// grant_refresh.go, grant_clientcredentials.go, grant_authcode.go,
// grant_legacy.go and grant_enterprise.go, one grant each; oauth_jwt.go,
// private_key_jwt; oauth_fetch.go, where metadata may be fetched from.

import (
	"errors"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/switchboard-run/switchboard/internal/tokenstore"
)

// A Grant names how a Server's OAuth gets its tokens (RFC 6749 §1.3); its
// value is the grant_type the token endpoint is sent.
type Grant string

// Grants a Server's OAuth may use.
const (
	GrantAuthorizationCode Grant = "authorization_code"
	GrantClientCredentials Grant = "client_credentials"
)

// An AuthMethod names how the client authenticates at the token endpoint;
// its value is the token_endpoint_auth_method of RFC 7591 §2.
type AuthMethod string

// Token endpoint client authentication methods (RFC 7591 §2).
const (
	AuthMethodBasic AuthMethod = "client_secret_basic"
	AuthMethodPost  AuthMethod = "client_secret_post"
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

// ErrTokenStore is wrapped by the error of a stored token that exists but
// cannot be read (a file the pool may not open, or one that is not a token
// record): the error names the file. The pool then neither sends a token nor
// runs a new grant, which would overwrite the file, nor asks the person to
// sign in, which would not help: the file is what needs looking at.
var ErrTokenStore = errors.New("the stored token cannot be read")

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
	Grant Grant
	// TokenEndpointAuthMethod is AuthMethodBasic or AuthMethodPost; empty:
	// chosen from the authorization server's metadata, basic when offered
	// (RFC 6749 §2.3.1: servers MUST support it).
	TokenEndpointAuthMethod AuthMethod
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
	// (EnterpriseConfig) instead of Grant: from the person's sign-in at
	// the enterprise's identity provider.
	Enterprise *EnterpriseConfig
}

// OAuthOptions configure the pool's OAuth. The zero value: the tokens in
// the default directory (see TokenDir), nobody to ask.
type OAuthOptions struct {
	// TokenDir holds the token files, one 0600 file per (server URL,
	// identity), as `switchboard login` writes them; empty:
	// $SWITCHBOARD_TOKEN_DIR, else switchboard/tokens under
	// os.UserConfigDir.
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
