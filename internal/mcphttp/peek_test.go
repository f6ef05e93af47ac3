package mcphttp_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/switchboard-run/switchboard/internal/mcphttp"
)

// gatedListener hands its connections to the budget as they are, except
// that one from a gated address reads nothing until open is closed: its
// request stays in the socket, unread, as when net/http's goroutine for a
// connection has not run yet. Accepted connections are also sent on
// accepted, in order, for the test to watch the server's side.
type gatedListener struct {
	net.Listener
	gated    net.IP
	open     chan struct{}
	accepted chan *countingConn
}

type countingConn struct {
	*net.TCPConn // keeps SyscallConn, which the budget peeks through
	gate         chan struct{}
	read         atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	if c.gate != nil {
		<-c.gate
	}
	n, err := c.TCPConn.Read(p)
	c.read.Add(int64(n))
	return n, err
}

func (l *gatedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	cc := &countingConn{TCPConn: c.(*net.TCPConn)}
	if c.RemoteAddr().(*net.TCPAddr).IP.Equal(l.gated) {
		cc.gate = l.open
	}
	l.accepted <- cc
	return cc, nil
}

// gatedServer serves h behind b on a gated listener; requests from gated
// stay unread until the returned release is called.
func gatedServer(t *testing.T, b *mcphttp.Budget, h http.Handler, gated string) (addr string, gl *gatedListener, release func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gl = &gatedListener{Listener: ln, gated: net.ParseIP(gated), open: make(chan struct{}), accepted: make(chan *countingConn, 64)}
	srv := &http.Server{Handler: b.Handler(h)}
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.Serve(b.Listener(gl))
	}()
	var once sync.Once
	release = func() { once.Do(func() { close(gl.open) }) }
	t.Cleanup(func() {
		release()
		srv.Close()
		<-served
	})
	return ln.Addr().String(), gl, release
}

func pingServer() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
	})
}

// fullRequest dials from local and writes a whole ping request at once.
func fullRequest(t *testing.T, local, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	const body = `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s", addr, len(body), body)
	return c
}

// trickler opens a connection that sends part of a head, and waits until
// the server has counted it and read what it sent: then the order of the
// connections, and what waits in their sockets, is known.
func trickler(t *testing.T, b *mcphttp.Budget, gl *gatedListener, addr string, open int64) {
	t.Helper()
	partialHead(t, nil, addr)
	sc := <-gl.accepted
	head := int64(len(fmt.Sprintf("POST /mcp HTTP/1.1\r\nHost: %s\r\nX-Trickle: a", addr)))
	waitFor(t, func() bool { return b.Stats().Conns == open && sc.read.Load() == head })
}

// A client whose whole request waits unread in its socket when a flood
// fills the cap is not the one evicted, however old its connection: each
// new trickler takes another trickler's place, and once the server reads
// the request it is served. Deterministic: the request stays unread (its
// reads are held) through the whole flood, which would evict it at the
// fourth trickler if the budget did not look.
func TestConnectionCapSparesAWaitingRequest(t *testing.T) {
	const maxConns = 4
	b := mcphttp.NewBudget(&mcphttp.BudgetOptions{MaxConns: maxConns})
	addr, gl, release := gatedServer(t, b, mcphttp.New(pingServer(), &mcphttp.Options{Budget: b}), "127.0.0.2")

	for i := range maxConns - 1 {
		trickler(t, b, gl, addr, int64(i+1))
	}
	legit := fullRequest(t, "127.0.0.2", addr)
	sc := <-gl.accepted
	waitFor(t, func() bool { return b.Stats().Conns == maxConns && mcphttp.RequestWaiting(sc) })

	const flood = 3 * maxConns
	for i := range flood {
		trickler(t, b, gl, addr, maxConns)
		if st := b.Stats(); st.EvictedConns != int64(i+1) || st.RefusedConns != 0 {
			t.Fatalf("trickler %d of the flood: %+v, want %d evicted, none refused", i, st, i+1)
		}
	}
	if !mcphttp.RequestWaiting(sc) {
		t.Fatal("the waiting request's connection was closed during the flood (evicted)")
	}
	release()
	resp, body := readResponse(t, legit)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the request that waited through the flood: %s %s, want 200", resp.Status, body)
	}
}

// When every connection that could give way has a request waiting, the
// new one is refused with 503 and none of them is evicted; once read,
// each is served.
func TestConnectionCapRefusesRatherThanDropAWaitingRequest(t *testing.T) {
	const maxConns = 2
	b := mcphttp.NewBudget(&mcphttp.BudgetOptions{MaxConns: maxConns})
	addr, gl, release := gatedServer(t, b, mcphttp.New(pingServer(), &mcphttp.Options{Budget: b}), "127.0.0.2")

	var waiting []net.Conn
	for i := range maxConns {
		waiting = append(waiting, fullRequest(t, "127.0.0.2", addr))
		sc := <-gl.accepted
		waitFor(t, func() bool { return b.Stats().Conns == int64(i+1) && mcphttp.RequestWaiting(sc) })
	}
	late := rawRequest(t, addr, 2, "{}")
	<-gl.accepted
	if resp, _ := readResponse(t, late); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("the cap full of waiting requests: %s, want 503", resp.Status)
	}
	if st := b.Stats(); st.EvictedConns != 0 || st.RefusedConns != 1 {
		t.Fatalf("%+v, want none evicted and 1 refused", st)
	}
	release()
	for i, c := range waiting {
		if resp, body := readResponse(t, c); resp.StatusCode != http.StatusOK {
			t.Errorf("waiting request %d: %s %s, want 200", i, resp.Status, body)
		}
	}
}
