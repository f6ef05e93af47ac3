package packrat

import (
	"context"
	"database/sql"
	"fmt"
)

// migrations[i] moves the schema from version i to version i+1. The version
// lives in PRAGMA user_version, so an old database is upgraded in place on
// open and a database written by a newer packrat is refused rather than
// misread. Append; never edit a migration that has shipped.
var migrations = []string{
	// v1: one table. AUTOINCREMENT so that a deleted note's id is never handed
	// to a new note: a coordinator that remembered "note 7" must not later
	// read someone else's note under that id. folded holds the lower-cased
	// title, text and tags that search matches against (SQLite's own lower()
	// and LIKE only fold ASCII). idempotency_key is UNIQUE; NULLs (no key)
	// do not collide.
	`CREATE TABLE notes (
		id              INTEGER PRIMARY KEY AUTOINCREMENT,
		title           TEXT NOT NULL DEFAULT '',
		text            TEXT NOT NULL,
		tags            TEXT NOT NULL DEFAULT '[]',
		folded          TEXT NOT NULL,
		idempotency_key TEXT UNIQUE,
		created_at      TEXT NOT NULL
	)`,
	// v2: the records of keyed store_note calls (docs/IDEMPOTENCY.md),
	// written in the same transaction as the note they record, so a crash
	// leaves both or neither. A store without its own idempotency_key keeps
	// its record in the note's own row: idempotency_key holds the call's
	// key behind callKeyPrefix (a control character, which no caller's key
	// may contain), call_fingerprint and call_ms the rest, and the result
	// is rendered again from the note on a replay; so the record costs no
	// statement and no page, only columns of a row the store writes anyway.
	// call_records holds the others: stores that carry their
	// own idempotency_key, and the records of deleted notes (a store
	// resent after its note was deleted is still a replay). result is the
	// CallToolResult as JSON.
	`ALTER TABLE notes ADD COLUMN call_fingerprint TEXT;
	ALTER TABLE notes ADD COLUMN call_ms INTEGER;
	CREATE TABLE call_records (
		key         TEXT PRIMARY KEY,
		tool        TEXT NOT NULL,
		fingerprint TEXT NOT NULL,
		note_id     INTEGER NOT NULL,
		result      BLOB NOT NULL,
		created_ms  INTEGER NOT NULL
	) WITHOUT ROWID`,
}

// migrate brings the schema at db up to date. It runs in one IMMEDIATE
// transaction (see the DSN in openStore), so two processes opening the same
// fresh database do not both try to create it.
func migrate(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin migration: %w", err)
	}
	defer tx.Rollback()

	var version int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if version > len(migrations) {
		return fmt.Errorf("schema version %d is %w (%d)", version, errNewerSchema, len(migrations))
	}
	for i := version; i < len(migrations); i++ {
		if _, err := tx.ExecContext(ctx, migrations[i]); err != nil {
			return fmt.Errorf("migrate schema to version %d: %w", i+1, err)
		}
	}
	// PRAGMA takes no bound parameters; the value is our own integer.
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", len(migrations))); err != nil {
		return fmt.Errorf("write schema version: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit migration: %w", err)
	}
	return nil
}
