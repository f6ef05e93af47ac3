package pool

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type entryState int

const (
	// stateDialing is a new entry's state until its dial installs it: it is
	// in no map, has no session yet (cs is nil), holds no count on
	// Pool.bg, and nothing may close it. A 404 seen while dialing (the
	// server forgot the session between initialize and initialized, or a
	// balancer sent them to different replicas) only marks it forgotten.
	stateDialing  entryState = iota
	stateLive                // in the map; handed to callers
	stateDraining            // out of the map; closed when its last user releases it
	stateClosed              // out of the map; close started
)

// An entry is one pooled session.
type entry struct {
	key  key
	srv  Server
	gen  uint64 // dial generation for key, from 1
	http bool   // Streamable HTTP, so probes are authoritative
	cs   *mcp.ClientSession
	proc *stdioProcess // a stdio server's process; nil over HTTP
	// protocol is the MCP version the session negotiated (its era); set
	// before the entry is installed, read-only after.
	protocol string

	dialing atomic.Bool // set until Connect returns; see errStaleInitialize
	// forgotten is set when a request carrying the session id was answered
	// 404 while the entry was still stateDialing: the handshake's session
	// is gone, so the dial fails (see errForgottenInDial).
	forgotten atomic.Bool

	// abortCtx is cancelled when a close overruns Options.CloseTimeout; every
	// HTTP request of the entry is tied to it.
	abortCtx context.Context
	abort    context.CancelFunc

	// onExpiry is called (without the pool lock) when any request carrying
	// the session id is answered 404.
	onExpiry func()

	// ended is closed once the session is closed (closeSession): a
	// Subscription on it then subscribes again on the key's next session.
	ended chan struct{}
	// subscribed counts the Subscriptions attached to it (subscribe.go); a
	// session with one is not idle.
	subscribed atomic.Int32
	// stream follows the standalone GET stream of an HTTP session
	// (getstream.go); unused over stdio.
	stream standaloneStream

	// Guarded by Pool.mu.
	notices     []*probe // calls cancelled while sent: their cancel notice may still be on its way
	state       entryState
	inUse       int
	reserved    int // callers its dial was for that have not taken it yet (dialCall.waiters)
	created     time.Time
	lastUsed    time.Time
	closeReason string
	forced      bool     // Shutdown is closing it under its calls (Pool.forceClose)
	attempts    *attempt // the attempts using it, a list through attempt.next

	toolsMu  sync.Mutex // protects the three fields below
	tools    []*mcp.Tool
	toolsAt  time.Time // zero: no cached list
	toolsVer uint64    // bumped by clearTools, so a list fetched before a change is not stored after it
}

func (e *entry) sawExpiry() {
	if e.onExpiry != nil {
		e.onExpiry()
	}
}

// cachedTools returns the cached list if it is younger than ttl, and the
// cache version to pass to storeTools after a fetch.
func (e *entry) cachedTools(now time.Time, ttl time.Duration) (tools []*mcp.Tool, ok bool, ver uint64) {
	e.toolsMu.Lock()
	defer e.toolsMu.Unlock()
	if e.toolsAt.IsZero() || now.Sub(e.toolsAt) >= ttl {
		return nil, false, e.toolsVer
	}
	return e.tools, true, e.toolsVer
}

func (e *entry) storeTools(tools []*mcp.Tool, at time.Time, ver uint64) {
	e.toolsMu.Lock()
	if e.toolsVer == ver {
		e.tools, e.toolsAt = tools, at
	}
	e.toolsMu.Unlock()
}

// clearTools drops the cached list (notifications/tools/list_changed).
func (e *entry) clearTools() {
	e.toolsMu.Lock()
	e.tools, e.toolsAt = nil, time.Time{}
	e.toolsVer++
	e.toolsMu.Unlock()
}

// addNoticeLocked remembers a cancelled call whose notifications/cancelled
// go-sdk is about to send, dropping those already delivered. Pool.mu held.
func (e *entry) addNoticeLocked(pr *probe) {
	e.notices = slices.DeleteFunc(e.notices, func(p *probe) bool {
		select {
		case <-p.notice():
			return true
		default:
			return false
		}
	})
	e.notices = append(e.notices, pr)
}

// writesMeta reports whether go-sdk writes the per-request _meta of the
// 2026-07-28 era into the params of e's requests (see own).
func (e *entry) writesMeta() bool { return e.protocol >= Protocol20260728 }
