package pool

// Where the OAuth client may fetch metadata from. A 401's WWW-Authenticate
// names its protected-resource metadata (RFC 9728 §5.1) with a URL the
// server chose, and that metadata names the authorization servers whose
// metadata is fetched next: `switchboard login` fetched both on any host
// and port, over plain HTTP too (issue 27). A hostile or compromised server
// could so make a person's machine send requests to any address it can
// reach (a service on loopback, a cloud metadata endpoint) and read
// whatever of the answer the flow reports.
//
// So the OAuth client's transport allows:
//
//   - protected-resource metadata (/.well-known/oauth-protected-resource…)
//     only from the MCP server's own origin: RFC 9728 §3 places it under the
//     resource's own host, and a challenge that points elsewhere is not
//     followed (go-sdk then tries the well-known URLs at the server's
//     origin, as the spec orders);
//   - authorization-server metadata (/.well-known/oauth-authorization-server…,
//     /.well-known/openid-configuration…) only from the MCP server's origin
//     (the 2025-03-26 layout, where the server is its own authorization
//     server) or from an authorization server that metadata, read from the
//     server's origin, names;
//   - either over HTTPS, or HTTP to a loopback host (RFC 8414 §3 and RFC
//     9728 §3 require TLS; loopback is a developer's own machine).
//
// A refused fetch is a *MetadataFetchError (ErrMetadataRefused) before
// anything is sent. Token, registration and revocation requests go to the
// endpoints the authorization server's metadata names, as OAuth has them;
// what they carry across a redirect is checkCredentialRedirect's concern.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
)

// ErrMetadataRefused is wrapped (in a *MetadataFetchError) by the error of
// an OAuth metadata fetch the pool refused to make.
var ErrMetadataRefused = errors.New("OAuth metadata fetch refused")

// A MetadataFetchError is an OAuth metadata URL the pool did not fetch, and
// why. It wraps ErrMetadataRefused.
type MetadataFetchError struct {
	Server string // the mcp.json name of the server being signed in to
	URL    string // the metadata URL, without its query
	Reason string
}

func (e *MetadataFetchError) Error() string {
	return fmt.Sprintf("server %q: not fetching OAuth metadata from %s: %s", e.Server, e.URL, e.Reason)
}

func (e *MetadataFetchError) Unwrap() error { return ErrMetadataRefused }

type metadataKind int

const (
	notMetadata metadataKind = iota
	resourceMetadata
	authServerMetadata
	// otherGet is a GET at no well-known path: a server's 401 may name its
	// protected-resource metadata at any URL (RFC 9728 §5.1), and the
	// flow's other GETs (a jwks_uri) are at URLs metadata named. The origin
	// rule of authorization-server metadata holds for it, and one from the
	// server's own origin is read for the authorization servers it names.
	otherGet
)

func metadataKindOf(u *url.URL) metadataKind {
	switch p := u.Path; {
	case strings.HasPrefix(p, "/.well-known/oauth-protected-resource"):
		return resourceMetadata
	case strings.HasPrefix(p, "/.well-known/oauth-authorization-server"), strings.HasPrefix(p, "/.well-known/openid-configuration"):
		return authServerMetadata
	}
	return notMetadata
}

// metadataGuard is the OAuth client's RoundTripper that applies the rules
// above.
type metadataGuard struct {
	base   http.RoundTripper
	server string // the server's mcp.json name, for errors
	home   origin // the MCP server's origin

	mu    sync.Mutex      // protects named
	named map[origin]bool // authorization servers named by metadata read from home
}

func newMetadataGuard(base http.RoundTripper, srv *Server) *metadataGuard {
	g := &metadataGuard{base: base, server: srv.Name, home: originOfURL(srv.URL), named: map[origin]bool{}}
	if srv.OAuth != nil && srv.OAuth.Enterprise != nil && srv.OAuth.Enterprise.IdPIssuer != "" {
		// The identity provider is configured, not named by the server.
		g.named[originOfURL(srv.OAuth.Enterprise.IdPIssuer)] = true
	}
	return g
}

func (g *metadataGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	kind := metadataKindOf(req.URL)
	if kind == notMetadata && req.Method == http.MethodGet {
		kind = otherGet
	}
	if kind == notMetadata {
		return g.base.RoundTrip(req)
	}
	if err := g.allowed(req.URL, kind); err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	resp, err := g.base.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusOK && (kind == resourceMetadata || kind == otherGet && originOf(req.URL) == g.home) {
		g.learn(resp)
	}
	return resp, err
}

// allowed says why u may not be fetched, or nil.
func (g *metadataGuard) allowed(u *url.URL, kind metadataKind) error {
	refuse := func(reason string) error {
		shown := *u
		shown.RawQuery, shown.Fragment, shown.User = "", "", nil
		return &MetadataFetchError{Server: g.server, URL: shown.String(), Reason: reason}
	}
	o := originOf(u)
	switch {
	case !httpsOrLoopback(u):
		return refuse("metadata is fetched over HTTPS only (plain HTTP to a loopback host excepted)")
	case o == g.home:
		return nil
	case kind == resourceMetadata:
		return refuse(fmt.Sprintf("protected-resource metadata is read only from the server's own origin, %s", g.home))
	}
	g.mu.Lock()
	named := g.named[o]
	g.mu.Unlock()
	if !named {
		return refuse(fmt.Sprintf("no protected-resource metadata of the server (%s) names this authorization server", g.home))
	}
	return nil
}

// learn reads the authorization servers a protected-resource metadata
// document from home names, and gives resp its body back.
func (g *metadataGuard) learn(resp *http.Response) {
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxMetadataBytes))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(data))
	if err != nil {
		return
	}
	var prm struct {
		AuthorizationServers []string `json:"authorization_servers"`
	}
	if json.Unmarshal(data, &prm) != nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range prm.AuthorizationServers {
		if o := originOfURL(s); o != (origin{}) {
			g.named[o] = true
		}
	}
}
