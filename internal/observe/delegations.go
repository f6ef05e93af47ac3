package observe

import (
	"crypto/sha256"
	"sync"
	"time"

	"github.com/switchboard-run/switchboard/internal/studioapi"
)

// The most recent tools/calls the proxy forwarded, for the page and
// `switchboard status`: a fixed ring, so memory stays bounded however long
// the studio runs. A call is recorded when it starts ("running") and
// completed when its response ends, so a long ask shows while it runs.
//
// Recovery is what the proxy can infer from the outside: a tools/call
// answered 404 (its session was gone) followed by the same call (the same
// traceparent, which the pool keeps across its one retry; or, without
// tracing, the same run, tool and arguments) is the pool's retry on a new
// session. Both entries say so.

// RecentDelegations is how many calls the studio remembers.
const RecentDelegations = 200

// retryWindow is how long after a 404 a repeat of the call counts as its
// retry.
const retryWindow = 2 * time.Minute

// maxPending bounds the calls waiting for their retry: each is a 404, which
// any client can cause at will, so the map must not grow with them. Past
// it, the oldest waiting call is dropped (it simply shows no retry).
const maxPending = 1024

// Delegations is the ring of the most recent tools/calls; make it with
// NewDelegations.
type Delegations struct {
	mu      sync.Mutex // protects following fields
	ring    []*studioapi.Delegation
	next    int                       // ring index of the next write
	lastID  int64                     // last assigned id
	pending map[[32]byte]pendingRetry // by the digest of the retry key: bounded keys
}

// pendingRetry is a call that got a 404, waiting for its retry.
type pendingRetry struct {
	rec *studioapi.Delegation
	at  time.Time
}

// NewDelegations returns an empty ring of RecentDelegations calls.
func NewDelegations() *Delegations {
	return &Delegations{ring: make([]*studioapi.Delegation, RecentDelegations), pending: make(map[[32]byte]pendingRetry)}
}

// start records a call as it begins.
func (l *Delegations) start(o *observation) *studioapi.Delegation {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lastID++
	d := &studioapi.Delegation{
		ID: l.lastID, Start: o.start, Agent: o.agent, Tool: Printable(o.tool), From: Printable(o.from),
		RunID: o.runID, Outcome: studioapi.OutcomeRunning, TraceID: o.traceID(),
	}
	switch {
	case o.from == "":
	case o.fromSeen:
		d.FromSource = studioapi.FromSourceAgent
	default:
		d.FromSource = studioapi.FromSourceClaimed
	}
	key := sha256.Sum256([]byte(o.retryKey()))
	if p, ok := l.pending[key]; ok && o.start.Sub(p.at) < retryWindow {
		delete(l.pending, key)
		p.rec.Recovery = studioapi.RecoveryRetried
		d.Recovery = studioapi.RecoveryRetrying
	}
	l.ring[l.next] = d
	l.next = (l.next + 1) % len(l.ring)
	return d
}

// finish completes d with how its call ended.
func (l *Delegations) finish(d *studioapi.Delegation, o *observation) {
	l.mu.Lock()
	defer l.mu.Unlock()
	d.Outcome = o.outcome()
	if d.RunID == "" {
		d.RunID = o.runID
	}
	d.Message = Printable(o.message)
	d.DurationMS = float64(o.duration) / float64(time.Millisecond)
	switch {
	case d.Recovery == studioapi.RecoveryRetrying && (o.kind == "" || o.kind == "tool_error"):
		// The tool ran; its own error is still a recovered session.
		d.Recovery = studioapi.RecoveryRecovered
	case d.Recovery == studioapi.RecoveryRetrying:
		// The pool retries once; this failure is final.
		d.Recovery = studioapi.RecoveryFailed
	case o.kind == "session_not_found":
		now := time.Now()
		var oldest [32]byte
		var oldestAt time.Time
		for k, p := range l.pending {
			if now.Sub(p.at) >= retryWindow {
				delete(l.pending, k)
			} else if oldestAt.IsZero() || p.at.Before(oldestAt) {
				oldest, oldestAt = k, p.at
			}
		}
		if len(l.pending) >= maxPending {
			delete(l.pending, oldest)
		}
		d.Recovery = studioapi.RecoveryExpired
		l.pending[sha256.Sum256([]byte(o.retryKey()))] = pendingRetry{rec: d, at: now}
	}
}

// Recent returns up to n recorded calls, newest first, as copies.
func (l *Delegations) Recent(n int) []studioapi.Delegation {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]studioapi.Delegation, 0, min(n, len(l.ring)))
	for i := 1; i <= len(l.ring) && len(out) < n; i++ {
		d := l.ring[(l.next-i+len(l.ring))%len(l.ring)]
		if d == nil {
			break
		}
		out = append(out, *d)
	}
	return out
}

// setStatus records what d's result said of how it ended (Delegation.Status).
func (l *Delegations) setStatus(d *studioapi.Delegation, status string) {
	l.mu.Lock()
	d.Status = status
	l.mu.Unlock()
}
