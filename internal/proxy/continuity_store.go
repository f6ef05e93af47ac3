package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/switchboard-run/switchboard/internal/proxy/sessionstore"
)

// Continuity beyond the process. With a Store, every kept session is also
// written there: when it is created (before the client has the answer to
// its initialize, so that its very next request may land elsewhere), when
// its setup changes (notifications/initialized, logging/setLevel,
// resources/subscribe and unsubscribe), and its last use at most every
// touchEvery. A process that does not know a client's session id (the
// studio or `agent serve` after a restart, another replica of the agent)
// is asked by its mcphttp middleware, which refuses an id it never saw
// created: Restore reads the record and vouches for the id when its
// credential digest is the request's. The session is then kept in memory
// with the client's id as its upstream one, which the agent behind does
// not know (a new process, another replica), and the 404 it answers is
// renewed as after an agent's restart.
//
// What is written is a session's id, the digest of its credential, its
// setup's params (stateJSON) and its last use: no header, no token, no
// tool's arguments or results. The Store's bounds are the memory's
// (sessionstore.MaxSessions, MaxStateBytes), and a record idle past the
// TTL is neither read nor counted. A Store that fails is logged and the
// session goes on in memory: continuity beyond the process is lost for
// it, never the session.
//
// Not kept beyond the process: which call each SSE stream answered
// (continuity_streams.go). A client resuming, after a restart, the stream
// of a call that the restart cut gets 400 instead of the call's -32060:
// the stream's request id died with the process.

// storeTimeout bounds one Store operation on a request's path.
const storeTimeout = 5 * time.Second

// stateJSON is a session's setup as the Store keeps it.
type stateJSON struct {
	Initialize  json.RawMessage `json:"initialize"`
	Initialized bool            `json:"initialized,omitempty"`
	Version     string          `json:"version,omitempty"`
	Level       string          `json:"level,omitempty"`
	Subscribed  []string        `json:"subscribed,omitempty"`
}

// horizon is the instant before which a session's last use makes it
// expired.
func (c *Continuity) horizon() time.Time {
	if c.ttl <= 0 {
		return time.Time{}
	}
	return c.now().Add(-c.ttl)
}

// touchEvery is how stale the Store's last use of a session may be: far
// below the TTL, so that no replica takes a session in use elsewhere for
// an idle one.
func (c *Continuity) touchEvery() time.Duration {
	d := time.Minute
	if c.ttl > 0 && c.ttl/4 < d {
		d = c.ttl / 4
	}
	return d
}

// recordOfLocked is the Store's record of ks.
func (c *Continuity) recordOfLocked(id string, ks *keptSession) sessionstore.Record {
	st := stateJSON{Initialize: ks.initParams, Initialized: ks.initialized, Version: ks.version, Level: ks.level}
	for uri := range ks.subscribed {
		st.Subscribed = append(st.Subscribed, uri)
	}
	b, _ := json.Marshal(st)
	return sessionstore.Record{ID: id, Cred: ks.cred, State: b, LastUsed: ks.lastUsed}
}

// store writes rec, outside any lock.
func (c *Continuity) store(ctx context.Context, rec sessionstore.Record) {
	if c.Store == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	if err := c.Store.Put(ctx, rec, c.horizon()); err != nil {
		if errors.Is(err, sessionstore.ErrFull) || errors.Is(err, sessionstore.ErrTooLarge) {
			c.logger.Debug("continuity: session not kept beyond this process", "err", err)
			return
		}
		c.logger.Warn("continuity: could not keep a session beyond this process", "err", err)
	}
}

func (c *Continuity) touchStored(ctx context.Context, id string, at time.Time) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	if err := c.Store.Touch(ctx, id, at); err != nil {
		c.logger.Warn("continuity: could not note a session's use", "err", err)
	}
}

// unstore deletes id from the Store (only if idle since idleBefore, when
// that is not zero).
func (c *Continuity) unstore(ctx context.Context, id string, idleBefore time.Time) {
	if c.Store == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	if err := c.Store.Delete(ctx, id, idleBefore); err != nil {
		c.logger.Warn("continuity: could not forget a session", "err", err)
	}
}

// Restore reports whether session id, created by the credential whose
// digest is cred (mcphttp's: SHA-256 of the Authorization header, hex), is
// kept: in memory, or in the Store, from which it is then loaded. It is
// mcphttp.Options.RestoreSession, asked about an id the middleware does
// not know, outside its lock.
func (c *Continuity) Restore(ctx context.Context, id, cred string) bool {
	c.mu.Lock()
	if ks := c.sessions[id]; ks != nil {
		ok := ks.cred == cred && !c.expiredLocked(ks)
		c.mu.Unlock()
		return ok
	}
	c.mu.Unlock()
	if c.Store == nil || id == "" {
		return false
	}
	sctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	rec, err := c.Store.Get(sctx, id, c.horizon())
	if err != nil {
		if !errors.Is(err, sessionstore.ErrNotFound) {
			c.logger.Warn("continuity: could not read a kept session", "err", err)
		}
		return false
	}
	if rec.Cred != cred {
		return false
	}
	ks, err := keptFromState(rec.State)
	if err != nil {
		c.logger.Warn("continuity: a kept session cannot be read; its client starts over", "err", err)
		return false
	}
	// The agent behind knows the session by the client's id only if it is
	// the process that created it; if not, it answers 404 and the session
	// is renewed there.
	ks.cred, ks.upstream, ks.standalone = cred, id, id
	ks.lastUsed, ks.persisted = c.now(), rec.LastUsed
	c.mu.Lock()
	defer c.mu.Unlock()
	if got := c.sessions[id]; got != nil {
		return got.cred == cred // restored by a concurrent request
	}
	if len(c.sessions) >= maxKeptSessions {
		c.pruneLocked()
	}
	if len(c.sessions) >= maxKeptSessions {
		return false
	}
	c.sessions[id] = ks
	c.restored++
	return true
}

// errBadState: a record's state is not what this version writes.
var errBadState = errors.New("unreadable session state")

func keptFromState(b []byte) (*keptSession, error) {
	var st stateJSON
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, errors.Join(errBadState, err)
	}
	if len(st.Initialize) == 0 || st.Initialize[0] != '{' {
		return nil, errBadState
	}
	ks := &keptSession{initParams: st.Initialize, initialized: st.Initialized, version: st.Version, level: st.Level,
		size: len(st.Initialize) + len(st.Version) + len(st.Level)}
	for _, uri := range st.Subscribed {
		if ks.subscribed == nil {
			ks.subscribed = make(map[string]bool)
		}
		ks.subscribed[uri] = true
		ks.size += len(uri)
	}
	if ks.size > maxKeptBytes {
		return nil, errBadState
	}
	return ks, nil
}
