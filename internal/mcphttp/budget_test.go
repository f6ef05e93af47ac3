package mcphttp_test

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/mcphttp"
	"github.com/switchboard-run/switchboard/internal/mcphttp/mcphttptest"
)

// budgetServer serves h behind the budget's listener and handler, as the
// studio and the agent server do.
func budgetServer(t *testing.T, b *mcphttp.Budget, h http.Handler) *httptest.Server {
	t.Helper()
	ts := httptest.NewUnstartedServer(b.Handler(h))
	ts.Listener = b.Listener(ts.Listener)
	ts.Start()
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	return ts
}

// rawRequest writes a request head announcing a body of length bytes and
// the first part of it, and returns the connection.
func rawRequest(t *testing.T, addr string, length int, first string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s", addr, length, first)
	return c
}

func readResponse(t *testing.T, c net.Conn) (*http.Response, []byte) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

// A body that trickles is cut off at the body deadline with 408, and the
// connection is closed; a GET stream outlives the deadline.
func TestBodyDeadline(t *testing.T) {
	const deadline = 200 * time.Millisecond
	b := mcphttp.NewBudget(&mcphttp.BudgetOptions{BodyTimeout: deadline})
	streamed := make(chan error, 1)
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			// Outlive the body deadline, then report whether the request
			// was cancelled meanwhile.
			select {
			case <-time.After(4 * deadline):
				streamed <- nil
			case <-r.Context().Done():
				streamed <- r.Context().Err()
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
	})
	ts := budgetServer(t, b, mcphttp.New(up, &mcphttp.Options{Budget: b}))
	addr := ts.Listener.Addr().String()

	c := rawRequest(t, addr, 100, `{"jsonrpc":`)
	resp, body := readResponse(t, c)
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), "did not arrive within") {
		t.Fatalf("a trickling body: %s %s, want 408 with a JSON-RPC error", resp.Status, body)
	}
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatalf("the connection stays open after the deadline (read %d bytes)", n)
	}

	req, _ := http.NewRequest(http.MethodGet, ts.URL, nil)
	req.Header.Set("Accept", "text/event-stream")
	res, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if err := <-streamed; err != nil {
		t.Fatalf("the GET stream was cancelled by the body deadline: %v", err)
	}
}

// Past MaxConns a new connection reads a 503 with a JSON-RPC error and is
// closed; the held connections are unaffected, and a slot freed is reused.
func TestConnectionCap(t *testing.T) {
	b := mcphttp.NewBudget(&mcphttp.BudgetOptions{MaxConns: 2})
	ts := budgetServer(t, b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // in a request until the body is in
		io.WriteString(w, "ok")
	}))
	addr := ts.Listener.Addr().String()
	held := []net.Conn{rawRequest(t, addr, 10, ""), rawRequest(t, addr, 10, "")}
	// Both in a request (their bodies being read), so neither gives way.
	waitFor(t, func() bool { return b.Stats().BusyConns == 2 })

	c := rawRequest(t, addr, 2, "{}")
	resp, body := readResponse(t, c)
	var e struct {
		Error struct {
			Code int64 `json:"code"`
		} `json:"error"`
	}
	if resp.StatusCode != http.StatusServiceUnavailable || json.Unmarshal(body, &e) != nil || e.Error.Code != mcphttp.CodeServerOverloaded {
		t.Fatalf("past the cap: %s %s", resp.Status, body)
	}
	if st := b.Stats(); st.RefusedConns != 1 || st.Conns != 2 {
		t.Fatalf("stats %+v", st)
	}
	held[0].Close()
	waitFor(t, func() bool { return b.Stats().Conns == 1 })
	res, err := ts.Client().Get(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("after a slot was freed: %s", res.Status)
	}
}

