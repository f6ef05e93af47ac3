package conformance

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/conformance/fixtures"
	"github.com/switchboard-run/switchboard/internal/proctest"
)

// fixtureAgent is the agent of testdata/project: the conformance toolset
// (internal/conformance/fixtures), the suite's test server as an agent.
const fixtureAgent = "conformance"

// project copies testdata/project into a temporary directory, since
// `switchboard up` writes its state under the project it runs.
func project(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "project"))); err != nil {
		t.Fatalf("copying the test project: %v", err)
	}
	return dir
}

// serveAgent starts a real `switchboard agent serve` of the fixture agent
// (race-enabled under -race) and returns its MCP URL.
func serveAgent(t *testing.T) string {
	t.Helper()
	p := proctest.StartProcess(t, t.TempDir(), nil, 60*time.Second, "switchboard agent ",
		switchboardBin, "agent", "serve", "--agent", filepath.Join(project(t), "agents", fixtureAgent), "--data-dir", t.TempDir())
	_, url, ok := strings.Cut(p.Ready, " listening on ")
	if !ok || !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("ready line %q", p.Ready)
	}
	return url
}

// upStudio starts a real studio (`switchboard up`) on the test project and
// returns the fixture agent's MCP URL through it. The studio is stopped
// with SIGTERM at the end, and must exit 0.
func upStudio(t *testing.T) string {
	t.Helper()
	dir := project(t)
	p := proctest.StartProcess(t, dir, nil, 60*time.Second, "switchboard studio listening on ", switchboardBin, "up", "--dir", dir, "--listen", "127.0.0.1:0")
	t.Cleanup(func() {
		p.Signal(syscall.SIGTERM)
		if code, err := p.Wait(30 * time.Second); err != nil || code != 0 {
			t.Errorf("switchboard up after SIGTERM: exit %d, %v\n%s", code, err, p.Stderr())
		}
		if t.Failed() {
			t.Logf("switchboard up stderr:\n%s", p.Stderr())
		}
	})
	if !strings.HasPrefix(p.Ready, "http://127.0.0.1:") {
		t.Fatalf("ready line %q", p.Ready)
	}
	// The studio holds a request for an agent that is still starting
	// until it is up, so no wait for the agent's state here.
	return p.Ready + "/api/agents/" + fixtureAgent + "/mcp"
}

// checkSubscription subscribes to the fixture agent's resources at url
// with a real go-sdk client, has test_update_resource change them, and
// reads the notifications/resources/updated that come: the suite's
// resources-subscribe checks only that a subscription is accepted, this
// that it is served (through the studio, that the proxy relays the
// agent's notifications to the client's session).
//
// Both eras: version "2025-11-25" pins a session (resources/subscribe, the
// toolset's Subscribe, go-sdk's subscriber table), "" lets go-sdk's client
// negotiate 2026-07-28 (subscriptions/listen on the sessionless endpoint).
func checkSubscription(t *testing.T, url, version string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	updated := make(chan string, 16)
	client := mcp.NewClient(&mcp.Implementation{Name: "subscriber", Version: "test"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			select {
			case updated <- req.Params.URI:
			default: // more than a test makes: next() reports what it got
			}
		},
	})
	transport := &http.Transport{}
	defer transport.CloseIdleConnections()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: transport}}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if caps := cs.InitializeResult().Capabilities; caps.Resources == nil || !caps.Resources.Subscribe || caps.Completions == nil {
		t.Errorf("capabilities %+v: want resources.subscribe and completions", caps)
	}
	update := func(uri string) {
		t.Helper()
		if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_update_resource", Arguments: map[string]any{"uri": uri}}); err != nil || res.IsError {
			t.Fatalf("test_update_resource %s: %v %+v", uri, err, res)
		}
	}
	next := func() string {
		t.Helper()
		select {
		case uri := <-updated:
			return uri
		case <-ctx.Done():
			t.Fatalf("no notifications/resources/updated: %v", ctx.Err())
			return ""
		}
	}
	const other = "test://static-text"
	for _, uri := range []string{fixtures.WatchedURI, other} {
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			t.Fatalf("subscribe %s: %v", uri, err)
		}
	}
	if got := cs.InitializeResult().ProtocolVersion; version != "" && got != version {
		t.Fatalf("negotiated %s, want %s", got, version)
	}
	// In the session era the toolset's Subscribe refuses a resource it
	// does not have; subscriptions/listen (2026-07-28) takes no handler in
	// go-sdk v1.8.0, so there a listen for any URI is accepted.
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://nonesuch"}); version != "" && err == nil {
		t.Error("a subscription to a resource the agent does not have was accepted")
	}
	update(fixtures.WatchedURI)
	if got := next(); got != fixtures.WatchedURI {
		t.Errorf("notifications/resources/updated for %q, want %q", got, fixtures.WatchedURI)
	}
	// Unsubscribed from the watched resource, its next change is not
	// sent. The session's notifications come in order on its one stream,
	// so the next one after the other resource's change is that one's.
	if err := cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: fixtures.WatchedURI}); err != nil {
		t.Fatalf("unsubscribe: %v", err)
	}
	update(fixtures.WatchedURI)
	update(other)
	if got := next(); got != other {
		t.Errorf("after unsubscribing from %s, the next notification is for %q, want %q", fixtures.WatchedURI, got, other)
	}
}
