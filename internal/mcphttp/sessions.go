package mcphttp

import (
	"container/list"
	"errors"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Reasons a session id is refused; the client only ever sees 404 "session
// not found", these are for logs and tests.
var (
	errUnknownSession = errors.New("unknown or expired session")
	errWrongIdentity  = errors.New("session belongs to another credential")
)

// ErrTooManySessions is why an initialize was refused: the handler holds as
// many sessions as its cap allows, and none has been idle long enough to be
// forgotten. The client gets 503; a live session is never evicted to make
// room, since that would hand one client's flood to every other client as a
// 404.
var ErrTooManySessions = errors.New("too many open sessions")

// ErrClientSessions is why an initialize was refused: its client (the
// credential it presents, or its remote address when that is not loopback)
// holds its share of the sessions (Options.MaxSessionsPerClient), and none
// of its own is idle enough to be reclaimed. The rest of the cap is kept for
// everyone else.
var ErrClientSessions = errors.New("this client holds its share of the open sessions")

// sessionTable remembers which credential created each session id. It is
// strict: an id it did not see created is refused, so a forgotten binding
// can never be picked up by another credential. A refused client gets 404,
// and the spec tells it what to do then: initialize again.
//
// The table is bounded: an initialize first reserves a slot (reserve),
// counted with the bindings, and the slot becomes the binding (bind) or is
// given back (unreserve). Bindings idle past the TTL are pruned from the
// cold end of an LRU list. At the cap, the oldest binding idle for at least
// reclaimIdle with no request in flight is reclaimed to make room (1,024
// idle initializes from one client used to refuse every new client for the
// TTL, 30 minutes); a session with a request in flight, an SSE stream
// included, never is. Only when none is idle enough does an initialize get
// ErrTooManySessions. Both kinds of dropped binding are handed to onExpire
// (outside the lock) so that whatever serves the session closes it too; its
// client's next request gets 404, and the spec's answer to that is a new
// initialize, which nothing lost.
//
// One client (a credential, or a remote address that is not loopback) holds
// at most perClient bindings: past it, it reclaims its own idle sessions or
// is refused (ErrClientSessions), never anyone else's. Without a token every
// local caller has the same empty credential and the loopback address, so
// they share the whole cap: nothing tells them apart.
type sessionTable struct {
	max         int
	perClient   int
	ttl         time.Duration
	reclaimIdle time.Duration
	now         func() time.Time
	onExpire    func(id string) // may be nil
	sharedAddr  func(netip.Addr) bool

	// limit bounds how fast new sessions are created (nil: no bound). It
	// has its own lock; it is only called with mu held so that a refusal
	// by the rate and the reservation are one decision.
	limit *rate.Limiter

	mu       sync.Mutex               // protects following fields
	ids      map[string]*list.Element // of *binding
	lru      list.List                // front: most recently used
	reserved int                      // initializes in flight, each holding a slot
	byCred   map[string]int           // bindings and reserved slots of each non-empty credential
	byAddr   map[netip.Addr]int       // of each remote address with a share
}

type binding struct {
	id, cred string
	addr     netip.Addr
	lastUsed time.Time
	inflight int // requests on the session being served; guarded by the table's mu
}

func newSessionTable(o *Options) *sessionTable {
	return &sessionTable{max: o.MaxSessions, perClient: o.MaxSessionsPerClient, ttl: o.SessionIdleTTL, reclaimIdle: o.SessionReclaimIdle,
		now: o.Now, onExpire: o.OnSessionExpired, ids: make(map[string]*list.Element),
		byCred: make(map[string]int), byAddr: make(map[netip.Addr]int),
		sharedAddr: func(a netip.Addr) bool { return !a.IsValid() || a.IsLoopback() },
		limit:      newSessionLimiter(o.SessionsPerSecond, o.SessionBurst)}
}

// newSessionLimiter is the token bucket of new sessions: perSecond refill,
// burst at once, starting full. A rate of 0 or less means no bound (nil).
func newSessionLimiter(perSecond float64, burst int) *rate.Limiter {
	if perSecond <= 0 {
		return nil
	}
	return rate.NewLimiter(rate.Limit(perSecond), burst)
}

// ErrSessionRate is why an initialize was refused: sessions are being
// created faster than the handler allows (a token bucket, see
// Options.SessionsPerSecond). Creating a session is the most expensive thing
// a client can ask for without one; a flood of them is refused cheaply
// while the calls on existing sessions go on.
var ErrSessionRate = errors.New("new sessions are being opened faster than allowed")

// check reports whether cred may use session id, and marks it used with a
// request in flight, which the caller ends with done.
func (t *sessionTable) check(id, cred string) (*binding, error) {
	t.mu.Lock()
	e, ok := t.ids[id]
	if !ok {
		t.mu.Unlock()
		return nil, errUnknownSession
	}
	b := e.Value.(*binding)
	if t.expiredLocked(b) {
		t.removeLocked(e)
		t.mu.Unlock()
		t.expired([]string{id})
		return nil, errUnknownSession
	}
	defer t.mu.Unlock()
	if b.cred != cred {
		return nil, errWrongIdentity
	}
	b.lastUsed = t.now()
	b.inflight++
	t.lru.MoveToFront(e)
	return b, nil
}

// done ends a request check let through on b, and restarts b's idle clock:
// a long request (an SSE stream) counts as use until it ends.
func (t *sessionTable) done(b *binding) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if b.inflight--; b.inflight < 0 {
		panic("mcphttp: a session's request ended twice")
	}
	if e, ok := t.ids[b.id]; ok && e.Value.(*binding) == b {
		b.lastUsed = t.now()
		t.lru.MoveToFront(e)
	}
}

