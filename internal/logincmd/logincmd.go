// Package logincmd is `switchboard login SERVER` and `switchboard logout
// SERVER`: a person signs the pool in to an OAuth-protected MCP server
// named in an mcp.json, once, and every agent's pool then finds the token
// in the token store (internal/tokenstore) and refreshes it by itself.
//
// login runs the pool's own flow (pool/oauth.go) with a person to ask: it
// listens on a loopback port (RFC 8252 §7.3), prints the authorization URL,
// waits for the browser to come back with the code, and lists the server's
// tools with the new token to prove it works. It never prints a token.
package logincmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/switchboard-run/switchboard/internal/cli"
	"github.com/switchboard-run/switchboard/internal/tokenstore"
	"github.com/switchboard-run/switchboard/pool"
	"github.com/switchboard-run/switchboard/pool/mcpconfig"
)

type flags struct {
	config, identity, tokenDir string
	timeout                    time.Duration
	force                      bool
}

func parse(name string, args []string, stdout, stderr io.Writer, login bool) (*flags, string, int) {
	fs := flag.NewFlagSet("switchboard "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := &flags{}
	fs.StringVar(&f.config, "config", "tools/mcp.json", "mcp.json naming the server")
	fs.StringVar(&f.identity, "identity", "", "the pool identity the token is for (default: the agents' own)")
	fs.StringVar(&f.tokenDir, "token-dir", "", "where tokens are kept (default $SWITCHBOARD_TOKEN_DIR, else switchboard/tokens in the user's config directory)")
	if login {
		fs.DurationVar(&f.timeout, "timeout", 5*time.Minute, "how long to wait for the browser to come back")
		fs.BoolVar(&f.force, "force", false, "sign in again even when a stored token still works")
	}
	fs.Usage = func() {
		if login {
			fmt.Fprint(fs.Output(), "usage: switchboard login [--config tools/mcp.json] [--force] SERVER\n\nSigns in to an OAuth-protected MCP server: prints a URL to open in a browser\nand waits on a loopback port for the browser to come back. The token is kept,\nmode 0600, in the token directory; agents' pools use and refresh it.\n\nflags:\n")
		} else {
			fmt.Fprint(fs.Output(), "usage: switchboard logout [--config tools/mcp.json] SERVER\n\nRevokes the stored token at the authorization server (RFC 7009) when it\noffers revocation, and deletes it.\n\nflags:\n")
		}
		fs.PrintDefaults()
	}
	if cli.HelpRequested(args) {
		fs.SetOutput(stdout)
		fs.Usage()
		return nil, "", 0
	}
	if err := fs.Parse(args); err != nil {
		return nil, "", 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(stderr, "switchboard %s: want one SERVER, got %d arguments\n", name, fs.NArg())
		return nil, "", 2
	}
	if f.tokenDir == "" {
		d, err := tokenstore.DefaultDir()
		if err != nil {
			fmt.Fprintf(stderr, "switchboard %s: %v; pass --token-dir\n", name, err)
			return nil, "", 1
		}
		f.tokenDir = d
	}
	return f, fs.Arg(0), -1
}

// server finds name in the config, as an HTTP server.
func (f *flags) server(cmd, name string, stderr io.Writer) (*pool.Server, bool) {
	cfg, err := mcpconfig.Load(f.config)
	if err != nil {
		fmt.Fprintf(stderr, "switchboard %s: %v\n", cmd, err)
		return nil, false
	}
	s, ok := cfg.Server(name)
	if !ok {
		var names []string
		for _, s := range cfg.Servers {
			names = append(names, s.Name)
		}
		fmt.Fprintf(stderr, "switchboard %s: %s names no server %q; it has %s\n", cmd, f.config, name, strings.Join(names, ", "))
		return nil, false
	}
	if s.Type != mcpconfig.TypeHTTP {
		fmt.Fprintf(stderr, "switchboard %s: server %q is a stdio server; only HTTP servers sign in\n", cmd, name)
		return nil, false
	}
	srv := s.Pool()
	srv.Identity = f.identity
	return srv, true
}

// Login is `switchboard login`.
func Login(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	f, name, code := parse("login", args, stdout, stderr, true)
	if code >= 0 {
		return code
	}
	srv, ok := f.server("login", name, stderr)
	if !ok {
		return 1
	}
	store := &tokenstore.Store{Dir: f.tokenDir}
	key := tokenstore.Key{URL: srv.URL, Identity: srv.Identity}
	if f.force {
		if err := store.Delete(key); err != nil {
			fmt.Fprintf(stderr, "switchboard login: %v\n", err)
			return 1
		}
	}

	port := 0
	if srv.OAuth != nil {
		port = srv.OAuth.CallbackPort
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		fmt.Fprintf(stderr, "switchboard login: listening for the browser's return: %v\n", err)
		return 1
	}
	cb := &callback{ln: ln, stdout: stdout, server: name, results: make(chan callbackResult, 1)}
	hs := &http.Server{Handler: cb, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		hs.Serve(ln) // ends with Close below
	}()
	defer func() {
		hs.Close()
		<-served
	}()

	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	p := pool.New(&pool.Options{DialTimeout: f.timeout, OAuth: &pool.OAuthOptions{TokenDir: f.tokenDir,
		Interactive: &pool.Interactive{RedirectURL: cb.redirectURL(), Fetch: cb.fetch}}})
	defer p.Close()
	tools, err := p.ListTools(ctx, srv)
	if err != nil {
		fmt.Fprintf(stderr, "switchboard login: %s: %v\n", name, err)
		return 1
	}
	rec, err := store.Load(key)
	switch {
	case errors.Is(err, tokenstore.ErrNotFound):
		fmt.Fprintf(stdout, "%s needs no sign-in: it answered without a token (%d tools)\n", name, len(tools))
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "switchboard login: %v\n", err)
		return 1
	}
	verb := "Signed in to"
	if !cb.opened.Load() {
		verb = "Already signed in to"
	}
	fmt.Fprintf(stdout, "%s %s (%d tools); %s\n", verb, name, len(tools), describe(rec))
	return 0
}