// The in-flight byte budget: a large body that does not fit is refused
// with 503 before it is read; a small one still fits in the reserve; the
// bytes come back when the requests end.
func TestInFlightByteBudget(t *testing.T) {
	b := mcphttp.NewBudget(&mcphttp.BudgetOptions{MaxInFlightBytes: 256 << 10})
	entered, proceed := make(chan struct{}), make(chan struct{})
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("X-Hold"), "yes") {
			entered <- struct{}{}
			<-proceed
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
	})
	ts := budgetServer(t, b, mcphttp.New(up, &mcphttp.Options{Budget: b}))
	post := func(size int, hold bool) (*http.Response, []byte) {
		pad := strings.Repeat("x", max(0, size-60))
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"p":%q}}`, pad)
		req, _ := http.NewRequest(http.MethodPost, ts.URL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if hold {
			req.Header.Set("X-Hold", "yes")
		}
		res, err := ts.Client().Do(req)
		if err != nil {
			t.Error(err)
			return &http.Response{}, nil
		}
		defer res.Body.Close()
		data, _ := io.ReadAll(res.Body)
		return res, data
	}
	done := make(chan int, 1)
	go func() {
		res, _ := post(200<<10, true)
		done <- res.StatusCode
	}()
	<-entered
	if got := b.Stats().InFlightBytes; got < 190<<10 {
		t.Fatalf("a held 200 kB body holds %d bytes of the budget", got)
	}
	res, body := post(100<<10, false)
	if res.StatusCode != http.StatusServiceUnavailable || !bytes.Contains(body, []byte("overloaded")) {
		t.Fatalf("a body past the budget: %s %s, want 503", res.Status, body)
	}
	if res, body := post(2<<10, false); res.StatusCode != http.StatusOK {
		t.Fatalf("a small body with the budget full: %s %s, want 200 from the reserve", res.Status, body)
	}
	close(proceed)
	if code := <-done; code != http.StatusOK {
		t.Fatalf("the held request: %d", code)
	}
	waitFor(t, func() bool { return b.Stats().InFlightBytes == 0 })
}

// The body is read once: an outer handler's ReadRequest is what the
// middleware uses, and the parsed message is in the context.
func TestBodyReadOnce(t *testing.T) {
	b := mcphttp.NewBudget(nil)
	var seen *mcphttp.Message
	var upstreamBody string
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		upstreamBody = string(data)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
	})
	mw := mcphttp.New(up, &mcphttp.Options{Budget: b})
	reads := 0
	outer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = countingBody{r.Body, &reads}
		r, release := mcphttp.ReadRequest(w, r, b, mcphttp.DefaultMaxBodyBytes)
		defer release()
		seen, _ = mcphttp.MessageFrom(r.Context())
		mw.ServeHTTP(w, r)
	})
	ts := budgetServer(t, b, outer)
	const msg = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"_meta":{"k":"v"}}}`
	req, _ := http.NewRequest(http.MethodPost, ts.URL, strings.NewReader(msg))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	res, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if seen == nil || seen.Method != "tools/call" || seen.Tool != "echo" || string(seen.ID) != "7" ||
		string(seen.Arguments) != `{"text":"hi"}` || string(seen.Meta["k"]) != `"v"` {
		t.Fatalf("parsed message %+v", seen)
	}
	if upstreamBody != msg {
		t.Fatalf("upstream got %q", upstreamBody)
	}
	if reads == 0 {
		t.Fatal("the body was never read from the connection")
	}
	if st := b.Stats(); st.InFlightBytes != 0 {
		t.Fatalf("bytes still held after the request: %d", st.InFlightBytes)
	}
}

type countingBody struct {
	io.ReadCloser
	n *int
}

func (c countingBody) Read(p []byte) (int, error) {
	*c.n++
	return c.ReadCloser.Read(p)
}

// waitFor polls cond with a deadline (the state it waits for is reached by
// another goroutine of the server).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatal("condition not reached within 10s")
		case <-time.After(time.Millisecond):
		}
	}
}

// A large body on a session the handler cannot vouch for is refused with
// 404 without being read; the same body on a live session is served.
func TestUnvouchedLargeBodyRefusedUnread(t *testing.T) {
	b := mcphttp.NewBudget(nil)
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Session-Id") == "" {
			w.Header().Set("Mcp-Session-Id", "live")
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
	})
	mw := mcphttp.New(up, &mcphttp.Options{Budget: b})
	reads := 0
	ts := budgetServer(t, b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = countingBody{r.Body, &reads}
		mw.ServeHTTP(w, r)
	}))
	c := client(ts)
	if _, err := c.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	big := []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"p":%q}}}`, strings.Repeat("p", 200<<10)))
	reads = 0
	r, err := c.Do(t.Context(), http.MethodPost, "invented", big, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != http.StatusNotFound || reads != 0 {
		t.Fatalf("a 200 kB body on an invented session: %v after %d reads, want 404 unread", r, reads)
	}
	if r, err := c.Do(t.Context(), http.MethodPost, "live", big, nil); err != nil || r.Status != http.StatusOK {
		t.Fatalf("the same body on the live session: %v %v", r, err)
	}
}

// New sessions are bounded in rate: past the burst an initialize gets 503
// (ErrSessionRate) until the bucket refills; sessions already open are not
// affected.
func TestSessionRate(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(0, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	var n atomic.Int64
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Session-Id") == "" {
			w.Header().Set("Mcp-Session-Id", fmt.Sprintf("s%d", n.Add(1)))
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
	})
	ts := httptest.NewServer(mcphttp.New(up, &mcphttp.Options{SessionsPerSecond: 2, SessionBurst: 3, Now: clock}))
	defer ts.Close()
	c := client(ts)
	var first string
	for i := range 3 {
		r := must[*mcphttptest.Response](t)(c.Initialize(t.Context(), ""))
		if r.Status != http.StatusOK {
			t.Fatalf("initialize %d within the burst: %v", i, r)
		}
		first = cmp.Or(first, r.SessionID)
	}
	r := must[*mcphttptest.Response](t)(c.Initialize(t.Context(), ""))
	if r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") != "1" || !strings.Contains(fmt.Sprint(r.Error()), "faster than allowed") {
		t.Fatalf("initialize past the burst: %v", r)
	}
	if r := must[*mcphttptest.Response](t)(c.Call(t.Context(), first, 2, "ping", nil)); r.Status != http.StatusOK {
		t.Fatalf("an open session while the rate refuses new ones: %v", r)
	}
	mu.Lock()
	now = now.Add(time.Second) // two more
	mu.Unlock()
	for i := range 2 {
		if r := must[*mcphttptest.Response](t)(c.Initialize(t.Context(), "")); r.Status != http.StatusOK {
			t.Fatalf("initialize %d after a second: %v", i, r)
		}
	}
}