// known is check without marking the session used.
func (t *sessionTable) known(id, cred string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.ids[id]
	switch {
	case !ok || t.expiredLocked(e.Value.(*binding)):
		return errUnknownSession
	case e.Value.(*binding).cred != cred:
		return errWrongIdentity
	}
	return nil
}

// reserve holds a slot for a session an initialize of cred from addr may
// create, reclaiming an idle session if it must (see sessionTable). Decided
// and taken in one critical section, so concurrent initializes cannot
// together pass the cap or a share.
func (t *sessionTable) reserve(cred string, addr netip.Addr) error {
	t.mu.Lock()
	gone := t.pruneLocked()
	err := t.reserveLocked(cred, addr, &gone, true)
	t.mu.Unlock()
	t.expired(gone)
	return err
}

// reserveLocked takes a slot for cred and addr; token says whether it
// takes one of the rate's tokens too (a new session does, a restored one
// does not).
func (t *sessionTable) reserveLocked(cred string, addr netip.Addr, gone *[]string, token bool) error {
	shared := t.sharedAddr(addr)
	// Which sessions must give way for this one, found before anything is
	// taken: a refusal by the rate must not have reclaimed anyone's.
	var victims []*list.Element
	taken := func(e *list.Element) bool { return len(victims) > 0 && victims[0] == e }
	switch {
	case cred != "" && t.byCred[cred] >= t.perClient:
		v := t.reclaimableLocked(func(b *binding) bool { return b.cred == cred })
		if v == nil {
			return ErrClientSessions
		}
		victims = append(victims, v)
	case !shared && t.byAddr[addr] >= t.perClient:
		v := t.reclaimableLocked(func(b *binding) bool { return b.addr == addr })
		if v == nil {
			return ErrClientSessions
		}
		victims = append(victims, v)
	}
	if len(t.ids)+t.reserved-len(victims) >= t.max {
		v := t.reclaimableLocked(func(b *binding) bool { return !taken(t.ids[b.id]) })
		if v == nil {
			return ErrTooManySessions
		}
		victims = append(victims, v)
	}
	if token && !t.takeTokenLocked() {
		return ErrSessionRate
	}
	for _, v := range victims {
		*gone = append(*gone, v.Value.(*binding).id)
		t.removeLocked(v)
	}
	t.reserved++
	t.countLocked(cred, addr, +1)
	return nil
}

