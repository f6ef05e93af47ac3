package pool

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/mcptest"
	"github.com/switchboard-run/switchboard/internal/tokenstore"
)

// elsewhere is the other origin of a redirect: a real go-sdk MCP server on
// another loopback port (so that, were the redirect followed, the call
// would work there), recording what credentials every request brought.
type elsewhere struct {
	*httptest.Server
	mu   sync.Mutex
	seen []http.Header
}

func newElsewhere(t *testing.T) *elsewhere {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "elsewhere", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo"}, func(ctx context.Context, req *mcp.CallToolRequest, in mcptest.ToolIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	el := &elsewhere{}
	el.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		el.mu.Lock()
		el.seen = append(el.seen, r.Header.Clone())
		el.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(el.Close)
	return el
}

func (el *elsewhere) requests() []http.Header {
	el.mu.Lock()
	defer el.mu.Unlock()
	return append([]http.Header(nil), el.seen...)
}

// redirectTo answers r with status and a Location on target's origin, at
// r's own path.
func redirectTo(w http.ResponseWriter, r *http.Request, target string, status int) {
	u, _ := url.Parse(target)
	u.Path = r.URL.Path
	http.Redirect(w, r, u.String(), status)
}

var secretHeaders = map[string]string{
	"Authorization": "Bearer configured-secret",
	"X-Api-Key":     "api-key-secret",
	"X-Tenant":      "tenant-secret",
}

// checkRefusedRedirect checks that err is the refusal of a redirect from
// home to other's origin, typed, naming both origins.
func checkRefusedRedirect(t *testing.T, err error, status int, home string, other *elsewhere) {
	t.Helper()
	pe := asPoolError(t, err)
	if pe.Kind != KindRefused || !errors.Is(err, ErrRefused) || pe.Retried {
		t.Fatalf("want kind refused, not retried; got %v (%+v)", err, pe)
	}
	var re *RedirectError
	if !errors.As(err, &re) || !errors.Is(err, ErrCrossOriginRedirect) {
		t.Fatalf("error %v is not a *RedirectError", err)
	}
	want := RedirectError{Status: status, From: originOfURL(home).String(), To: originOfURL(other.URL).String()}
	if *re != want {
		t.Fatalf("redirect error %+v, want %+v", *re, want)
	}
	if re.From == re.To {
		t.Fatalf("the two origins are one: %+v", *re)
	}
}

// A server that redirects a call (307, 308: re-send the POST) or the
// handshake to another port never gets the configured headers there: the
// redirect is refused with an error naming both origins, the other origin
// sees no request at all, and the session stays usable.
func TestRedirectToAnotherOriginKeepsCredentialsHome(t *testing.T) {
	for _, status := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect, http.StatusFound} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			other := newElsewhere(t)
			ts := newTestServer(t, false)
			ts.SetIntercept(func(w http.ResponseWriter, r *http.Request, rpc mcptest.RPCInfo) bool {
				if rpc.CallID == "moved" {
					redirectTo(w, r, other.URL, status)
					return true
				}
				return false
			})
			p := newTestPool(t, nil)
			srv := server(ts, "a")
			srv.Headers = secretHeaders
			mustCall(t, p, srv, "echo", "before")

			_, err := call(context.Background(), p, srv, "echo", "moved")
			checkRefusedRedirect(t, err, status, ts.URL(), other)
			if got := other.requests(); len(got) != 0 {
				t.Fatalf("the other origin got %d requests, the first with headers %v", len(got), got[0])
			}
			if n := ts.Executions("moved"); n != 0 {
				t.Fatalf("the redirected call ran %d times", n)
			}
			mustCall(t, p, srv, "echo", "after")
			if st := p.Stats(); st.Dials != 1 || st.Retries != 0 || st.Invalidations != 0 {
				t.Fatalf("a refused redirect cost the session or was resent: %+v", st)
			}
		})
	}
}

