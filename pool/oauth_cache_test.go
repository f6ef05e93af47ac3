package pool

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/switchboard-run/switchboard/internal/oauthtest"
	"github.com/switchboard-run/switchboard/internal/waittest"
)

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

func initialize(ctx context.Context, t *testing.T, c *http.Client, url string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(initializeBody))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	return c.Do(req)
}

// TestOAuthWaiterGivesUpDuringSignIn: while one request of a key waits for
// a person's sign-in, another request of the key refused for want of a
// token waits for that sign-in; when its context ends it returns its
// context's error at once, before the sign-in is over, and the sign-in goes
// on and gives the first request its token.
func TestOAuthWaiterGivesUpDuringSignIn(t *testing.T) {
	as := oauthtest.New(t, time.Hour)
	signing, release := make(chan struct{}), make(chan struct{})
	interactive := &Interactive{
		RedirectURL: "http://127.0.0.1:1/callback",
		Fetch: func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
			close(signing)
			select {
			case <-release: // the person is done
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			code, state, _, err := oauthtest.FollowAuthorize(ctx, args.URL, "alice")
			if err != nil {
				return nil, err
			}
			return &auth.AuthorizationResult{Code: code, State: state}, nil
		},
	}
	waiting := make(chan struct{}, 1)
	old := testHookFlowWait
	testHookFlowWait = func() { waiting <- struct{}{} }
	defer func() { testHookFlowWait = old }()

	var c oauthClients
	srv := &Server{Name: "remote", URL: as.URL}
	client := &http.Client{Transport: c.transport(http.DefaultTransport, srv, &OAuthOptions{TokenDir: t.TempDir(), Interactive: interactive}, nil)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	first := make(chan error, 1)
	go func() {
		resp, err := initialize(ctx, t, client, as.URL)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("status %s after the sign-in", resp.Status)
			}
		}
		first <- err
	}()
	<-signing

	wctx, wcancel := context.WithCancel(ctx)
	second := make(chan error, 1)
	go func() {
		resp, err := initialize(wctx, t, client, as.URL)
		if err == nil {
			resp.Body.Close()
		}
		second <- err
	}()
	<-waiting // the second request waits for the first's sign-in
	wcancel()
	err := <-second // before release: the sign-in is still running
	if !errors.Is(err, context.Canceled) || !errors.Is(err, errGaveUpWaiting) {
		t.Fatalf("the waiter whose context ended: err = %v; want context.Canceled, having given up waiting", err)
	}

	close(release)
	if err := <-first; err != nil {
		t.Fatalf("the request that signed in: %v", err)
	}
	if n := as.Snapshot().Authorizations; n != 1 {
		t.Fatalf("%d sign-ins; want the one that went on", n)
	}
}

// TestOAuthAuthenticatorsLiveWithTheirSessions: the cache keeps an
// authenticator only while something uses it. After many identities each
// used once, only the one still held remains, and it is the one the key's
// next session gets.
func TestOAuthAuthenticatorsLiveWithTheirSessions(t *testing.T) {
	var c oauthClients
	opts := &OAuthOptions{TokenDir: t.TempDir()}
	live := &Server{Name: "s", URL: "https://mcp.example/mcp", Identity: "kept"}
	held := c.transport(http.DefaultTransport, live, opts, nil).(*oauthTransport)
	const identities = 2000
	for i := range identities {
		c.transport(http.DefaultTransport, &Server{Name: "s", URL: live.URL, Identity: fmt.Sprint("id-", i)}, opts, nil)
	}
	waittest.Until(t, 30*time.Second, "the cache to forget the authenticators nothing uses", func() bool {
		runtime.GC() // collection, then the cleanups, run in the runtime's time
		return c.len() == 1
	})
	if again := c.transport(http.DefaultTransport, live, opts, nil).(*oauthTransport); again.a != held.a {
		t.Fatal("the key still in use got a second authenticator; its sessions would not share one token")
	}
	runtime.KeepAlive(held)
}
