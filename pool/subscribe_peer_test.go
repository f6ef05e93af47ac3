package pool

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSubscribeServerEverything: Pool.Subscribe against the real
// @modelcontextprotocol/server-everything (2026.8.31, the TypeScript SDK's
// server) over stdio and over its Streamable HTTP transport. It sends
// notifications/resources/updated only to a session that called its
// toggle-subscriber-updates tool, once at once and then every 5 s for each
// URI that session subscribed (dist/resources/subscriptions.js), so the
// tool call must go out on the subscription's own session: the pool's one
// session for the server. Over HTTP the update comes on the standalone GET
// stream (no request is related to it), which the pool holds open only with
// Options.Notifications; without it Subscribe is refused, typed.
func TestSubscribeServerEverything(t *testing.T) {
	node := needPeers(t)
	const uri = "demo://resource/static/document/architecture.md"
	entry, err := filepath.Abs(filepath.Join(peersDir, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		srv  func(t *testing.T) *Server
	}{
		{"stdio", func(*testing.T) *Server {
			return &Server{Name: "everything-stdio", Command: node, Args: []string{entry, "stdio"}}
		}},
		{"http", func(t *testing.T) *Server {
			return &Server{Name: "everything-http", URL: startEverything(t).url(), ProtocolVersion: Protocol20251125}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := tc.srv(t)
			tr := &http.Transport{}
			defer tr.CloseIdleConnections()
			p := New(&Options{Transport: tr, Notifications: true})
			defer p.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()

			updates := make(chan string, 16)
			sub, err := p.Subscribe(ctx, srv, uri, func(n *mcp.ResourceUpdatedNotificationParams) {
				select {
				case updates <- n.URI:
				default: // the test has what it needs; fn must not block
				}
			})
			if err != nil {
				t.Fatalf("Subscribe: %v", err)
			}
			res, err := p.CallTool(ctx, srv, &mcp.CallToolParams{Name: "toggle-subscriber-updates", Arguments: map[string]any{}})
			if err != nil || res.IsError {
				t.Fatalf("toggle-subscriber-updates: %v %+v", err, res)
			}
			select {
			case got := <-updates:
				if got != uri {
					t.Fatalf("update for %q, want %q", got, uri)
				}
			case <-ctx.Done():
				t.Fatalf("no notifications/resources/updated within the deadline (the server sends one at once, then every 5 s)")
			}
			if err := sub.Unsubscribe(ctx); err != nil {
				t.Fatalf("Unsubscribe: %v", err)
			}
			if st := p.Stats(); st.Dials != 1 {
				t.Errorf("dials %d, want 1: the tool call and the subscription share the session", st.Dials)
			}

			if srv.URL != "" {
				// The same server on a pool without Notifications: refused
				// before anything is sent.
				q := New(&Options{Transport: tr})
				defer q.Close()
				_, err := q.Subscribe(ctx, srv, uri, func(*mcp.ResourceUpdatedNotificationParams) {})
				var pe *Error
				if !errors.Is(err, ErrSubscribeNeedsNotifications) || !errors.As(err, &pe) || pe.Kind != KindRefused {
					t.Fatalf("Subscribe without Notifications: %v, want KindRefused wrapping ErrSubscribeNeedsNotifications", err)
				}
				if st := q.Stats(); st.Dials != 0 {
					t.Errorf("dials %d without Notifications, want 0", st.Dials)
				}
			}
		})
	}
}
