package pool_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/pool"
)

// subServer is a real go-sdk server that supports resources/subscribe,
// behind a handler the test can replace with a new server: a restart that
// forgets every session.
type subServer struct {
	t          *testing.T
	ts         *httptest.Server
	cur        atomic.Pointer[subInstance]
	subscribed chan string // URIs, as each SubscribeHandler call sees them
	unsub      chan string
}

type subInstance struct {
	srv *mcp.Server
	h   http.Handler
}

func startSubServer(t *testing.T) *subServer {
	s := &subServer{t: t, subscribed: make(chan string, 16), unsub: make(chan string, 16)}
	s.restart()
	s.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.cur.Load().h.ServeHTTP(w, r)
	}))
	t.Cleanup(s.ts.Close)
	return s
}

// restart puts a new server in place and closes the old one's sessions: a
// client's next request, and its GET stream's reconnection, find its
// session gone (404).
func (s *subServer) restart() {
	srv := mcp.NewServer(&mcp.Implementation{Name: "subs", Version: "1"}, &mcp.ServerOptions{
		SubscribeHandler: func(_ context.Context, req *mcp.SubscribeRequest) error {
			s.subscribed <- req.Params.URI
			return nil
		},
		UnsubscribeHandler: func(_ context.Context, req *mcp.UnsubscribeRequest) error {
			s.unsub <- req.Params.URI
			return nil
		},
	})
	for _, uri := range []string{"test://a", "test://b"} {
		srv.AddResource(&mcp.Resource{URI: uri, Name: uri}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, Text: "x"}}}, nil
		})
	}
	old := s.cur.Swap(&subInstance{srv: srv, h: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)})
	if old != nil {
		for ss := range old.srv.Sessions() {
			ss.Close()
		}
	}
}

func (s *subServer) updated(uri string) {
	if err := s.cur.Load().srv.ResourceUpdated(s.t.Context(), &mcp.ResourceUpdatedNotificationParams{URI: uri}); err != nil {
		s.t.Fatal(err)
	}
}

func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// TestSubscribeSurvivesReinitialization: a subscription made through the
// pool gets the server's updates for its URI only, is made again on the
// new session when the server forgets the old one, goes on getting
// updates there, and Unsubscribe sends resources/unsubscribe. Close
// leaves no subscription goroutine behind.
func TestSubscribeSurvivesReinitialization(t *testing.T) {
	s := startSubServer(t)
	p := pool.New(&pool.Options{Notifications: true})
	t.Cleanup(func() { p.Close() }) // before the server's Cleanup: its GET streams end first
	srv := &pool.Server{Name: "subs", URL: s.ts.URL, ProtocolVersion: pool.Protocol20251125}

	updates := make(chan string, 16)
	subA, err := p.Subscribe(t.Context(), srv, "test://a", func(u *mcp.ResourceUpdatedNotificationParams) { updates <- "a:" + u.URI })
	if err != nil {
		t.Fatal(err)
	}
	if got := recv(t, s.subscribed, "the subscribe"); got != "test://a" {
		t.Fatalf("subscribed %q", got)
	}
	other := make(chan string, 16)
	if _, err := p.Subscribe(t.Context(), srv, "test://b", func(u *mcp.ResourceUpdatedNotificationParams) { other <- u.URI }); err != nil {
		t.Fatal(err)
	}
	recv(t, s.subscribed, "the second subscribe")

	s.updated("test://a")
	if got := recv(t, updates, "the update"); got != "a:test://a" {
		t.Fatalf("update %q", got)
	}
	s.updated("test://b")
	if got := recv(t, other, "b's update"); got != "test://b" {
		t.Fatalf("b's update %q", got)
	}
	if len(updates) != 0 {
		t.Fatalf("a's subscriber got b's update: %q", <-updates)
	}

	// The server forgets every session: both subscriptions are made again
	// on the pool's new session, without the caller doing anything.
	s.restart()
	again := map[string]bool{}
	for range 2 {
		again[recv(t, s.subscribed, "the subscription made again")] = true
	}
	if !again["test://a"] || !again["test://b"] {
		t.Fatalf("subscribed again to %v, want both", again)
	}
	s.updated("test://a")
	if got := recv(t, updates, "the update after the restart"); got != "a:test://a" {
		t.Fatalf("update %q", got)
	}
	if st := p.Stats(); st.Dials < 2 {
		t.Fatalf("dials %d, want a new session", st.Dials)
	}

	if err := subA.Unsubscribe(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, s.unsub, "the unsubscribe"); got != "test://a" {
		t.Fatalf("unsubscribed %q", got)
	}
	if err := subA.Unsubscribe(t.Context()); err != nil {
		t.Fatalf("second Unsubscribe: %v", err)
	}

	// The other subscription is still held: Close ends it.
	p.Close()
	buf := make([]byte, 1<<20)
	if st := string(buf[:runtime.Stack(buf, true)]); strings.Contains(st, "pool.(*Subscription).run") {
		t.Fatalf("a subscription goroutine outlived Close:\n%s", st)
	}
}