// reclaimableLocked is the oldest binding that match accepts with no
// request in flight and idle for at least reclaimIdle, or nil.
func (t *sessionTable) reclaimableLocked(match func(*binding) bool) *list.Element {
	now := t.now()
	for e := t.lru.Back(); e != nil; e = e.Prev() {
		b := e.Value.(*binding)
		if b.inflight > 0 {
			continue
		}
		if now.Sub(b.lastUsed) < t.reclaimIdle {
			// The list is by last use: every binding after is as recent.
			return nil
		}
		if match(b) {
			return e
		}
	}
	return nil
}

// countLocked adds n to the counts of cred and addr, for those with a share.
func (t *sessionTable) countLocked(cred string, addr netip.Addr, n int) {
	if cred != "" {
		if t.byCred[cred] += n; t.byCred[cred] <= 0 {
			delete(t.byCred, cred)
		}
	}
	if !t.sharedAddr(addr) {
		if t.byAddr[addr] += n; t.byAddr[addr] <= 0 {
			delete(t.byAddr, addr)
		}
	}
}

// takeTokenLocked takes one new session from the rate's bucket, at the
// table's clock (Options.Now), so tests that move time move the refill too.
func (t *sessionTable) takeTokenLocked() bool {
	return t.limit == nil || t.limit.AllowN(t.now(), 1)
}

// unreserve gives back a slot of cred and addr that no session took.
func (t *sessionTable) unreserve(cred string, addr netip.Addr) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.reserved--; t.reserved < 0 {
		panic("mcphttp: session slot given back twice")
	}
	t.countLocked(cred, addr, -1)
}

// bind turns a reserved slot into the binding of session id to cred and
// addr (the slot's count becomes the binding's).
func (t *sessionTable) bind(id, cred string, addr netip.Addr) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.reserved--; t.reserved < 0 {
		panic("mcphttp: session bound without a reserved slot")
	}
	if e, ok := t.ids[id]; ok {
		// A server never reuses an id; if it did, the newest creator wins.
		t.removeLocked(e)
	}
	t.ids[id] = t.lru.PushFront(&binding{id: id, cred: cred, addr: addr, lastUsed: t.now()})
}

// adopt binds id to cred and addr without an initialize: a session
// restored from a record that outlives the process
// (Options.RestoreSession). It takes a slot as an initialize would (the
// caps, the shares, reclaiming an idle session), without the rate's token:
// the session exists already.
func (t *sessionTable) adopt(id, cred string, addr netip.Addr) error {
	t.mu.Lock()
	if e, ok := t.ids[id]; ok {
		// Restored by a concurrent request meanwhile.
		defer t.mu.Unlock()
		if e.Value.(*binding).cred != cred {
			return errWrongIdentity
		}
		return nil
	}
	gone := t.pruneLocked()
	err := t.reserveLocked(cred, addr, &gone, false)
	if err == nil {
		t.reserved--
		t.ids[id] = t.lru.PushFront(&binding{id: id, cred: cred, addr: addr, lastUsed: t.now()})
	}
	t.mu.Unlock()
	t.expired(gone)
	return err
}

// forget drops id, which its server has already ended (a DELETE, a 404).
func (t *sessionTable) forget(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.ids[id]; ok {
		t.removeLocked(e)
	}
}

func (t *sessionTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.ids)
}

// pruneLocked drops the bindings idle past the TTL and returns their ids.
func (t *sessionTable) pruneLocked() []string {
	var gone []string
	for back := t.lru.Back(); back != nil && t.expiredLocked(back.Value.(*binding)); back = t.lru.Back() {
		gone = append(gone, back.Value.(*binding).id)
		t.removeLocked(back)
	}
	return gone
}

// expired hands dropped ids to onExpire; never called under the lock (the
// callback closes a session, which may do I/O).
func (t *sessionTable) expired(ids []string) {
	if t.onExpire == nil {
		return
	}
	for _, id := range ids {
		t.onExpire(id)
	}
}

func (t *sessionTable) expiredLocked(b *binding) bool {
	return t.ttl > 0 && t.now().Sub(b.lastUsed) > t.ttl
}

func (t *sessionTable) removeLocked(e *list.Element) {
	b := e.Value.(*binding)
	delete(t.ids, b.id)
	t.lru.Remove(e)
	t.countLocked(b.cred, b.addr, -1)
}
