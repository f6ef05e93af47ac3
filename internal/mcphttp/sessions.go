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

// sessionTable remembers which credential created each session id. It is
// strict: an id it did not see created is refused, so a forgotten binding
// can never be picked up by another credential. A refused client gets 404,
// and the spec tells it what to do then: initialize again.
//
// The table is an LRU list so that the cap evicts the least recently used
// binding in O(1), and the idle TTL can prune from the cold end.
type sessionTable struct {
	max int
	ttl time.Duration
	now func() time.Time

	mu  sync.Mutex               // protects following fields
	ids map[string]*list.Element // of *binding
	lru list.List                // front: most recently used
}

type binding struct {
	id, cred string
	lastUsed time.Time
}

func newSessionTable(max int, ttl time.Duration, now func() time.Time) *sessionTable {
	return &sessionTable{max: max, ttl: ttl, now: now, ids: make(map[string]*list.Element)}
}

// check reports whether cred may use session id, and marks it used.
func (t *sessionTable) check(id, cred string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.ids[id]
	if !ok {
		return errUnknownSession
	}
	b := e.Value.(*binding)
	if t.expiredLocked(b) {
		t.removeLocked(e)
		return errUnknownSession
	}
	if b.cred != cred {
		return errWrongIdentity
	}
	b.lastUsed = t.now()
	t.lru.MoveToFront(e)
	return nil
}

// bind records that cred created session id.
func (t *sessionTable) bind(id, cred string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.ids[id]; ok {
		// A server never reuses an id; if it did, the newest creator wins.
		t.removeLocked(e)
	}
	for back := t.lru.Back(); back != nil && t.expiredLocked(back.Value.(*binding)); back = t.lru.Back() {
		t.removeLocked(back)
	}
	for t.lru.Len() >= t.max {
		t.removeLocked(t.lru.Back())
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

func (t *sessionTable) expiredLocked(b *binding) bool {
	return t.ttl > 0 && t.now().Sub(b.lastUsed) > t.ttl
}

func (t *sessionTable) removeLocked(e *list.Element) {
	delete(t.ids, e.Value.(*binding).id)
	t.lru.Remove(e)
}
