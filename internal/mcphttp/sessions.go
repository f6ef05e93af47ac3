package mcphttp

import (
	"container/list"
	"errors"
	"sync"
	"time"
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

// sessionTable remembers which credential created each session id. It is
// strict: an id it did not see created is refused, so a forgotten binding
// can never be picked up by another credential. A refused client gets 404,
// and the spec tells it what to do then: initialize again.
//
// The table is bounded without eviction: an initialize first reserves a
// slot (reserve), counted with the bindings, and gets ErrTooManySessions
// when there is none; the slot becomes the binding (bind) or is given back
// (unreserve). Only idle bindings past the TTL make room; they are pruned
// from the cold end of an LRU list, and handed to onExpire (outside the
// lock) so that whatever serves the session closes it too.
type sessionTable struct {
	max      int
	ttl      time.Duration
	now      func() time.Time
	onExpire func(id string) // may be nil

	rate, burst float64 // new sessions per second, and how many at once

	mu       sync.Mutex               // protects following fields
	ids      map[string]*list.Element // of *binding
	lru      list.List                // front: most recently used
	reserved int                      // initializes in flight, each holding a slot
	tokens   float64                  // new sessions the rate allows now
	refilled time.Time                // when tokens was last brought up to date
}

type binding struct {
	id, cred string
	lastUsed time.Time
}

func newSessionTable(max int, ttl time.Duration, now func() time.Time, onExpire func(string), rate float64, burst int) *sessionTable {
	return &sessionTable{max: max, ttl: ttl, now: now, onExpire: onExpire, ids: make(map[string]*list.Element),
		rate: rate, burst: float64(burst), tokens: float64(burst)}
}

// ErrSessionRate is why an initialize was refused: sessions are being
// created faster than the handler allows (a token bucket, see
// Options.SessionsPerSecond). Creating a session is the most expensive thing
// a client can ask for without one; a flood of them is refused cheaply
// while the calls on existing sessions go on.
var ErrSessionRate = errors.New("new sessions are being opened faster than allowed")

// check reports whether cred may use session id, and marks it used.
func (t *sessionTable) check(id, cred string) error {
	t.mu.Lock()
	e, ok := t.ids[id]
	if !ok {
		t.mu.Unlock()
		return errUnknownSession
	}
	b := e.Value.(*binding)
	if t.expiredLocked(b) {
		t.removeLocked(e)
		t.mu.Unlock()
		t.expired([]string{id})
		return errUnknownSession
	}
	defer t.mu.Unlock()
	if b.cred != cred {
		return errWrongIdentity
	}
	b.lastUsed = t.now()
	t.lru.MoveToFront(e)
	return nil
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

// reserve holds a slot for a session an initialize may create. Decided and
// taken in one critical section, so concurrent initializes cannot together
// pass the cap.
func (t *sessionTable) reserve() error {
	t.mu.Lock()
	gone := t.pruneLocked()
	var err error
	switch {
	case len(t.ids)+t.reserved >= t.max:
		err = ErrTooManySessions
	case !t.takeTokenLocked():
		err = ErrSessionRate
	default:
		t.reserved++
	}
	t.mu.Unlock()
	t.expired(gone)
	return err
}

// takeTokenLocked takes one new session from the rate's bucket.
func (t *sessionTable) takeTokenLocked() bool {
	if t.rate <= 0 {
		return true
	}
	now := t.now()
	if !t.refilled.IsZero() {
		t.tokens = min(t.burst, t.tokens+now.Sub(t.refilled).Seconds()*t.rate)
	}
	t.refilled = now
	if t.tokens < 1 {
		return false
	}
	t.tokens--
	return true
}

// unreserve gives back a slot that no session took.
func (t *sessionTable) unreserve() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.reserved--; t.reserved < 0 {
		panic("mcphttp: session slot given back twice")
	}
}

// bind turns a reserved slot into the binding of session id to cred.
func (t *sessionTable) bind(id, cred string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.reserved--; t.reserved < 0 {
		panic("mcphttp: session bound without a reserved slot")
	}
	if e, ok := t.ids[id]; ok {
		// A server never reuses an id; if it did, the newest creator wins.
		t.removeLocked(e)
	}
	t.ids[id] = t.lru.PushFront(&binding{id: id, cred: cred, lastUsed: t.now()})
}

// touch restarts the idle clock of id: a long request (an SSE stream) counts
// as use until it ends.
func (t *sessionTable) touch(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.ids[id]; ok {
		e.Value.(*binding).lastUsed = t.now()
		t.lru.MoveToFront(e)
	}
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
	delete(t.ids, e.Value.(*binding).id)
	t.lru.Remove(e)
}
