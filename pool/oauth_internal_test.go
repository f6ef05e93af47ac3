package pool

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/switchboard-run/switchboard/internal/tokenstore"
)

// TestOAuthTokenStaysWithItsServer: when the server redirects, the token is
// not sent to the redirect's other host.
func TestOAuthTokenStaysWithItsServer(t *testing.T) {
	var elsewhere string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere = r.Header.Get("Authorization")
	}))
	defer other.Close()
	var home string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		home = r.Header.Get("Authorization")
		http.Redirect(w, r, other.URL+"/mcp", http.StatusTemporaryRedirect)
	}))
	defer srv.Close()

	a := newAuthenticator(http.DefaultTransport, &Server{Name: "s", URL: srv.URL + "/mcp"}, &OAuthOptions{TokenDir: t.TempDir()}, nil)
	a.rec, a.loaded = &tokenstore.Record{URL: srv.URL + "/mcp", AccessToken: "AT"}, true
	c := &http.Client{Transport: &oauthTransport{base: http.DefaultTransport, a: a}}
	resp, err := c.Post(srv.URL+"/mcp", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if home != "Bearer AT" || elsewhere != "" {
		t.Fatalf("Authorization at the server %q, at the redirect's host %q; want the token at its server only", home, elsewhere)
	}
}