// describe is what a person may see of a record: never the token.
func describe(r *tokenstore.Record) string {
	var b strings.Builder
	if len(r.Scopes) > 0 {
		fmt.Fprintf(&b, "scopes %s; ", strings.Join(r.Scopes, " "))
	}
	if r.Expiry.IsZero() {
		b.WriteString("the token does not expire")
	} else {
		fmt.Fprintf(&b, "the token expires at %s", r.Expiry.UTC().Format(time.RFC3339))
		if r.RefreshToken != "" {
			b.WriteString(" and is refreshed by itself")
		}
	}
	return b.String()
}

type callbackResult struct {
	res *auth.AuthorizationResult
	err error
}

// callback is the loopback redirect's receiver.
type callback struct {
	ln      net.Listener
	stdout  io.Writer
	server  string
	results chan callbackResult
	opened  atomic.Bool // a URL was printed
}

func (c *callback) redirectURL() string {
	return "http://" + c.ln.Addr().String() + "/callback"
}

func (c *callback) fetch(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
	c.opened.Store(true)
	fmt.Fprintf(c.stdout, "To sign in to %s, open this URL in a browser:\n\n  %s\n\nWaiting for the browser to come back to %s ...\n", c.server, args.URL, c.redirectURL())
	select {
	case r := <-c.results:
		return r.res, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the browser: %w", ctx.Err())
	}
}

// ErrDenied is wrapped when the authorization server sent the browser back
// with an error (RFC 6749 §4.1.2.1).
var ErrDenied = errors.New("authorization denied")

func (c *callback) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/callback" {
		http.NotFound(w, r)
		return
	}
	q := r.URL.Query()
	var res callbackResult
	if e := q.Get("error"); e != "" {
		res.err = fmt.Errorf("%w: %s %s", ErrDenied, e, q.Get("error_description"))
	} else if q.Get("code") == "" {
		http.Error(w, "no code in the redirect", http.StatusBadRequest)
		return
	} else {
		res.res = &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}
	}
	select {
	case c.results <- res:
	default:
		http.Error(w, "this sign-in has already come back", http.StatusConflict)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	msg := "Signed in to " + c.server + ". You can close this tab."
	if res.err != nil {
		msg = "Sign-in to " + c.server + " failed: " + res.err.Error()
	}
	fmt.Fprintf(w, "<!doctype html><title>switchboard</title><p>%s</p>\n", html.EscapeString(msg))
}

// Logout is `switchboard logout`.
func Logout(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	f, name, code := parse("logout", args, stdout, stderr, false)
	if code >= 0 {
		return code
	}
	srv, ok := f.server("logout", name, stderr)
	if !ok {
		return 1
	}
	store := &tokenstore.Store{Dir: f.tokenDir}
	key := tokenstore.Key{URL: srv.URL, Identity: srv.Identity}
	rec, err := store.Load(key)
	if errors.Is(err, tokenstore.ErrNotFound) {
		fmt.Fprintf(stdout, "Not signed in to %s\n", name)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "switchboard logout: %v\n", err)
		return 1
	}
	revoked := ""
	if rec.RevocationURL != "" {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		// The refresh token first: revoking it may revoke the access tokens
		// issued from it too (RFC 7009 §2.1).
		for _, tok := range []struct{ value, hint string }{{rec.RefreshToken, "refresh_token"}, {rec.AccessToken, "access_token"}} {
			if tok.value == "" {
				continue
			}
			if err := revoke(ctx, rec, tok.value, tok.hint); err != nil {
				fmt.Fprintf(stderr, "switchboard logout: %s: revoking the %s: %v (the local copy is deleted anyway)\n", name, tok.hint, err)
			}
		}
		revoked = " (revoked at the authorization server)"
	}
	if err := store.Delete(key); err != nil {
		fmt.Fprintf(stderr, "switchboard logout: %v\n", err)
		return 1
	}
	if err := store.DeleteRefusal(key); err != nil {
		fmt.Fprintf(stderr, "switchboard logout: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "Signed out of %s%s\n", name, revoked)
	return 0
}

// revoke is one RFC 7009 revocation request.
func revoke(ctx context.Context, rec *tokenstore.Record, token, hint string) error {
	form := url.Values{"token": {token}, "token_type_hint": {hint}}
	if rec.ClientSecret == "" {
		form.Set("client_id", rec.ClientID)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rec.RevocationURL, strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if rec.ClientSecret != "" {
		req.SetBasicAuth(url.QueryEscape(rec.ClientID), url.QueryEscape(rec.ClientSecret))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			return ue.Err // the URL is not secret, but the error says enough without it
		}
		return err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the authorization server answered %s", resp.Status)
	}
	return nil
}
