package console

import (
	"container/list"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// The limiter of /login's attempts. The studio's token may be whatever the
// person chose, so a sign-in form that answers every guess at once is an
// oracle for guessing it. What it must not become is a way for one client
// to lock the person out, so it counts failures per source address, never
// globally:
//
//   - An address gets loginFreeFailures wrong tokens in a row; after that
//     each further attempt must wait a delay that doubles with every
//     failure (1 s, 2 s, 4 s, … up to loginMaxDelay). An attempt before
//     its time is answered 429 with Retry-After, without the token being
//     compared: the refusal is the throttle, so it must not say whether
//     the guess was right. A correct sign-in forgets the address's
//     failures.
//   - A flood from many addresses (a global slow-down, not a lock-out):
//     past loginGlobalRate failures a minute over all addresses, every
//     address is in backoff from its first failure instead of its sixth.
//     An address that has not failed is always heard.
//   - An address that every local client shares (loopback: every process
//     of the machine, and every client of a reverse proxy on it) cannot
//     be told from the person. There the token is compared first, and a
//     correct one always signs in; a wrong one in backoff is answered
//     429 rather than 401. Refusing unheard there would let any local
//     process keep the person out of the console for as long as it likes,
//     and would protect nothing: the same process can try tokens on the
//     studio's API as a bearer. On loopback the token's length is the
//     defence (docs/SECURITY.md).
//
// State is bounded: at most loginMaxAddrs addresses, the least recently
// seen forgotten first, and an address's failures are forgotten after
// loginForget without one. IPv6 addresses count by their /64, which one
// host usually holds whole.
const (
	loginFreeFailures = 5
	loginFirstDelay   = time.Second
	loginMaxDelay     = 5 * time.Minute
	loginForget       = 15 * time.Minute
	loginMaxAddrs     = 4096
	loginGlobalRate   = 100 // failures a minute over all addresses
)

type loginLimiter struct {
	mu     sync.Mutex                     // protects following fields
	byAddr map[netip.Prefix]*list.Element // of *loginAddr, guarded by mu
	lru    list.List                      // of *loginAddr; front: least recently seen
	global *rate.Limiter                  // failures over all addresses

	// now and shared are variables for tests: time, and which addresses
	// stand for many clients (tests can dial only from loopback).
	now    func() time.Time
	shared func(netip.Addr) bool
}

type loginAddr struct {
	key      netip.Prefix
	failures int       // in a row
	last     time.Time // of the last failure
	until    time.Time // no attempt heard before it
}

func newLoginLimiter() *loginLimiter {
	return &loginLimiter{
		byAddr: make(map[netip.Prefix]*list.Element),
		global: rate.NewLimiter(rate.Limit(float64(loginGlobalRate)/60), loginGlobalRate),
		now:    time.Now,
		shared: func(a netip.Addr) bool { return !a.IsValid() || a.IsLoopback() },
	}
}

func loginKey(a netip.Addr) netip.Prefix {
	a = a.Unmap()
	bits := 32
	if a.Is6() {
		bits = 64
	}
	p, _ := a.Prefix(bits)
	return p
}

// admit reports whether an attempt from a is heard before its token is
// compared, and if not, how long a must wait. A shared address is always
// heard (see the top of the file: its refusal comes after the compare,
// from failed).
func (l *loginLimiter) admit(a netip.Addr) (wait time.Duration, ok bool) {
	if l.shared(a) {
		return 0, true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.byAddr[loginKey(a)]
	if e == nil {
		return 0, true
	}
	if w := e.Value.(*loginAddr).until.Sub(l.now()); w > 0 {
		return w, false
	}
	return 0, true
}

// failed records a wrong token from a, and returns how long a must now
// wait before its next attempt is heard (0: at once).
func (l *loginLimiter) failed(a netip.Addr) time.Duration {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	pressure := !l.global.AllowN(now, 1)
	key := loginKey(a)
	e := l.byAddr[key]
	if e == nil {
		for l.lru.Len() >= loginMaxAddrs {
			delete(l.byAddr, l.lru.Remove(l.lru.Front()).(*loginAddr).key)
		}
		e = l.lru.PushBack(&loginAddr{key: key})
		l.byAddr[key] = e
	} else {
		l.lru.MoveToBack(e)
	}
	s := e.Value.(*loginAddr)
	if now.Sub(s.last) > loginForget {
		s.failures = 0
	}
	s.failures++
	s.last = now
	free := loginFreeFailures
	if pressure {
		free = 0
	}
	over := s.failures - free
	if over <= 0 {
		return 0
	}
	d := loginMaxDelay
	if over <= 20 { // past 2^20 s the cap holds anyway
		d = min(loginFirstDelay<<(over-1), loginMaxDelay)
	}
	s.until = now.Add(d)
	return d
}

// succeeded forgets a's failures.
func (l *loginLimiter) succeeded(a netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.byAddr[loginKey(a)]; e != nil {
		delete(l.byAddr, e.Value.(*loginAddr).key)
		l.lru.Remove(e)
	}
}
