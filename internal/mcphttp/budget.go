package mcphttp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync/atomic"
	"time"
)

// A Budget is what one process lets its clients cost, whoever they are, the
// way a production proxy does it (Envoy's overload manager and per-connection
// buffer limits, nginx's client_body_timeout):
//
//   - Connections: at most MaxConns open at once on a listener wrapped by
//     [Budget.Listener]. At the cap a new connection takes the place of the
//     oldest one that is not in a request and has not yet proved itself
//     (see conns.go): a flood of connections that trickle their headers,
//     or open and say nothing, evicts itself, and a client that sends a
//     request at once is served. Only when every connection is in a request
//     (or has proved itself and a remote address holds its share) does the
//     new one get a 503 with a JSON-RPC error, closed at once.
//   - Time: every request must deliver its whole body within BodyTimeout of
//     its headers ([Budget.Handler] sets the read deadline; reading the
//     body clears it, so an SSE stream that follows is not cut). A client
//     that sends one byte every few seconds is cut off at the deadline.
//   - Memory: request bodies are buffered, once, against one byte budget
//     shared by every handler of the process; a body that does not fit is
//     refused with 503 before it is read (a known Content-Length) or as
//     soon as it overflows (chunked), never buffered without bound.
//
// One Budget serves the whole process: the studio shares its own between
// every agent route, an agent server has one.
type Budget struct {
	maxConns    int
	addrShare   int // connections one remote address may hold (not loopback)
	maxBytes    int64
	bodyTimeout time.Duration
	// sharedAddr reports whether an address stands for many clients, so
	// that it gets no share of its own (loopback: every local process has
	// it). A variable for tests, which have only loopback to dial from.
	sharedAddr func(netip.Addr) bool

	conns connTable    // open connections on wrapped listeners
	bytes atomic.Int64 // body bytes held

	refusedConns  atomic.Int64
	evictedConns  atomic.Int64
	refusedBodies atomic.Int64
}

// Defaults of a Budget.
const (
	// DefaultMaxConns bounds the open connections of a listener. A local
	// user's tools need a handful; 1024 idle connections cost about 20 MB.
	DefaultMaxConns = 1024
	// DefaultMaxInFlightBytes bounds the request bodies a process holds at
	// once: four bodies of the largest size.
	DefaultMaxInFlightBytes = 4 * DefaultMaxBodyBytes
	// DefaultBodyTimeout is how long a request may take to send its body
	// after its headers; as long as http.Server's ReadHeaderTimeout the
	// servers here use. A 4 MiB body needs 400 kB/s to make it.
	DefaultBodyTimeout = 10 * time.Second
)

// BudgetOptions configure NewBudget. The zero value of every field means its
// default.
type BudgetOptions struct {
	MaxConns int // default DefaultMaxConns
	// MaxConnsPerAddress bounds the connections of one remote address that
	// is not loopback (a studio serving a network behind a token); default
	// three quarters of MaxConns, so that one address never holds them all.
	MaxConnsPerAddress int
	MaxInFlightBytes   int64         // default DefaultMaxInFlightBytes
	BodyTimeout        time.Duration // default DefaultBodyTimeout
}

// NewBudget returns a Budget.
func NewBudget(opts *BudgetOptions) *Budget {
	var o BudgetOptions
	if opts != nil {
		o = *opts
	}
	if o.MaxConns <= 0 {
		o.MaxConns = DefaultMaxConns
	}
	if o.MaxInFlightBytes <= 0 {
		o.MaxInFlightBytes = DefaultMaxInFlightBytes
	}
	if o.BodyTimeout <= 0 {
		o.BodyTimeout = DefaultBodyTimeout
	}
	if o.MaxConnsPerAddress <= 0 {
		o.MaxConnsPerAddress = max(1, o.MaxConns*3/4)
	}
	b := &Budget{maxConns: o.MaxConns, addrShare: o.MaxConnsPerAddress, maxBytes: o.MaxInFlightBytes, bodyTimeout: o.BodyTimeout,
		sharedAddr: func(a netip.Addr) bool { return !a.IsValid() || a.IsLoopback() }}
	b.conns.init()
	return b
}

// ErrOverBudget is why a body was refused: the process holds as many bytes
// of bodies as its budget allows. The client gets 503 and may try again.
var ErrOverBudget = errors.New("the server is holding as many request bytes as it allows")