// TestSubscribeRefusals: a bad subscription is refused with an error that
// says what was wrong, and none is made.
func TestSubscribeRefusals(t *testing.T) {
	s := startSubServer(t)
	srv := &pool.Server{Name: "subs", URL: s.ts.URL}
	quiet := pool.New(nil)
	defer quiet.Close()
	_, err := quiet.Subscribe(t.Context(), srv, "test://a", func(*mcp.ResourceUpdatedNotificationParams) {})
	if !errors.Is(err, pool.ErrSubscribeNeedsNotifications) || !errors.Is(err, pool.ErrRefused) {
		t.Errorf("without Notifications: %v", err)
	}
	p := pool.New(&pool.Options{Notifications: true})
	defer p.Close()
	if _, err := p.Subscribe(t.Context(), srv, "", func(*mcp.ResourceUpdatedNotificationParams) {}); err == nil || !strings.Contains(err.Error(), "empty resource uri") {
		t.Errorf("empty uri: %v", err)
	}
	if _, err := p.Subscribe(t.Context(), srv, "test://a", nil); err == nil || !strings.Contains(err.Error(), "nil update function") {
		t.Errorf("nil fn: %v", err)
	}
	// A server without the subscribe capability answers with an error.
	plain := mcp.NewServer(&mcp.Implementation{Name: "plain", Version: "1"}, nil)
	pts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return plain }, nil))
	t.Cleanup(pts.Close)
	_, err = p.Subscribe(t.Context(), &pool.Server{Name: "plain", URL: pts.URL}, "test://a", func(*mcp.ResourceUpdatedNotificationParams) {})
	var pe *pool.Error
	if !errors.As(err, &pe) || pe.Kind != pool.KindRPC {
		t.Errorf("server without subscriptions: %v, want its rpc error", err)
	}
}

// eagerServer is a real go-sdk v1.8.0 server that sends
// notifications/resources/updated for a URI the moment it has answered
// resources/subscribe for it (its HTTP handler has returned), as a server
// whose resource changes often does. A test can cut the session's
// standalone GET stream (cutGET) and hold the client's reconnection
// (held) until it lets it through (releaseGET), or refuse every GET.
type eagerServer struct {
	srv     *mcp.Server
	ts      *httptest.Server
	sent    chan error    // the result of each update sent after an answer
	gets    atomic.Int32  // GETs received
	cut     chan func()   // the cancel of the first GET, once it is served
	held    chan struct{} // a later GET arrived and is held
	release chan struct{} // closed to let held GETs through
}

