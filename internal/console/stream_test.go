package console

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// smallBuffers gives every accepted connection a small send buffer, so
// that a reader that stops reading blocks the server's writes soon.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		c.(*net.TCPConn).SetWriteBuffer(4096)
	}
	return c, err
}

// A reader of an ask's event stream that stops reading does not hold the
// handler: the write that blocks on its full socket times out, the handler
// returns (its goroutine ends) and the connection is closed. A real
// client with a small receive buffer connects, sends its GET and never
// reads; the ask has far more events than the buffers of both sides hold.
func TestAskStreamSlowReaderEnds(t *testing.T) {
	c := New(&Options{})
	c.asks.init()
	c.asks.writeTimeout = 100 * time.Millisecond
	p := &pageAsk{id: "slow", agent: "a", changed: make(chan struct{})}
	big := strings.Repeat("x", 4<<10)
	for i := range 256 { // 1 MiB of events, none of them the end
		p.emit("progress", map[string]any{"n": i, "text": big})
	}
	c.asks.byID[p.id] = p

	returned := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(returned)
		c.serveAskEvents(w, r, p)
	}))
	srv.Listener = smallBuffers{srv.Listener}
	srv.Start()
	t.Cleanup(srv.Close)

	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(conn, "GET /api/asks/slow/events HTTP/1.1\r\nHost: %s\r\n\r\n", srv.Listener.Addr())

	select {
	case <-returned:
	case <-time.After(time.Minute): // a bound for a hang, not a measure
		t.Fatal("the stream's handler still runs a minute after its reader stopped reading")
	}
	// The server closed the connection: what the client reads, once it
	// does, ends (EOF or a reset) short of the 1 MiB it was sent.
	conn.SetReadDeadline(time.Now().Add(time.Minute))
	n := 0
	buf := make([]byte, 64<<10)
	for {
		m, err := conn.Read(buf)
		n += m
		if err != nil {
			if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("the connection is still open after the handler returned (%d bytes read)", n)
			}
			break
		}
	}
	if n >= 256*len(big) {
		t.Errorf("the client read %d bytes, the whole stream: the writes did not block", n)
	}
}