// The handshake itself redirected: the dial fails as refused (a keyed
// resend would only be redirected again), and nothing reaches the other
// origin, the OAuth token included.
func TestRedirectedHandshakeSendsNoTokenElsewhere(t *testing.T) {
	other := newElsewhere(t)
	var home *httptest.Server
	var homeSaw []string
	var mu sync.Mutex
	home = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		homeSaw = append(homeSaw, r.Header.Get("Authorization"))
		mu.Unlock()
		redirectTo(w, r, other.URL, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(home.Close)

	// A stored OAuth token for the server, as `switchboard login` leaves
	// it: the pool sends it without asking anyone.
	dir := t.TempDir()
	store := &tokenstore.Store{Dir: dir}
	srv := &Server{Name: "a", URL: home.URL + "/mcp", ProtocolVersion: Protocol20251125, Headers: map[string]string{"X-Api-Key": "api-key-secret"}}
	if err := store.Save(&tokenstore.Record{URL: srv.URL, AccessToken: "oauth-token-secret", TokenType: "Bearer", Expiry: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	p := newTestPool(t, &Options{OAuth: &OAuthOptions{TokenDir: dir}})

	_, err := call(context.Background(), p, srv, "echo", "x")
	checkRefusedRedirect(t, err, http.StatusTemporaryRedirect, srv.URL, other)
	if got := other.requests(); len(got) != 0 {
		t.Fatalf("the other origin got %d requests, the first with headers %v", len(got), got[0])
	}
	mu.Lock()
	defer mu.Unlock()
	if len(homeSaw) != 1 || homeSaw[0] != "Bearer oauth-token-secret" {
		t.Fatalf("the server's own origin got Authorization %q, want the stored token once", homeSaw)
	}
}

// A redirect within the origin (a moved endpoint, another port being
// another origin) is followed, with the configured headers, and its
// answer is the request's evidence.
func TestRedirectWithinOriginIsFollowed(t *testing.T) {
	ts := newTestServer(t, false)
	var mu sync.Mutex
	var keys []string
	ts.SetIntercept(func(w http.ResponseWriter, r *http.Request, rpc mcptest.RPCInfo) bool {
		if r.URL.Path == "/old" {
			http.Redirect(w, r, "/mcp", http.StatusPermanentRedirect)
			return true
		}
		mu.Lock()
		keys = append(keys, r.Header.Get("X-Api-Key"))
		mu.Unlock()
		return false
	})
	p := newTestPool(t, nil)
	u, _ := url.Parse(ts.URL())
	u.Path = "/old"
	srv := &Server{Name: "a", URL: u.String(), ProtocolVersion: Protocol20251125, Headers: secretHeaders}
	mustCall(t, p, srv, "echo", "one")
	mustCall(t, p, srv, "echo", "two")
	if ts.Executions("one") != 1 || ts.Executions("two") != 1 {
		t.Fatalf("executions %d, %d; want 1 each", ts.Executions("one"), ts.Executions("two"))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(keys) == 0 {
		t.Fatal("the redirect was not followed")
	}
	for i, k := range keys {
		if k != "api-key-secret" {
			t.Fatalf("request %d at the new path came without the configured header (got %q)", i, k)
		}
	}
}

// The origin of a URL: scheme, host and port, case and default port
// normalised; anything that is not a URL with a host is no origin.
func TestOrigin(t *testing.T) {
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{"http://127.0.0.1:8080/mcp", "http://127.0.0.1:8080/other?x=1", true},
		{"http://Example.COM/mcp", "http://example.com:80/", true},
		{"https://example.com/mcp", "https://example.com:443/mcp", true},
		{"http://127.0.0.1:8080/mcp", "http://127.0.0.1:8081/mcp", false},
		{"http://127.0.0.1:8080/mcp", "http://localhost:8080/mcp", false},
		{"http://example.com/mcp", "https://example.com/mcp", false},
		{"http://[::1]:9/mcp", "http://[::1]:9/x", true},
		{"not a url", "not a url", false},
		{"/relative", "/relative", false},
	} {
		u, err := url.Parse(c.b)
		if err != nil {
			t.Fatal(err)
		}
		if got := sameOrigin(u, c.a); got != c.same {
			t.Errorf("sameOrigin(%q, %q) = %v, want %v", c.b, c.a, got, c.same)
		}
	}
	if got := originOfURL("http://[::1]:9/mcp").String(); got != "http://[::1]:9" {
		t.Errorf("origin of an IPv6 URL: %q", got)
	}
}

// An authorization server whose token endpoint answers 307 to another
// origin does not get the client's secret sent there: net/http would
// re-send the token request's body (client_secret_post) to the other
// origin, and keep client_secret_basic's Authorization on another port of
// the same host. The grant fails instead, and the other origin sees
// nothing.
func TestTokenRequestRedirectKeepsSecretHome(t *testing.T) {
	for _, method := range []AuthMethod{AuthMethodPost, AuthMethodBasic} {
		t.Run(string(method), func(t *testing.T) {
			other := newElsewhere(t)
			asMux := http.NewServeMux()
			as := httptest.NewServer(asMux)
			t.Cleanup(as.Close)
			asMux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(w, `{"issuer":%q,"authorization_endpoint":%q,"token_endpoint":%q,"response_types_supported":["code"],"code_challenge_methods_supported":["S256"],"token_endpoint_auth_methods_supported":[%q]}`,
					as.URL, as.URL+"/authorize", as.URL+"/token", method)
			})
			var tokenRequests atomic.Int32
			asMux.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) {
				tokenRequests.Add(1)
				redirectTo(w, r, other.URL, http.StatusTemporaryRedirect)
			})
			mcpMux := http.NewServeMux()
			rs := httptest.NewServer(mcpMux)
			t.Cleanup(rs.Close)
			prm := rs.URL + "/.well-known/oauth-protected-resource/mcp"
			mcpMux.HandleFunc("/.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(w, `{"resource":%q,"authorization_servers":[%q]}`, rs.URL+"/mcp", as.URL)
			})
			mcpMux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer resource_metadata=%q`, prm))
				http.Error(w, "token required", http.StatusUnauthorized)
			})

			p := newTestPool(t, &Options{OAuth: &OAuthOptions{TokenDir: t.TempDir()}})
			srv := &Server{Name: "jobs", URL: rs.URL + "/mcp", ProtocolVersion: Protocol20251125, OAuth: &OAuthConfig{
				Grant: GrantClientCredentials, ClientID: "agent-1", ClientSecret: "client-secret", TokenEndpointAuthMethod: method}}
			if _, err := call(context.Background(), p, srv, "echo", "x"); err == nil {
				t.Fatal("the call succeeded without a token")
			}
			if tokenRequests.Load() == 0 {
				t.Fatal("no token request was made: the test tests nothing")
			}
			if got := other.requests(); len(got) != 0 {
				t.Fatalf("the other origin got %d requests, the first with headers %v", len(got), got[0])
			}
		})
	}
}

// The OAuth client's redirect rule: another origin only for what carries
// no credential.
func TestCheckCredentialRedirect(t *testing.T) {
	first, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:1/token", strings.NewReader("client_secret=s"))
	get := func(u string, h http.Header) *http.Request {
		r, _ := http.NewRequest(http.MethodGet, u, nil)
		if h != nil {
			r.Header = h
		}
		return r
	}
	post, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:2/token", strings.NewReader("client_secret=s"))
	for _, c := range []struct {
		what    string
		req     *http.Request
		refused bool
	}{
		{"a body to another port", post, true},
		{"Authorization to another port", get("http://127.0.0.1:2/x", http.Header{"Authorization": {"Basic x"}}), true},
		{"a bare GET to another origin", get("http://127.0.0.1:2/.well-known/x", nil), false},
		{"a body within the origin", func() *http.Request {
			r := post.Clone(context.Background())
			r.URL, _ = url.Parse("http://127.0.0.1:1/token2")
			return r
		}(), false},
	} {
		err := checkCredentialRedirect(c.req, []*http.Request{first})
		if refused := errors.Is(err, ErrCrossOriginRedirect); refused != c.refused {
			t.Errorf("%s: %v, want refused %v", c.what, err, c.refused)
		}
	}
}
