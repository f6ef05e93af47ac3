// Package sessionstore keeps what session continuity (internal/proxy,
// continuity.go) records of a client's session beyond the process that
// recorded it: in a SQLite file in the data directory of the studio or
// agent (OpenSQLite), or in PostgreSQL, where every replica of an agent
// reads what any of them recorded (OpenPostgres).
//
// A Record is a session's id, the digest of the credential that created
// it, what continuity replays to set the session up again (the params of
// the client's initialize and of the few requests that change a
// session's state, never a header, a token or a tool's arguments), and
// when it was last used. A store is bounded the way continuity's memory
// is: at most MaxSessions records a scope, each of at most MaxStateBytes,
// and a record idle past the horizon its caller names is neither read nor
// counted, and is deleted by the next Put.
//
// One store serves several scopes (the studio keeps every agent's
// sessions in one file, an agent's replicas share their agent's schema):
// Scope returns the view continuity uses.
package sessionstore

import (
	"context"
	"errors"
	"time"
)

// ErrNotFound: no record of that session, or one idle past the horizon.
var ErrNotFound = errors.New("session not kept")

// ErrFull: the scope keeps as many sessions as it may; the new one is not
// kept (it works, without continuity beyond its process).
var ErrFull = errors.New("as many sessions kept as allowed")

// ErrTooLarge: a record's state is larger than MaxStateBytes.
var ErrTooLarge = errors.New("session state too large to keep")

// MaxStateBytes bounds one record's state; continuity keeps no more of a
// session in memory (internal/proxy.maxKeptBytes).
const MaxStateBytes = 16 << 10

// MaxSessions bounds the records of one scope: the middleware in front of
// continuity binds no more sessions (mcphttp.DefaultMaxSessions).
const MaxSessions = 1024

// Record is what is kept of one client session.
type Record struct {
	// ID is the client's Mcp-Session-Id.
	ID string
	// Cred is the SHA-256 digest (hex) of the Authorization header that
	// created the session, "" for none: what the session is bound to,
	// never the credential itself.
	Cred string
	// State is continuity's recorded setup (JSON), at most MaxStateBytes.
	State []byte
	// LastUsed is when the session was last used, to the millisecond.
	LastUsed time.Time
}

// Store is one scope of a database of records. Every method is safe for
// concurrent use; horizon is the instant before which a record counts as
// expired.
type Store interface {
	// Put keeps rec, replacing the scope's record of rec.ID. Records idle
	// since before horizon are deleted first; ErrFull when the scope then
	// holds MaxSessions others, ErrTooLarge for a state past MaxStateBytes.
	Put(ctx context.Context, rec Record, horizon time.Time) error
	// Get returns the record of id, ErrNotFound when there is none used
	// since horizon.
	Get(ctx context.Context, id string, horizon time.Time) (Record, error)
	// Touch sets the last use of id to at, if it is kept.
	Touch(ctx context.Context, id string, at time.Time) error
	// Delete forgets id; with a non-zero idleBefore only if it has not
	// been used since (another replica may still be using it).
	Delete(ctx context.Context, id string, idleBefore time.Time) error
}

// DB is a database of records, shared by its scopes; Close it once.
type DB interface {
	// Scope returns the store of one scope (an agent's name, or "").
	Scope(name string) Store
	Close() error
}

func ms(t time.Time) int64 { return t.UnixMilli() }
