package pool

// Credentials stay on their origin. A Server's Headers (Authorization,
// X-Api-Key, whatever its mcp.json names) and its OAuth token are for the
// origin of its URL (scheme, host and port, RFC 6454) and for no other.
// net/http's Client follows redirects itself, through the entry's
// RoundTripper, and re-sends a 307 or 308's POST body; the recorder adds the
// configured headers to every request it carries, so following a redirect
// to another origin would hand them to whoever the server names (an open
// redirect, a compromised server). net/http's own rule for sensitive
// headers compares host names only, so it would also let them through to
// another port of the same host.
//
// The choice: a redirect to another origin is refused, not followed without
// credentials. A pool server has no business moving a session across
// origins: without its credentials the other origin would refuse the
// request anyway (or, worse, accept it as somebody else's), and with its
// session id (go-sdk's Mcp-Session-Id, which net/http copies onto the
// redirected request) it would learn the session. The request fails with a
// *RedirectError naming both origins, so a person can fix the URL in the
// configuration. Redirects within the origin are followed as net/http
// does, with the configured headers.
//
// Two checks, so that neither alone is load-bearing: the http.Client's
// CheckRedirect refuses the redirect before anything is sent to the other
// origin, and the recorder adds configured headers only to requests for the
// configured origin (and the OAuth transport its token likewise). The
// OAuth client's own requests to authorization servers follow the same
// rule for what they carry (checkCredentialRedirect).

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// ErrCrossOriginRedirect is wrapped (in a *RedirectError) by the error of a
// request that the server redirected to another origin: the pool did not
// follow it (see RedirectError).
var ErrCrossOriginRedirect = errors.New("redirect to another origin refused")

// A RedirectError is a redirect to another origin that the pool refused to
// follow, so that the server's configured headers and tokens, sent only to
// the origin of its URL, went nowhere else. It wraps
// ErrCrossOriginRedirect. The pool reports it as KindRefused: nothing ran,
// and it is not sent again (for a 303, which answers a request that ran,
// as KindOutcomeUnknown).
type RedirectError struct {
	Status int    // the redirect's HTTP status: 301, 302, 303, 307 or 308
	From   string // the origin of the configured URL, scheme://host:port
	To     string // the origin the server redirected to; never its path or query
}

func (e *RedirectError) Error() string {
	return fmt.Sprintf("refusing to follow a %d redirect from %s to another origin, %s: the server's configured headers and tokens are sent only to its own origin (fix the url in its configuration)", e.Status, e.From, e.To)
}

func (e *RedirectError) Unwrap() error { return ErrCrossOriginRedirect }

// An origin is a URL's scheme, host and port (RFC 6454 §4), lowercased,
// with the scheme's default port filled in, so that http://Host/ and
// http://host:80/ are one origin. The zero origin is no URL's: an
// unparsable URL's origin matches nothing.
type origin struct {
	scheme, host, port string
}

func originOf(u *url.URL) origin {
	if u == nil || u.Scheme == "" || u.Host == "" {
		return origin{}
	}
	o := origin{scheme: strings.ToLower(u.Scheme), host: strings.ToLower(u.Hostname()), port: u.Port()}
	if o.port == "" {
		switch o.scheme {
		case "http":
			o.port = "80"
		case "https":
			o.port = "443"
		}
	}
	return o
}

// originOfURL is originOf of a URL given as text; the zero origin when it
// does not parse.
func originOfURL(s string) origin {
	u, err := url.Parse(s)
	if err != nil {
		return origin{}
	}
	return originOf(u)
}

func (o origin) String() string {
	if o == (origin{}) {
		return "(no origin)"
	}
	host := o.host
	if strings.Contains(host, ":") {
		host = "[" + host + "]" // IPv6
	}
	return o.scheme + "://" + host + ":" + o.port
}

// sameOrigin reports whether u is on the origin of the URL home. An
// unparsable home matches nothing.
func sameOrigin(u *url.URL, home string) bool {
	h := originOfURL(home)
	return h != (origin{}) && originOf(u) == h
}

// maxRedirects is net/http's own bound on the redirects of one request,
// kept for the redirects within the origin that the pool follows.
const maxRedirects = 10

// checkRedirect is the http.Client CheckRedirect of an entry whose server's
// URL is on home: redirects within home are followed (at most
// maxRedirects), any other is refused with a *RedirectError before a byte
// is sent there.
func checkRedirect(home origin) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if to := originOf(req.URL); home == (origin{}) || to != home {
			status := 0
			if req.Response != nil {
				status = req.Response.StatusCode
			}
			return &RedirectError{Status: status, From: home.String(), To: to.String()}
		}
		if len(via) >= maxRedirects {
			return fmt.Errorf("stopped after %d redirects", maxRedirects)
		}
		return nil
	}
}

// checkCredentialRedirect is the CheckRedirect of the pool's OAuth client,
// which talks to authorization servers (metadata, tokens, registration).
// A token request carries credentials in its body (a client secret, a
// refresh token, a code and its verifier) or in Authorization
// (client_secret_basic); net/http re-sends the body on a 307 or 308, and
// keeps Authorization on a redirect to another port of the same host. So a
// redirect to another origin than the request's first is refused when it
// would carry either; a metadata GET, which carries neither, is followed as
// net/http does.
func checkCredentialRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	from, to := originOf(via[0].URL), originOf(req.URL)
	hasBody := req.GetBody != nil || req.Body != nil && req.Body != http.NoBody
	if to != from && (hasBody || req.Header.Get("Authorization") != "") {
		status := 0
		if req.Response != nil {
			status = req.Response.StatusCode
		}
		return &RedirectError{Status: status, From: from.String(), To: to.String()}
	}
	return nil
}
