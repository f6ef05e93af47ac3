package proxy

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"
)

// dying accepts connections and closes each one before answering, as an
// agent killed between accept and answer does.
func dying(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			// Read the request head so that the client has sent it, then
			// drop the connection without a byte of answer.
			buf := make([]byte, 4096)
			_, _ = c.Read(buf)
			c.Close()
		}
	}()
	return ln.Addr().String()
}

// TestRedialResendsALostGET: a GET whose connection died before an answer
// reaches the agent's new process; a POST on the same kind of connection
// is not sent again (it may have run), and its error is returned.
func TestRedialResendsALostGET(t *testing.T) {
	var gets atomic.Int32
	fresh := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			gets.Add(1)
		}
		io.WriteString(w, "fresh")
	}))
	defer fresh.Close()
	up, _ := url.Parse(fresh.URL)
	gone := dying(t)
	var awaited, resent atomic.Int32
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	rd := &Redial{
		Base: tr,
		Wait: 5 * time.Second,
		Await: func(ctx context.Context, max time.Duration, host string) *url.URL {
			awaited.Add(1)
			if host != gone {
				t.Errorf("awaited a process other than %s: %s", gone, host)
			}
			return up
		},
		Resent: func(context.Context) { resent.Add(1) },
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+gone+"/mcp", nil)
	resp, err := rd.RoundTrip(req)
	if err != nil {
		t.Fatalf("GET: %v, want the new process's answer", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "fresh" || gets.Load() != 1 || resent.Load() != 1 {
		t.Fatalf("GET answered %q; new process saw %d GETs, %d resent; want fresh, 1, 1", b, gets.Load(), resent.Load())
	}

	awaited.Store(0)
	post, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+gone+"/mcp", nil)
	if resp, err := rd.RoundTrip(post); err == nil {
		resp.Body.Close()
		t.Fatal("POST on a connection lost before its answer was sent again; it may have run")
	}
	if awaited.Load() != 0 {
		t.Fatalf("POST waited for a new process %d times; a lost POST is not resent", awaited.Load())
	}
}
