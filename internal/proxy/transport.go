package proxy

// Keep-alive to the agents, and the proof that a request on a kept
// connection was not sent.
//
// A request written to the idle connection of an agent that has just died
// fails with EOF or a reset, which is also what a process dying
// mid-request produces: net/http does not send such a POST again, and the
// caller could only be told "outcome unknown". That is why the proxy used
// to dial every request. It keeps connections now, and proves instead:
//
//   - Every connection is an agentConn, which counts the writes to its
//     socket, each before it begins. Before the first byte of a request on a connection that
//     has answered before, it peeks at the socket without blocking: a peer
//     that closed it (its FIN, or a reset, already here) fails the write
//     with ErrAgentClosed and nothing written. net/http then takes it as
//     its own nothingWrittenError and sends the request on another
//     connection, or dials, and a dead agent refuses the dial: Redial's
//     case since the beginning.
//   - Redial reads, per request, the connections it was given
//     (httptrace's GotConn) and their byte counts: a failed request none
//     of whose bytes reached a socket did not run, whatever the error says
//     (net/http answers "server closed idle connection" to a POST whose
//     connection it found closed when it came to write, and does not send
//     it again). Redial sends it again, at most maxUnsentResends times,
//     and otherwise reports it with ErrNotSent.
//
// What remains is a request written in the instant the agent dies, its
// bytes in the socket before the FIN arrives: the same instant as an agent
// dying between accepting a fresh connection and reading it, which no
// connection policy can prove either way. Idle connections are closed by
// the proxy after idleConnTimeout, well before the agents' own idle
// timeout (agent serve: 2 minutes), so that in normal operation an agent
// never closes a connection the proxy may be writing to.

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	// idleConnTimeout: under agent serve's http.Server IdleTimeout (2m).
	idleConnTimeout = 30 * time.Second
	// maxIdlePerAgent: kept connections per agent address, enough for the
	// studio's callers at once (the throughput at 256 callers was the
	// dialling's).
	maxIdlePerAgent = 256
)

// ErrAgentClosed is the write error of a kept connection that the agent
// had closed before the request's first byte: nothing was written.
var ErrAgentClosed = errors.New("proxy: the agent closed the connection before the request")

// ErrNotSent wraps the error of a request that provably did not reach the
// agent (no byte of it was written) and was not sent again.
var ErrNotSent = errors.New("proxy: request not sent to the agent")

// NewTransport returns the transport the proxy uses to reach agents on
// loopback: no proxy from the environment, keep-alive with the proof above.
func NewTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil // agents are on loopback; HTTP_PROXY must not capture them
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return newAgentConn(c), nil
	}
	t.MaxIdleConns = 4 * maxIdlePerAgent
	t.MaxIdleConnsPerHost = maxIdlePerAgent
	t.IdleConnTimeout = idleConnTimeout
	t.ForceAttemptHTTP2 = false
	return t
}

// agentConn counts the writes to a connection and checks, before a
// request on a connection that has answered before, that the agent has not
// closed it.
type agentConn struct {
	net.Conn
	raw    syscall.RawConn // nil: no check (not a socket)
	writes atomic.Int64    // writes begun

	answered atomic.Bool // a byte was read since the last write began a request
}

func newAgentConn(c net.Conn) *agentConn {
	ac := &agentConn{Conn: c}
	if sc, ok := c.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			ac.raw = raw
		}
	}
	return ac
}

func (c *agentConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.answered.Store(true)
	}
	return n, err
}

func (c *agentConn) Write(p []byte) (int, error) {
	if c.answered.Swap(false) && c.raw != nil {
		if err := peerClosed(c.raw); err != nil {
			return 0, err
		}
	}
	// Counted before the write: once a write may have put a byte on the
	// wire, the request is not provably unsent, even to a reader that
	// looks before this write returns.
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// sendProbe records the connections one request was given, with the
// writes each had begun when it was given. It is its own ClientTrace, and
// keeps the first connection (nearly always the only one) in place: the
// trace, its hook and the slice were three allocations per request, the
// hook alone is one.
type sendProbe struct {
	trace httptrace.ClientTrace
	mu    sync.Mutex // protects conns and first (GotConn may run on net/http's goroutines)
	conns []connMark // first[:0] until the probe is given a connection
	first [1]connMark
	other bool // a connection that is not an agentConn: nothing can be proved
}

type connMark struct {
	c  *agentConn
	at int64
}

// with returns req carrying the probe's trace.
func (p *sendProbe) with(req *http.Request) *http.Request {
	p.conns = p.first[:0]
	p.trace.GotConn = p.gotConn
	return req.WithContext(httptrace.WithClientTrace(req.Context(), &p.trace))
}

func (p *sendProbe) gotConn(info httptrace.GotConnInfo) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ac, ok := info.Conn.(*agentConn); ok {
		p.conns = append(p.conns, connMark{ac, ac.writes.Load()})
	} else {
		p.other = true
	}
}

// unsent reports whether the request was given connections and began no
// write on any of them.
func (p *sendProbe) unsent() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.other || len(p.conns) == 0 {
		return false
	}
	for _, m := range p.conns {
		if m.c.writes.Load() != m.at {
			return false
		}
	}
	return true
}
