package packrat

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-run/switchboard/internal/idempotency"
)

// store_note is a transactional tool in the sense of docs/IDEMPOTENCY.md:
// the note and the record of the keyed call that stored it are committed in
// one SQLite transaction, so a crash of the agent at any instant leaves
// either both (a repeat of the key gets the recorded result, and no second
// note) or neither (a repeat runs it, for the first time). Nothing is ever
// "interrupted". The records live next to the notes, in packrat.db, in
// call_records; they are evicted after idempotency.DefaultRetention, the
// same retention the agent server advertises, past which the server refuses
// a key before it reaches the tool.

// TransactionalTools names the tools that record their calls in the store
// (idempotency.TxLedger): the agent server declares them to its guard.
func (s *store) TransactionalTools() []string { return []string{"store_note"} }

// Lookup implements idempotency.TxLedger.
func (s *store) Lookup(ctx context.Context, tool, key string) (*idempotency.Record, error) {
	r := idempotency.Record{Key: key, State: idempotency.StateDone}
	var created int64
	var result []byte
	err := s.db.QueryRowContext(ctx, `SELECT tool, fingerprint, result, created_ms FROM call_records WHERE key = ?`, key).
		Scan(&r.Tool, &r.Fingerprint, &result, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("packrat: look up idempotency key: %w", err)
	}
	r.Result, r.Created = result, time.UnixMilli(created)
	return &r, nil
}

// recordEvery: the transaction of one in this many recorded calls also
// evicts records older than the retention.
const recordEvery = 256

// recordCall writes the record of the keyed call in ctx (if any) in tx.
func (s *store) recordCall(ctx context.Context, tx *sql.Tx, note Note, stored bool, render func(Note, bool) ([]byte, error)) error {
	c, ok := idempotency.CallFrom(ctx)
	if !ok || render == nil {
		return nil
	}
	result, err := render(note, stored)
	if err != nil {
		return fmt.Errorf("store note: recording the call: %w", err)
	}
	now := s.now()
	if _, err := tx.ExecContext(ctx, `INSERT INTO call_records (key, tool, fingerprint, note_id, result, created_ms) VALUES (?, ?, ?, ?, ?, ?)`,
		c.Key, c.Tool, c.Fingerprint, note.ID, result, now.UnixMilli()); err != nil {
		return fmt.Errorf("store note: recording the call: %w", err)
	}
	if s.recorded.Add(1)%recordEvery == 0 {
		if _, err := tx.ExecContext(ctx, `DELETE FROM call_records WHERE created_ms < ?`, now.Add(-idempotency.DefaultRetention).UnixMilli()); err != nil {
			return fmt.Errorf("store note: evicting old call records: %w", err)
		}
	}
	return nil
}
