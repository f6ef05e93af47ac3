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

// admit counts c, making room by evicting one connection if it must. It
// returns the connection to close (outside the lock), and whether c was
// admitted.
func (t *connTable) admit(b *Budget, c *countedConn) (victim *countedConn, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	shared := b.sharedAddr(c.addr)
	full := t.count >= b.maxConns
	overShare := !shared && t.byAddr[c.addr] >= b.addrShare
	switch {
	case overShare:
		victim = t.oldestLocked(func(v *countedConn) bool { return v.addr == c.addr })
	case full:
		victim = t.oldestLocked(nil)
	}
	if (full || overShare) && victim == nil {
		return nil, false
	}
	if victim != nil {
		t.removeLocked(victim)
	}
	t.count++
	if !shared {
		t.byAddr[c.addr]++
	}
	if c.key != "" {
		t.byKey[c.key] = c
	}
	c.elem = t.waiting.PushBack(c)
	return victim, true
}

// oldestLocked is the connection to evict: the oldest unproved one not in
// a request, else the oldest one not in a request; of those match accepts
// (nil: any).
func (t *connTable) oldestLocked(match func(*countedConn) bool) *countedConn {
	for _, l := range []*list.List{&t.waiting, &t.idle} {
		for e := l.Front(); e != nil; e = e.Next() {
			if c := e.Value.(*countedConn); match == nil || match(c) {
				return c
			}
		}
	}
	return nil
}

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