// BudgetStats are a Budget's current values and counters.
type BudgetStats struct {
	Conns, InFlightBytes        int64
	RefusedConns, RefusedBodies int64
	// EvictedConns counts connections closed to make room for a new one:
	// each was not in a request and had not proved itself (or was idle).
	EvictedConns int64
	// BusyConns is how many of Conns are in a request now.
	BusyConns int64
}

// Stats returns b's current values.
func (b *Budget) Stats() BudgetStats {
	open, busy := b.conns.open()
	return BudgetStats{
		Conns: int64(open), BusyConns: int64(busy), InFlightBytes: b.bytes.Load(),
		RefusedConns: b.refusedConns.Load(), RefusedBodies: b.refusedBodies.Load(),
		EvictedConns: b.evictedConns.Load(),
	}
}

// reserve takes n bytes from the budget, or reports that they do not fit.
// Decide and take in one step (CompareAndSwap), so concurrent bodies cannot
// together pass the limit. A small body (see smallBody) may also use the
// reserve above the limit, a quarter of it: large bodies filling the budget
// then still leave room for the ordinary calls of everyone else.
func (b *Budget) reserve(n int64, small bool) bool {
	limit := b.maxBytes
	if small {
		limit += b.maxBytes / 4
	}
	for {
		cur := b.bytes.Load()
		if cur+n > limit {
			b.refusedBodies.Add(1)
			return false
		}
		if b.bytes.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

func (b *Budget) release(n int64) {
	if b.bytes.Add(-n) < 0 {
		panic("mcphttp: budget released more bytes than it reserved")
	}
}

// Handler wraps next so that every request has BodyTimeout to send its
// body: the read deadline is set before next runs, and [ReadRequest]
// clears it once the body is in. A handler that never reads the body (a
// GET of the studio's API) keeps the deadline, which also bounds how long
// net/http spends discarding what it did not read.
//
// It also tells the connection budget that the request's connection is in
// a request (never evicted while it is), and lets the checks behind it
// vouch for the connection ([Vouch]).
func (b *Budget) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// An error means the writer cannot set deadlines (a test's
		// httptest.ResponseRecorder); there is no connection to protect then.
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(b.bodyTimeout))
		if c := b.conns.enter(r); c != nil {
			defer b.conns.leave(c)
			r = r.WithContext(context.WithValue(r.Context(), connKey{}, c))
		}
		next.ServeHTTP(w, r)
	})
}

// clearDeadline lifts the body deadline once the body has been read: what
// follows (the response, an SSE stream) may take as long as it takes, and
// net/http's background read, which notices a client hanging up, must not
// fail on the deadline and cancel the request.
func clearDeadline(w http.ResponseWriter) {
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
}

// Listener wraps ln so that at most MaxConns of its connections are open at
// once (see conns.go for which connection gives way to a new one). A
// connection that finds no room is answered 503 and closed by Accept
// itself, without a goroutine: the answer fits in the socket's buffer.
func (b *Budget) Listener(ln net.Listener) net.Listener { return &capListener{Listener: ln, b: b} }

type capListener struct {
	net.Listener
	b *Budget
}

// overloadResponse is what a connection past the cap reads.
var overloadResponse = func() []byte {
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":null,"error":{"code":%d,"message":"server overloaded: too many open connections; try again"}}`+"\n", CodeServerOverloaded)
	return fmt.Appendf(nil, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}()

// refuseWriteTimeout bounds the write of overloadResponse; it normally
// takes no time, as the kernel buffers it.
const refuseWriteTimeout = 100 * time.Millisecond

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		cc := &countedConn{Conn: c, b: l.b, key: connKeyOf(c.LocalAddr(), c.RemoteAddr()), addr: addrOf(c.RemoteAddr())}
		victim, ok := l.b.conns.admit(l.b, cc)
		if victim != nil {
			// Closed outside the table's lock: a close is a system call.
			l.b.evictedConns.Add(1)
			victim.Conn.Close()
		}
		if ok {
			return cc, nil
		}
		l.b.refusedConns.Add(1)
		c.SetWriteDeadline(time.Now().Add(refuseWriteTimeout))
		c.Write(overloadResponse)
		if tc, ok := c.(*net.TCPConn); ok {
			// Our side's FIN first, right behind the answer, so the client
			// is more likely to read the 503 than the reset that closing
			// with its request unread sends.
			tc.CloseWrite()
		}
		c.Close()
	}
}
