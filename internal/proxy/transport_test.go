package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/waittest"
)

// oneShotAgent is an agent's socket that answers one request on a kept
// connection, in one write, then dies: its connection and its listener
// close, as the kernel closes a SIGKILLed process's sockets.
type oneShotAgent struct {
	ln       net.Listener
	requests atomic.Int32
	answered chan struct{}
}

func newOneShotAgent(t *testing.T) *oneShotAgent {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := &oneShotAgent{ln: ln, answered: make(chan struct{})}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 64<<10)
		var req []byte
		for !bytes.Contains(req, []byte("\r\n\r\nfirst")) {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			req = append(req, buf[:n]...)
		}
		a.requests.Add(1)
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n\r\nold")
		<-a.answered
	}()
	return a
}

// kill closes the agent's listener and connection.
func (a *oneShotAgent) kill() {
	a.ln.Close()
	close(a.answered)
}

// stallConn is a connection whose reads after the first wait until the
// next request is written: net/http's read loop then does not notice the
// agent's close before the next request comes, and the kept connection
// stays in the pool, as it does in the instant before the loop is
// scheduled.
type stallConn struct {
	net.Conn
	reads    atomic.Int32
	writes   atomic.Int32
	answered atomic.Bool
	closed   atomic.Bool
	release  chan struct{}
	once     sync.Once
}

func (c *stallConn) Close() error {
	c.closed.Store(true)
	return c.Conn.Close()
}

func (c *stallConn) free() { c.once.Do(func() { close(c.release) }) }

// Write frees the reads once a request after the first answer is written:
// the read loop then meets the agent's close with the request's bytes in
// the socket, as the loop does when it is scheduled late.
func (c *stallConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	n, err := c.Conn.Write(p)
	if c.answered.Load() {
		c.free()
	}
	return n, err
}

func (c *stallConn) Read(p []byte) (int, error) {
	if c.reads.Add(1) > 1 {
		<-c.release
	}
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.answered.Store(true)
	}
	return n, err
}

func (c *stallConn) SyscallConn() (syscall.RawConn, error) {
	return c.Conn.(syscall.Conn).SyscallConn()
}

// TestKeptConnectionOfADeadAgent: the agent died with a connection kept
// in the pool, before anything noticed. A POST given that connection does
// not write to it (the check finds the agent's close there), so it is
// proved unsent, sent on a new connection, refused by the dead address,
// and reaches the agent's new process, once.
//
// The premise, a connection kept idle in the pool, is net/http's to give:
// it closes a connection instead of keeping it when its write loop has not
// reported the request written within 50 ms (maxWriteWaitBeforeConnReuse),
// as happens on a starved machine. An attempt whose connection was closed
// so proves nothing either way; it is made again, a bounded number of
// times, and the test fails if no attempt had the premise.
func TestKeptConnectionOfADeadAgent(t *testing.T) {
	const attempts = 5
	for i := range attempts {
		if keptConnectionOfADeadAgent(t) {
			return
		}
		t.Logf("attempt %d: net/http closed the first connection instead of keeping it; trying again", i+1)
	}
	t.Fatalf("in %d attempts net/http never kept the first connection idle, so the check was never exercised", attempts)
}

// keptConnectionOfADeadAgent runs one attempt and reports whether the
// connection was kept, so that the attempt tested something.
func keptConnectionOfADeadAgent(t *testing.T) bool {
	t.Helper()
	var fresh atomic.Int32
	newProc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if string(b) == "second" {
			fresh.Add(1)
		}
		io.WriteString(w, "new")
	}))
	defer newProc.Close()
	up, _ := url.Parse(newProc.URL)
	old := newOneShotAgent(t)

	tr := NewTransport()
	defer tr.CloseIdleConnections()
	var mu sync.Mutex
	var conns []*stallConn
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.free()
		}
	}()
	d := &net.Dialer{}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		sc := &stallConn{Conn: c, release: make(chan struct{})}
		if addr == old.ln.Addr().String() {
			mu.Lock()
			conns = append(conns, sc)
			mu.Unlock()
		}
		return newAgentConn(sc), nil
	}
	rd := &Redial{Base: tr, Wait: 5 * time.Second, Await: func(ctx context.Context, max time.Duration, gone string) *url.URL {
		if gone != old.ln.Addr().String() {
			t.Errorf("awaited a process other than the dead one: %s", gone)
		}
		return up
	}}
	var reused atomic.Int32
	post := func(body string) (string, error) {
		ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
			if info.Reused {
				reused.Add(1)
			}
		}})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+old.ln.Addr().String()+"/mcp", nil)
		req.Body = io.NopCloser(strings.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(body)), nil }
		req.ContentLength = int64(len(body))
		resp, err := rd.RoundTrip(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	if got, err := post("first"); err != nil || got != "old" {
		t.Fatalf("first POST: %q, %v", got, err)
	}
	mu.Lock()
	if len(conns) != 1 {
		t.Fatalf("%d connections to the agent, want 1", len(conns))
	}
	kept := conns[0]
	mu.Unlock()
	raw, err := kept.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	writes := kept.writes.Load()
	old.kill()
	waittest.Until(t, 5*time.Second, "the agent's close to reach the kept connection", func() bool {
		return peerClosed(raw) != nil
	})
	if kept.closed.Load() {
		return false
	}

	got, err := post("second")
	if err != nil || got != "new" || fresh.Load() != 1 {
		t.Fatalf("second POST: %q, %v; the new process got it %d times; want its answer, once", got, err, fresh.Load())
	}
	if reused.Load() == 0 && kept.closed.Load() {
		return false // closed by net/http's own reuse rule after the check above
	}
	if reused.Load() != 1 || kept.writes.Load() != writes {
		t.Fatalf("the second POST was given the kept connection %d times and wrote to it %d times; want once and never", reused.Load(), kept.writes.Load()-writes)
	}
	if n := old.requests.Load(); n != 1 {
		t.Fatalf("the dead agent read %d requests, want only the first", n)
	}
	return true
}

// TestAgentConnCheck: the check takes nothing from a live connection, and
// fails the first write of a request, with nothing written, on one whose
// peer has closed it.
func TestAgentConnCheck(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			peer <- c
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	ac := newAgentConn(c)
	defer ac.Close()
	p := <-peer
	if _, err := ac.Write([]byte("req")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8)
	io.ReadFull(p, buf[:3])
	p.Write([]byte("ans"))
	if _, err := io.ReadFull(ac, buf[:3]); err != nil {
		t.Fatal(err)
	}
	// Alive, with an answer read: the next request is checked and sent.
	if n, err := ac.Write([]byte("req2")); err != nil || n != 4 {
		t.Fatalf("write to a live connection: %d, %v", n, err)
	}
	io.ReadFull(p, buf[:4])
	p.Write([]byte("x"))
	io.ReadFull(ac, buf[:1])
	p.Close()
	waittest.Until(t, 5*time.Second, "the peer's close to arrive", func() bool { return peerClosed(ac.raw) != nil })
	before := ac.writes.Load()
	if n, err := ac.Write([]byte("req3")); !errors.Is(err, ErrAgentClosed) || n != 0 || ac.writes.Load() != before {
		t.Fatalf("write after the peer closed: %d, %v, %d writes begun; want 0, ErrAgentClosed, none", n, err, ac.writes.Load()-before)
	}
}
