package packrat

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/switchboard-run/switchboard/internal/idempotency"
	"github.com/switchboard-run/switchboard/internal/idempotency/ledger"
	"github.com/switchboard-run/switchboard/internal/pgdb"
)

// store_note is a transactional tool in the sense of docs/IDEMPOTENCY.md:
// the note and the record of the keyed call that stored it are committed in
// one SQLite transaction, so a crash of the agent at any instant leaves
// either both (a repeat of the key gets the recorded result, and no second
// note) or neither (a repeat runs it, for the first time). Nothing is ever
// "interrupted". The records live in packrat.db: in the row of the note
// the call stored (no extra page per commit; see migration v2), or in
// call_records for a store that carries its own idempotency_key and for a
// deleted note's record. They are evicted after
// idempotency.DefaultRetention, the same retention the agent server
// advertises, past which the server refuses a key before it reaches the
// tool.

// TransactionalTools names the tools that record their calls in the store
// (ledger.TxLedger): the agent server declares them to its guard.
func (s *store) TransactionalTools() []string { return []string{"store_note"} }

// callKeyPrefix marks a recorded call's key in notes.idempotency_key. A
// caller's own idempotency_key may not contain a control character
// (normalize), so the two never collide, and one UNIQUE index serves both.
const callKeyPrefix = "\x1ecall:"

// callKeyEnd bounds the range of those keys in the index.
const callKeyEnd = "\x1ecall;"

// Lookup implements ledger.TxLedger: the record is in the row of the
// note the call stored (its result rendered again from the note, exactly
// as store_note rendered it), or in call_records. Both places are read by
// one statement: a new key, the common case, costs one index probe of
// each table in one round trip, not two queries (issue 25).
func (s *store) Lookup(ctx context.Context, tool, key string) (*ledger.Record, error) {
	var (
		inRow   bool
		id      int64
		title   string
		text    string
		tags    string
		created string
		rec     = ledger.Record{Key: key, State: ledger.StateDone}
		ms      int64
		result  []byte
	)
	scan := func(ctx context.Context) error {
		return s.lookup.QueryRowContext(ctx, callKeyPrefix+key, key).
			Scan(&inRow, &id, &title, &text, &tags, &created, &rec.Fingerprint, &ms, &rec.Tool, &result)
	}
	var err error
	if s.pg != nil {
		// A read: run again, while the database restarts, whatever
		// broke it (pgdb.ReadRetryable).
		err = pgdb.Retry(ctx, pgdb.ReadRetryable, scan)
	} else {
		err = scan(ctx)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err == nil && inRow {
		var note Note
		if note, err = scanNote(row{id, title, text, tags, created}); err == nil {
			result, err = s.render(note, true)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("packrat: look up idempotency key: %w", err)
	}
	rec.Result, rec.Created = result, time.UnixMilli(ms)
	return &rec, nil
}

// lookupSQL reads a key's record from both places it may be in. Prepared
// once when the store opens (prepareLookup): the guard runs it before every
// keyed call, and parsing it again each time was a third of its cost.
const lookupSQL = `
	SELECT 1, id, title, text, tags, created_at, call_fingerprint, call_ms, 'store_note', NULL
	  FROM notes WHERE idempotency_key = ?
	UNION ALL
	SELECT 0, note_id, '', '', '', '', fingerprint, created_ms, tool, result
	  FROM call_records WHERE key = ?
	ORDER BY 1 DESC LIMIT 1`

// prepareLookup prepares lookupSQL for Lookup.
func (s *store) prepareLookup(ctx context.Context) error {
	stmt, err := s.db.PrepareContext(ctx, s.q(lookupSQL))
	if err != nil {
		return fmt.Errorf("preparing the idempotency look-up: %w", err)
	}
	s.lookup = stmt
	return nil
}

// row is a note's columns already read, for scanNote.
type row struct {
	id                         int64
	title, text, tags, created string
}

func (r row) Scan(dest ...any) error {
	*dest[0].(*int64) = r.id
	*dest[1].(*string) = r.title
	*dest[2].(*string) = r.text
	*dest[3].(*string) = r.tags
	*dest[4].(*string) = r.created
	return nil
}

// render is the result of the store_note call recorded in a note's row:
// such a call stored the note now, without a key of its own.
func (s *store) render(note Note, stored bool) ([]byte, error) { return renderStore(note, stored, "") }

// keepRowRecord moves the record in note id's row, if any, to call_records
// with its rendered result, before the note is deleted.
func (s *store) keepRowRecord(ctx context.Context, tx *sql.Tx, id int64) error {
	var (
		key, fp string
		created int64
	)
	note, err := scanNote(tx.QueryRowContext(ctx,
		s.q(`SELECT id, title, text, tags, created_at, idempotency_key, call_fingerprint, call_ms FROM notes
		 WHERE id = ? AND idempotency_key >= ? AND idempotency_key < ?`), id, callKeyPrefix, callKeyEnd),
		&key, &fp, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err == nil {
		var result []byte
		if result, err = s.render(note, true); err == nil {
			_, err = tx.ExecContext(ctx, s.q(`INSERT INTO call_records (key, tool, fingerprint, note_id, result, created_ms) VALUES (?, 'store_note', ?, ?, ?, ?)`),
				strings.TrimPrefix(key, callKeyPrefix), fp, id, result, created)
		}
	}
	if err != nil {
		return fmt.Errorf("keeping the record of the call that stored it: %w", err)
	}
	return nil
}

// recordEvery: the transaction of one in this many recorded calls also
// evicts records older than the retention.
const recordEvery = 256

// recordCall writes the record of the keyed call in ctx (if any) in tx.
func (s *store) recordCall(ctx context.Context, tx *sql.Tx, note Note, stored bool, render func(Note, bool) ([]byte, error)) error {
	c, ok := ledger.CallFrom(ctx)
	if !ok || render == nil {
		return nil
	}
	result, err := render(note, stored)
	if err != nil {
		return fmt.Errorf("store note: recording the call: %w", err)
	}
	now := s.now()
	if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO call_records (key, tool, fingerprint, note_id, result, created_ms) VALUES (?, ?, ?, ?, ?, ?)`),
		c.Key, c.Tool, c.Fingerprint, note.ID, result, now.UnixMilli()); err != nil {
		return fmt.Errorf("store note: recording the call: %w", err)
	}
	return s.maybeEvict(ctx, tx, now)
}

// maybeEvict drops, once per recordEvery recorded calls, the records older
// than the retention: from call_records, and from notes' rows (the note
// stays; its row forgets the call).
func (s *store) maybeEvict(ctx context.Context, tx *sql.Tx, now time.Time) error {
	if s.recorded.Add(1)%recordEvery != 0 {
		return nil
	}
	cutoff := now.Add(-idempotency.DefaultRetention).UnixMilli()
	if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM call_records WHERE created_ms < ?`), cutoff); err != nil {
		return fmt.Errorf("store note: evicting old call records: %w", err)
	}
	// The range of keys behind callKeyPrefix, through the UNIQUE index.
	if _, err := tx.ExecContext(ctx, s.q(`UPDATE notes SET idempotency_key = NULL, call_fingerprint = NULL, call_ms = NULL
		WHERE idempotency_key >= ? AND idempotency_key < ? AND call_ms < ?`), callKeyPrefix, callKeyEnd, cutoff); err != nil {
		return fmt.Errorf("store note: evicting old call records: %w", err)
	}
	return nil
}
