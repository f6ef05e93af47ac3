package pool

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// TestMetadataFetchesStayWithTheServer: the OAuth client reads
// protected-resource metadata only from the MCP server's origin, and
// authorization-server metadata only from an authorization server that
// metadata names, over HTTPS or loopback HTTP. Issue 27: `switchboard
// login` fetched a 401's resource_metadata URL on any host and port, then
// the authorization-server metadata it named. Real servers on loopback; a
// refused fetch reaches no server.
func TestMetadataFetchesStayWithTheServer(t *testing.T) {
	var hits atomic.Int64 // requests the servers the client must not reach saw
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"resource":"x","authorization_servers":["http://127.0.0.1:1"]}`))
	}))
	defer elsewhere.Close()
	as := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"issuer":"` + "http://" + r.Host + `","authorization_endpoint":"http://` + r.Host + `/authorize","token_endpoint":"http://` + r.Host + `/token","code_challenge_methods_supported":["S256"]}`))
	}))
	defer as.Close()
	mux := http.NewServeMux()
	home := httptest.NewServer(mux)
	defer home.Close()
	mux.Handle("/.well-known/oauth-protected-resource/mcp", auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource: home.URL + "/mcp", AuthorizationServers: []string{as.URL}}))

	a := newAuthenticator(http.DefaultTransport, &Server{Name: "remote", URL: home.URL + "/mcp"}, &OAuthOptions{TokenDir: t.TempDir()}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	refused := func(what string, err error, reason string) {
		t.Helper()
		var me *MetadataFetchError
		if !errors.Is(err, ErrMetadataRefused) || !errors.As(err, &me) || me.Server != "remote" || !strings.Contains(me.Reason, reason) {
			t.Errorf("%s: %v, want a *MetadataFetchError for server remote saying %q", what, err, reason)
		}
	}
	get := func(u string) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		resp, err := a.client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	// go-sdk's discovery does not keep its errors' chains, so the refusals
	// are shown through the OAuth client itself, which go-sdk is handed.
	// A challenge's resource_metadata on another port of the same host.
	refused("protected-resource metadata on another origin",
		get(elsewhere.URL+"/.well-known/oauth-protected-resource"), "only from the server's own origin")
	// Authorization-server metadata nobody named.
	refused("authorization-server metadata of an unnamed server",
		get(elsewhere.URL+"/.well-known/oauth-authorization-server"), "names this authorization server")
	refused("OpenID configuration of an unnamed server",
		get(elsewhere.URL+"/.well-known/openid-configuration"), "names this authorization server")
	// Over plain HTTP to a host that is not loopback: refused before any
	// name is resolved.
	refused("plain HTTP to another host", get("http://metadata.invalid/.well-known/oauth-authorization-server"), "HTTPS only")
	// go-sdk's discovery, fed a challenge pointing elsewhere, finds nothing
	// there (and goes on to the well-known URLs of the server's origin).
	if _, err := oauthex.GetProtectedResourceMetadata(ctx, elsewhere.URL+"/.well-known/oauth-protected-resource", home.URL+"/mcp", a.client); err == nil {
		t.Error("go-sdk read protected-resource metadata from another origin")
	}

	prm, err := oauthex.GetProtectedResourceMetadata(ctx, home.URL+"/.well-known/oauth-protected-resource/mcp", home.URL+"/mcp", a.client)
	if err != nil || len(prm.AuthorizationServers) != 1 {
		t.Fatalf("the server's own metadata: %v %v", prm, err)
	}
	if asm, err := auth.GetAuthServerMetadata(ctx, as.URL, a.client); err != nil || asm == nil || asm.TokenEndpoint != as.URL+"/token" {
		t.Fatalf("the named authorization server's metadata: %+v %v", asm, err)
	}
	refused("an unnamed server after a named one",
		get(elsewhere.URL+"/.well-known/oauth-authorization-server"), "names this authorization server")
	if n := hits.Load(); n != 0 {
		t.Errorf("the servers nobody named got %d requests", n)
	}
}

// TestMetadataAtACustomPath: a 401 may name the server's protected-resource
// metadata at any URL (RFC 9728 §5.1; the conformance suite's
// auth/metadata-var3 puts it at /custom/metadata/location.json). One on
// the server's own origin is read, and the authorization server it names
// may then be asked; one at a custom path on another origin is refused
// like any other fetch there.
func TestMetadataAtACustomPath(t *testing.T) {
	var hits atomic.Int64
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Write([]byte(`{"authorization_servers":["http://127.0.0.1:1"]}`))
	}))
	defer elsewhere.Close()
	as := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"issuer":"http://` + r.Host + `/tenant1","authorization_endpoint":"http://` + r.Host + `/tenant1/authorize","token_endpoint":"http://` + r.Host + `/tenant1/token","code_challenge_methods_supported":["S256"]}`))
	}))
	defer as.Close()
	mux := http.NewServeMux()
	home := httptest.NewServer(mux)
	defer home.Close()
	mux.Handle("/custom/metadata/location.json", auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource: home.URL + "/mcp", AuthorizationServers: []string{as.URL + "/tenant1"}}))

	a := newAuthenticator(http.DefaultTransport, &Server{Name: "remote", URL: home.URL + "/mcp"}, &OAuthOptions{TokenDir: t.TempDir()}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := oauthex.GetProtectedResourceMetadata(ctx, elsewhere.URL+"/custom/metadata/location.json", home.URL+"/mcp", a.client); err == nil {
		t.Error("read protected-resource metadata at a custom path on another origin")
	}
	if hits.Load() != 0 {
		t.Errorf("the other origin got %d requests", hits.Load())
	}
	prm, err := oauthex.GetProtectedResourceMetadata(ctx, home.URL+"/custom/metadata/location.json", home.URL+"/mcp", a.client)
	if err != nil || len(prm.AuthorizationServers) != 1 {
		t.Fatalf("the server's own metadata at a custom path: %v %v", prm, err)
	}
	asm, err := auth.GetAuthServerMetadata(ctx, as.URL+"/tenant1", a.client)
	if err != nil || asm == nil || asm.TokenEndpoint != as.URL+"/tenant1/token" {
		t.Fatalf("the authorization server it names: %+v %v", asm, err)
	}
}