func startEagerServer(t *testing.T, opts *mcp.StreamableHTTPOptions, refuseGET bool) *eagerServer {
	es := &eagerServer{sent: make(chan error, 16), cut: make(chan func(), 1), held: make(chan struct{}, 16), release: make(chan struct{})}
	es.srv = mcp.NewServer(&mcp.Implementation{Name: "eager", Version: "1"}, &mcp.ServerOptions{
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	for _, uri := range []string{"test://a", "test://b"} {
		es.srv.AddResource(&mcp.Resource{URI: uri, Name: uri}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, Text: "x"}}}, nil
		})
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return es.srv }, opts)
	es.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
			if refuseGET {
				w.Header().Set("Allow", "POST, DELETE")
				http.Error(w, "no standalone stream here", http.StatusMethodNotAllowed)
				return
			}
			if es.gets.Add(1) == 1 {
				ctx, cancel := context.WithCancel(r.Context())
				es.cut <- cancel
				h.ServeHTTP(w, r.WithContext(ctx))
				return
			}
			es.held <- struct{}{}
			select {
			case <-es.release:
			case <-r.Context().Done():
				return
			}
			h.ServeHTTP(w, r)
		case http.MethodPost:
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			h.ServeHTTP(w, r)
			var msg struct {
				Method string `json:"method"`
				Params struct {
					URI string `json:"uri"`
				} `json:"params"`
			}
			if json.Unmarshal(body, &msg) == nil && msg.Method == "resources/subscribe" {
				// The answer is written: the update goes out at once.
				es.sent <- es.srv.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: msg.Params.URI})
			}
		default:
			h.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(es.ts.Close)
	t.Cleanup(es.releaseGET) // before ts.Close: a held GET ends
	return es
}

func (es *eagerServer) releaseGET() {
	select {
	case <-es.release:
	default:
		close(es.release)
	}
}

