package mcphttp

import (
	"container/list"
	"context"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// The connection budget decides, when a listener is at its cap, which
// connection gives way to a new one. Refusing the new one (as a plain cap
// does) hands the listener to whoever fills it first: 1,100 connections
// that trickle their headers, each reopened when the header deadline closes
// it, kept every new client out, the token holder included, since the
// token is read only from a request that was never allowed to arrive.
//
// So a connection is counted at once, but its place is its own only while
// it is in a request ([Budget.Handler] runs) or once a request on it
// passed the checks ([Vouch]: Host, Origin and the bearer token). At the
// cap the new connection takes the place of, in order:
//
//  1. the oldest connection not in a request that has not proved itself
//     (it has sent no request, only part of one, or only refused ones);
//  2. else the oldest connection not in a request (a keep-alive between
//     requests, which a server may close at any time: clients dial again,
//     as after http.Server's IdleTimeout);
//  3. else none, and the new one is refused with 503.
//
// Of those, a connection whose client's request waits unread in its socket
// is passed over (see admit): it is in a request in all but name, net/http
// not having read it yet. When all of the few peeked at are, the new one
// is refused: the server is behind on reading.
//
// A flood of connections that say nothing then evicts itself: its newest
// connection lives as long as the flood takes to open MaxConns more, and a
// client that sends its request at once is in a request (so kept) in that
// time. A connection in a request is never closed by the budget; the body
// deadline bounds how long a request can hold one without sending.
//
// One remote address that is not loopback holds at most its share
// (MaxConnsPerAddress); past it its new connection takes the place of its
// own oldest one as above, never another address's. Loopback is every
// local process, so it has no share of its own: the whole cap.
type connTable struct {
	mu      sync.Mutex              // protects following fields
	byKey   map[string]*countedConn // by local and remote address: how a request finds its connection
	byAddr  map[netip.Addr]int      // open connections by remote address, for addresses with a share
	waiting list.List               // not in a request, unproved; front: oldest
	idle    list.List               // not in a request, proved; front: oldest
	count   int
}

type countedConn struct {
	net.Conn
	b    *Budget
	key  string
	addr netip.Addr

	// guarded by b.conns.mu
	active  int           // requests being served on it
	proven  bool          // a request on it passed the checks
	elem    *list.Element // in waiting or idle while active is 0
	removed bool          // no longer counted (closed, or evicted)
}

// connKey is the context key of a request's *countedConn.
type connKey struct{}

func (t *connTable) init() {
	t.byKey = make(map[string]*countedConn)
	t.byAddr = make(map[netip.Addr]int)
}

// open reports the connections counted, and how many are in a request.
func (t *connTable) open() (open, busy int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.count, t.count - t.waiting.Len() - t.idle.Len()
}

func connKeyOf(local, remote net.Addr) string {
	if local == nil || remote == nil {
		return ""
	}
	return local.String() + " " + remote.String()
}

func addrOf(a net.Addr) netip.Addr {
	if a == nil {
		return netip.Addr{}
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// maxPeeked bounds the connections peeked at for one admission: a peek is
// a system call, and a flood must not make every Accept cost one per open
// connection.
const maxPeeked = 8

// maxAdmitRounds bounds how often admit collects candidates again when
// every one it peeked at entered a request (or closed) meanwhile.
const maxAdmitRounds = 3

// admit counts c, making room by evicting one connection if it must. It
// returns the connection to close (outside the lock), and whether c was
// admitted.
//
// A candidate with a request waiting unread in its socket is not evicted:
// its client wrote a request that net/http has not read yet (its goroutine for
// the connection has not run), and a moment later it would be in a
// request, where it is never evicted. Evicting it would lose a request
// whose client did nothing wrong, and a flood of accepts is exactly when
// those goroutines run late. The peek is a system call, so the candidates
// are collected under the lock, peeked at outside it, and the choice made
// again under the lock, on what is still true then. When every candidate
// peeked at has a request waiting, c is refused (503, try again) rather
// than one of them evicted: the server is behind on reading, which is
// overload, and the one that waits least is the newcomer.
func (t *connTable) admit(b *Budget, c *countedConn) (victim *countedConn, ok bool) {
	for range maxAdmitRounds {
		t.mu.Lock()
		match, need := t.needRoomLocked(b, c)
		if !need {
			t.countLocked(b, c)
			t.mu.Unlock()
			return nil, true
		}
		cands := t.candidatesLocked(match, maxPeeked)
		t.mu.Unlock()
		if len(cands) == 0 {
			return nil, false
		}

		waiting := make([]bool, len(cands))
		for i, v := range cands {
			waiting[i] = requestWaiting(v.Conn)
		}

		t.mu.Lock()
		match, need = t.needRoomLocked(b, c)
		if !need {
			// Room was made meanwhile (a connection closed).
			t.countLocked(b, c)
			t.mu.Unlock()
			return nil, true
		}
		busy := false
		for i, v := range cands {
			if !v.evictableLocked() || match != nil && !match(v) {
				continue
			}
			if waiting[i] {
				busy = true
				continue
			}
			t.removeLocked(v)
			t.countLocked(b, c)
			t.mu.Unlock()
			return v, true
		}
		t.mu.Unlock()
		if busy {
			return nil, false
		}
		// Every candidate entered a request or closed: look again.
	}
	return nil, false
}

// needRoomLocked reports whether c can be counted only in the place of
// another connection, and which connections may give way to it (nil: any).
func (t *connTable) needRoomLocked(b *Budget, c *countedConn) (match func(*countedConn) bool, need bool) {
	if !b.sharedAddr(c.addr) && t.byAddr[c.addr] >= b.addrShare {
		return func(v *countedConn) bool { return v.addr == c.addr }, true
	}
	return nil, t.count >= b.maxConns
}

// countLocked counts c as open, not in a request and not proved.
func (t *connTable) countLocked(b *Budget, c *countedConn) {
	t.count++
	if !b.sharedAddr(c.addr) {
		t.byAddr[c.addr]++
	}
	if c.key != "" {
		t.byKey[c.key] = c
	}
	c.elem = t.waiting.PushBack(c)
}

// candidatesLocked returns, in the order they give way, at most n of the
// connections that may be evicted: the unproved not in a request, oldest
// first, then the proved not in a request; of those match accepts (nil:
// any).
func (t *connTable) candidatesLocked(match func(*countedConn) bool, n int) []*countedConn {
	var out []*countedConn
	for _, l := range []*list.List{&t.waiting, &t.idle} {
		for e := l.Front(); e != nil && len(out) < n; e = e.Next() {
			if c := e.Value.(*countedConn); match == nil || match(c) {
				out = append(out, c)
			}
		}
	}
	return out
}

// evictableLocked reports whether c may still give way: counted, and not
// in a request (so in a list).
func (c *countedConn) evictableLocked() bool { return !c.removed && c.elem != nil }

func (t *connTable) removeLocked(c *countedConn) {
	if c.removed {
		return
	}
	c.removed = true
	t.count--
	if n, ok := t.byAddr[c.addr]; ok {
		if n <= 1 {
			delete(t.byAddr, c.addr)
		} else {
			t.byAddr[c.addr] = n - 1
		}
	}
	if t.byKey[c.key] == c {
		delete(t.byKey, c.key)
	}
	if c.elem != nil {
		c.listOf(t).Remove(c.elem)
		c.elem = nil
	}
}

// listOf is the list c's element is in (c's state is guarded by t.mu).
func (c *countedConn) listOf(t *connTable) *list.List {
	if c.proven {
		return &t.idle
	}
	return &t.waiting
}

// enter finds r's connection and marks it in a request; nil when r did not
// come through a wrapped listener.
func (t *connTable) enter(r *http.Request) *countedConn {
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if local == nil {
		return nil
	}
	key := local.String() + " " + r.RemoteAddr
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.byKey[key]
	if c == nil || c.removed {
		return nil
	}
	if c.active++; c.active == 1 && c.elem != nil {
		c.listOf(t).Remove(c.elem)
		c.elem = nil
	}
	return c
}

// leave ends one request on c; with none left, c goes to the back of its
// list: the most recently used.
func (t *connTable) leave(c *countedConn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c.active--; c.active == 0 && !c.removed {
		c.elem = c.listOf(t).PushBack(c)
	}
}

// Vouch marks the connection r arrived on as proved: a request on it
// passed the checks of whoever calls it (Host and Origin, and the bearer
// token when there is one). At a full listener such a connection gives
// way only after every unproved one. The Handler and RequireBearer call it;
// a handler with checks of its own (the studio's gate) calls it when they
// pass. A request that did not come through [Budget.Handler] is ignored.
func Vouch(r *http.Request) {
	c, _ := r.Context().Value(connKey{}).(*countedConn)
	if c == nil {
		return
	}
	t := &c.b.conns
	t.mu.Lock()
	defer t.mu.Unlock()
	if !c.proven && !c.removed {
		// In a request (the caller's), so in no list: nothing to move.
		c.proven = true
	}
}

func (c *countedConn) Close() error {
	t := &c.b.conns
	t.mu.Lock()
	t.removeLocked(c)
	t.mu.Unlock()
	return c.Conn.Close()
}

// CloseQuiet closes every counted connection not in a request, and reports
// how many. A server that is shutting down calls it: http.Server.Shutdown
// waits up to 5 s for a connection that has not sent its first request (a
// client's spare dial, parked by its Transport when another connection
// served the request), which is as long as a caller's whole shutdown
// budget. A connection in a request is left to Shutdown.
func (b *Budget) CloseQuiet() int {
	t := &b.conns
	t.mu.Lock()
	var quiet []*countedConn
	for _, l := range []*list.List{&t.waiting, &t.idle} {
		for e := l.Front(); e != nil; e = e.Next() {
			quiet = append(quiet, e.Value.(*countedConn))
		}
	}
	for _, c := range quiet {
		t.removeLocked(c)
	}
	t.mu.Unlock()
	// Outside the lock: a Close may block on the network.
	for _, c := range quiet {
		c.Conn.Close()
	}
	return len(quiet)
}

// Shutdown runs srv.Shutdown(ctx), srv serving b's Listener, closing the
// connections not in a request until it returns ([Budget.CloseQuiet] says
// why): Shutdown stops accepting first, so what is quiet is closed, and a
// connection whose request ends is closed by Shutdown itself.
func (b *Budget) Shutdown(ctx context.Context, srv *http.Server) error {
	done := make(chan error, 1)
	go func() { done <- srv.Shutdown(ctx) }()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		b.CloseQuiet()
		select {
		case err := <-done:
			return err
		case <-tick.C:
		}
	}
}