// TestSubscribeUpdateRightAfterAnswer: an update a go-sdk v1.8.0 server
// sends the moment it has answered resources/subscribe reaches the
// subscriber, on a fresh session and on one whose standalone GET stream
// was cut and is being reopened when Subscribe is called. go-sdk's server
// drops a notification while that stream is not connected, so the second
// update arrives only because Subscribe waits for the stream to be open
// before it subscribes (without that wait it is lost: the pool sent the
// subscribe while the reconnection was held, and the test timed out).
func TestSubscribeUpdateRightAfterAnswer(t *testing.T) {
	es := startEagerServer(t, nil, false)
	p := pool.New(&pool.Options{Notifications: true})
	t.Cleanup(func() { p.Close() })
	srv := &pool.Server{Name: "eager", URL: es.ts.URL, ProtocolVersion: pool.Protocol20251125}

	updates := make(chan string, 16)
	fn := func(u *mcp.ResourceUpdatedNotificationParams) { updates <- u.URI }
	subA, err := p.Subscribe(t.Context(), srv, "test://a", fn)
	if err != nil {
		t.Fatal(err)
	}
	if err := recv(t, es.sent, "the server's first update"); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, updates, "the update sent right after the first answer"); got != "test://a" {
		t.Fatalf("update %q", got)
	}
	if err := subA.UpdatesRefused(); err != nil {
		t.Fatalf("UpdatesRefused on an open stream: %v", err)
	}

	// The server ends the session's GET stream (as a proxy's read timeout
	// would); go-sdk reconnects after its backoff, and the server holds
	// that reconnection until the pool waits for it.
	recv(t, es.cut, "the first GET")()
	recv(t, es.held, "the GET's reconnection")
	defer pool.SetStreamWaitHook(es.releaseGET)()

	subB, err := p.Subscribe(t.Context(), srv, "test://b", fn)
	if err != nil {
		t.Fatal(err)
	}
	recv(t, es.sent, "the server's second update")
	if got := recv(t, updates, "the update sent right after the answer, on the reopened stream"); got != "test://b" {
		t.Fatalf("update %q", got)
	}
	if err := subB.UpdatesRefused(); err != nil {
		t.Fatalf("UpdatesRefused: %v", err)
	}
	if st := p.Stats(); st.Dials != 1 {
		t.Fatalf("dials %d, want the one session", st.Dials)
	}
	for _, s := range []*pool.Subscription{subA, subB} {
		if err := s.Unsubscribe(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSubscribeGETRefused: a session-era server that answers the
// standalone GET with 405 accepts the subscription but can send no update;
// the Subscription says so, typed, and Subscribe does not wait for a stream
// that will never open.
func TestSubscribeGETRefused(t *testing.T) {
	es := startEagerServer(t, nil, true)
	p := pool.New(&pool.Options{Notifications: true})
	t.Cleanup(func() { p.Close() })
	sub, err := p.Subscribe(t.Context(), &pool.Server{Name: "eager", URL: es.ts.URL, ProtocolVersion: pool.Protocol20251125}, "test://a",
		func(*mcp.ResourceUpdatedNotificationParams) {})
	if err != nil {
		t.Fatal(err)
	}
	recv(t, es.sent, "the server's update")
	if err := sub.UpdatesRefused(); !errors.Is(err, pool.ErrNoUpdateStream) || !strings.Contains(err.Error(), "HTTP 405") {
		t.Fatalf("UpdatesRefused: %v, want ErrNoUpdateStream naming the 405", err)
	}
	if err := sub.Unsubscribe(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestSubscribeSessionlessEra: in the 2026-07-28 era (SEP-2575) there is
// no session and no standalone GET stream; go-sdk v1.8.0 subscribes with
// subscriptions/listen, a request whose own SSE answer stays open and
// carries the updates. pool.Subscribe against a stateless go-sdk server,
// the era negotiated (the Server unpinned): the subscription reaches the
// server's SubscribeHandler, an update sent at once after the
// subscription is acknowledged reaches the subscriber, with the listen's
// subscription id, and nothing waits for a GET.
func TestSubscribeSessionlessEra(t *testing.T) {
	subscribed := make(chan string, 4)
	srv := mcp.NewServer(&mcp.Implementation{Name: "sessionless", Version: "1"}, &mcp.ServerOptions{
		SubscribeHandler: func(_ context.Context, req *mcp.SubscribeRequest) error {
			subscribed <- req.Params.URI
			return nil
		},
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	srv.AddResource(&mcp.Resource{URI: "test://a", Name: "a"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "test://a", Text: "x"}}}, nil
	})
	var gets atomic.Int32
	versions := make(chan string, 64) // MCP-Protocol-Version of each POST
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
			gets.Add(1)
		case http.MethodPost:
			select {
			case versions <- r.Header.Get("Mcp-Protocol-Version"):
			default:
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		// go-sdk v1.8.0's stateless listen handler ends only when a write
		// to its stream fails (see its TestResourceSubscriptions_Streamable):
		// drop the connections, then make it write.
		ts.CloseClientConnections()
		_ = srv.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: "test://a"})
		ts.Close()
	})
	p := pool.New(&pool.Options{Notifications: true})
	t.Cleanup(func() { p.Close() })

	type update struct{ uri, id string }
	updates := make(chan update, 16)
	sub, err := p.Subscribe(t.Context(), &pool.Server{Name: "sessionless", URL: ts.URL}, "test://a", func(u *mcp.ResourceUpdatedNotificationParams) {
		updates <- update{u.URI, fmt.Sprint(u.Meta[mcp.MetaKeySubscriptionID])}
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := recv(t, subscribed, "the server's SubscribeHandler"); got != "test://a" {
		t.Fatalf("subscribed %q", got)
	}
	if err := srv.ResourceUpdated(t.Context(), &mcp.ResourceUpdatedNotificationParams{URI: "test://a"}); err != nil {
		t.Fatal(err)
	}
	got := recv(t, updates, "the update on the listen stream")
	if got.uri != "test://a" || got.id == "" || got.id == "<nil>" {
		t.Fatalf("update %+v, want test://a with the listen's subscription id", got)
	}
	if err := sub.UpdatesRefused(); err != nil {
		t.Fatalf("UpdatesRefused: %v", err)
	}
	if n := gets.Load(); n != 0 {
		t.Fatalf("%d GETs in the sessionless era, want none", n)
	}
	if len(versions) == 0 {
		t.Fatal("no POST seen")
	}
	for len(versions) > 0 {
		if v := <-versions; v != pool.Protocol20260728 {
			t.Fatalf("a POST spoke %q, want %s throughout", v, pool.Protocol20260728)
		}
	}
	if err := sub.Unsubscribe(t.Context()); err != nil {
		t.Fatal(err)
	}
}
