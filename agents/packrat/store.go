package packrat

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	_ "modernc.org/sqlite" // registers the pure-Go "sqlite" driver

	"github.com/switchboard-run/switchboard/internal/idempotency/ledger"
	"github.com/switchboard-run/switchboard/internal/pgdb"
)

// Limits on what one note may hold. They keep a confused model from filling
// the archive (or its own context window, on search) with one call.
const (
	maxTextBytes  = 1 << 20
	maxTitleRunes = 300
	maxTags       = 32
	maxTagRunes   = 64
	maxKeyRunes   = 200

	defaultLimit = 10
	maxLimit     = 100
)

// busyTimeout is how long a writer waits for another writer (another
// connection of this process, or another process on the same file) before
// SQLite reports SQLITE_BUSY.
const busyTimeout = 5 * time.Second

// A Note is one archived note.
type Note struct {
	ID        int64     `json:"id" jsonschema:"The note's id."`
	Title     string    `json:"title,omitempty" jsonschema:"The note's title, if it has one."`
	Text      string    `json:"text" jsonschema:"The note's content."`
	Tags      []string  `json:"tags,omitempty" jsonschema:"The note's tags, lower-case and sorted."`
	CreatedAt time.Time `json:"created_at" jsonschema:"When the note was stored (RFC 3339, UTC)."`
}

// newNote is what a caller asks to store.
type newNote struct {
	Title, Text    string
	Tags           []string
	IdempotencyKey string
}

// A query selects notes, newest first.
type query struct {
	Terms []string // every term must occur in the title, text or tags (case-insensitive)
	Tag   string   // if set, only notes carrying this tag
	Limit int      // at most this many; 0 means defaultLimit
}

// store is the SQLite archive behind the tools.
type store struct {
	db  *sql.DB
	now func() time.Time // injectable for tests
	pg  *pgStore         // nil on SQLite (store_pg.go)
	dialect

	lookup *sql.Stmt // lookupSQL, prepared (idempotency.go)

	recorded atomic.Int64 // keyed calls recorded, for eviction (idempotency.go)

	closeOnce sync.Once
	closeErr  error
}

// openStore opens (creating if needed) the archive at path and brings its
// schema up to date.
func openStore(ctx context.Context, path string) (*store, error) {
	// A plain file name with driver parameters; a '?' in the path itself
	// would be read as the start of those parameters.
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("open packrat store: path %q must not contain '?' or '#'", path)
	}
	if err := securePaths(path); err != nil {
		return nil, fmt.Errorf("open packrat store: %w", err)
	}
	// WAL lets searches run while a store commits. synchronous=FULL makes a
	// commit durable before the tool answers "stored": the archive's one job
	// is not losing notes, and notes are written rarely. _txlock=immediate
	// takes the write lock at BEGIN, so a transaction never has to upgrade
	// a read lock (an upgrade that fails with SQLITE_BUSY at once, ignoring
	// the busy timeout).
	dsn := fmt.Sprintf("%s?_busy_timeout=%d&_journal_mode=WAL&_synchronous=FULL&_txlock=immediate",
		path, busyTimeout.Milliseconds())
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open packrat store %s: %w", path, err)
	}
	if err := migrate(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("open packrat store %s: %w", path, err)
	}
	// SQLite gives the WAL and shared-memory files the database's mode;
	// set it anyway, whatever created them.
	for _, suffix := range []string{"-wal", "-shm"} {
		if err := os.Chmod(path+suffix, 0o600); err != nil && !errors.Is(err, fs.ErrNotExist) {
			db.Close()
			return nil, fmt.Errorf("open packrat store %s: %w", path, err)
		}
	}
	st := &store{db: db, now: time.Now, dialect: sqliteDialect}
	if err := st.prepareLookup(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open packrat store %s: %w", path, err)
	}
	return st, nil
}

// The archive holds whatever a user asked to remember: its directory is
// 0700 and its files 0600, whatever the umask and whatever mode a directory
// that already existed had; and it is never reached through a symbolic link
// that leads out of its directory, which would let whoever can write the
// parent put the notes somewhere else.

// securePaths prepares the directory of the database at path and the
// database file itself.
func securePaths(path string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := refuseEscapingLink(dir, filepath.Dir(dir)); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	for _, p := range []string{path, path + "-wal", path + "-shm", path + "-journal"} {
		if err := refuseEscapingLink(p, dir); err != nil {
			return err
		}
	}
	// Created here, not by SQLite, so that the mode is ours from the first
	// byte; O_NOFOLLOW: a link put in place since the check is not followed.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Chmod(0o600)
}

// refuseEscapingLink returns errSymlink when path is a symbolic link whose
// target is not inside within.
func refuseEscapingLink(path, within string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSymlink == 0 {
		return nil
	}
	target, err := filepath.EvalSymlinks(path)
	if err != nil {
		return fmt.Errorf("%s: %w (%w)", path, errSymlink, err)
	}
	base, err := filepath.EvalSymlinks(within)
	if err != nil {
		return err
	}
	if rel, err := filepath.Rel(base, target); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || rel == "." {
		return fmt.Errorf("%s is a symbolic link to %s, outside %s: %w", path, target, within, errSymlink)
	}
	return nil
}

// Close closes the database. It is safe to call more than once.
func (s *store) Close() error {
	s.closeOnce.Do(func() {
		if s.lookup != nil {
			s.lookup.Close()
		}
		s.closeErr = s.db.Close()
		if s.pg != nil {
			s.pg.locks.Close()
			s.pg.pool.Close()
		}
	})
	return s.closeErr
}

// put stores n and reports whether it was newly stored. With an idempotency
// key already in the archive it stores nothing and returns the note stored
// under that key (stored == false), provided that note has the same title,
// text and tags; otherwise it fails with errKeyConflict. Without a key every
// call stores a new note, even one identical to an earlier note: only the
// caller knows whether two identical calls are a retry or two notes.
//
// When ctx carries a keyed call (ledger.CallFrom), render's rendering
// of the outcome is committed with the note as the call's record (see
// idempotency.go): exactly what a replay of the key returns.
func (s *store) put(ctx context.Context, n newNote) (note Note, stored bool, err error) {
	return s.putRecorded(ctx, n, nil)
}

// putRecorded is put, committing render's rendering of the outcome as the
// record of the keyed call in ctx, if any, in the same transaction.
func (s *store) putRecorded(ctx context.Context, n newNote, render func(Note, bool) ([]byte, error)) (note Note, stored bool, err error) {
	n, err = normalize(n)
	if err != nil {
		return Note{}, false, err
	}
	for attempt := 1; ; attempt++ {
		note, stored, err = s.putWaiting(ctx, n, render)
		// On PostgreSQL two replicas' transactions for one caller's key
		// can both find it free; one insert then fails on the UNIQUE
		// index, its transaction rolled back (nothing stored), and the
		// retry finds the other's note.
		if !s.retryable(err) || attempt == maxPutAttempts {
			return note, stored, err
		}
	}
}

// maxPutAttempts bounds putRecorded's retries after a unique violation.
const maxPutAttempts = 3

// putWaiting is putOnce, which on PostgreSQL waits out a database restart
// (pgdb.Retry): a transaction that failed before its commit, because it
// found no server or lost its connection, committed nothing and is run
// again; a failed commit (errCommit) never is, its outcome being unknown.
func (s *store) putWaiting(ctx context.Context, n newNote, render func(Note, bool) ([]byte, error)) (note Note, stored bool, err error) {
	if s.pg == nil {
		return s.putOnce(ctx, n, render)
	}
	err = pgdb.Retry(ctx, uncommitted, func(ctx context.Context) error {
		note, stored, err = s.putOnce(ctx, n, render)
		return err
	})
	return note, stored, err
}

// errCommit marks the error of a transaction's commit: whether it
// committed is unknown.
var errCommit = errors.New("commit failed")

// uncommitted reports whether err, from a transaction of putOnce, means it
// provably committed nothing and the database may be back soon.
func uncommitted(err error) bool {
	return !errors.Is(err, errCommit) && pgdb.ReadRetryable(err)
}

func (s *store) putOnce(ctx context.Context, n newNote, render func(Note, bool) ([]byte, error)) (note Note, stored bool, err error) {
	tagsJSON, err := json.Marshal(append([]string{}, n.Tags...)) // "[]", never "null"
	if err != nil {
		return Note{}, false, fmt.Errorf("store note: %w", err)
	}

	// One IMMEDIATE transaction: look the key up and insert under the write
	// lock, so concurrent stores with one key serialize here and exactly one
	// inserts. The UNIQUE constraint backs this up.
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Note{}, false, fmt.Errorf("store note: %w", err)
	}
	defer tx.Rollback()

	var key any // NULL when no key is given: NULLs never collide
	var callFP, callMS any
	call, keyed := ledger.CallFrom(ctx)
	if keyed && render != nil && n.IdempotencyKey == "" {
		// The call's record goes in the note's own row (idempotency.go).
		key, callFP, callMS = callKeyPrefix+call.Key, call.Fingerprint, s.now().UnixMilli()
	}
	if n.IdempotencyKey != "" {
		key = n.IdempotencyKey
		old, err := scanNote(tx.QueryRowContext(ctx,
			s.q(`SELECT id, title, text, tags, created_at FROM notes WHERE idempotency_key = ?`), key))
		switch {
		case err == nil:
			if old.Title != n.Title || old.Text != n.Text || !slices.Equal(old.Tags, n.Tags) {
				return Note{}, false, fmt.Errorf("%w: key %q belongs to note %d", errKeyConflict, n.IdempotencyKey, old.ID)
			}
			if err := s.recordCall(ctx, tx, old, false, render); err != nil {
				return Note{}, false, err
			}
			if err := tx.Commit(); err != nil {
				return Note{}, false, fmt.Errorf("store note: %w: %w", errCommit, err)
			}
			return old, false, nil
		case !errors.Is(err, sql.ErrNoRows):
			return Note{}, false, fmt.Errorf("store note: %w", err)
		}
	}

	created := s.now().UTC()
	note = Note{Title: n.Title, Text: n.Text, Tags: n.Tags, CreatedAt: created}
	err = tx.QueryRowContext(ctx,
		s.q(`INSERT INTO notes (title, text, tags, folded, idempotency_key, created_at, call_fingerprint, call_ms)
		 VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`),
		n.Title, n.Text, string(tagsJSON), fold(n), key, created.Format(time.RFC3339Nano), callFP, callMS,
	).Scan(&note.ID)
	if err != nil {
		return Note{}, false, fmt.Errorf("store note: %w", err)
	}
	if callFP != nil {
		err = s.maybeEvict(ctx, tx, s.now())
	} else {
		err = s.recordCall(ctx, tx, note, true, render)
	}
	if err != nil {
		return Note{}, false, err
	}
	if err := tx.Commit(); err != nil {
		return Note{}, false, fmt.Errorf("store note: %w: %w", errCommit, err)
	}
	return note, true, nil
}

// get returns the note with id.
func (s *store) get(ctx context.Context, id int64) (Note, error) {
	note, err := scanNote(s.db.QueryRowContext(ctx,
		s.q(`SELECT id, title, text, tags, created_at FROM notes WHERE id = ?`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return Note{}, notFound(id)
	}
	if err != nil {
		return Note{}, fmt.Errorf("get note %d: %w", id, err)
	}
	return note, nil
}

// remove deletes the note with id and returns it. Its idempotency key, if
// any, goes with it: a later store with that key stores a new note. The
// record of the keyed call that stored it, if it is in the note's row, is
// kept in call_records, in the same transaction: a resend of that call is
// still a replay, not a second note.
func (s *store) remove(ctx context.Context, id int64) (Note, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Note{}, fmt.Errorf("delete note %d: %w", id, err)
	}
	defer tx.Rollback()
	if err := s.keepRowRecord(ctx, tx, id); err != nil {
		return Note{}, fmt.Errorf("delete note %d: %w", id, err)
	}
	note, err := scanNote(tx.QueryRowContext(ctx,
		s.q(`DELETE FROM notes WHERE id = ? RETURNING id, title, text, tags, created_at`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return Note{}, notFound(id)
	}
	if err != nil {
		return Note{}, fmt.Errorf("delete note %d: %w", id, err)
	}
	if err := tx.Commit(); err != nil {
		return Note{}, fmt.Errorf("delete note %d: %w", id, err)
	}
	return note, nil
}

// find returns the notes q selects, newest first, and whether more notes
// matched than q.Limit allowed.
func (s *store) find(ctx context.Context, q query) (notes []Note, more bool, err error) {
	limit := q.Limit
	if limit <= 0 {
		limit = defaultLimit
	}
	var (
		where []string
		args  []any
	)
	for _, t := range q.Terms {
		if t = strings.ToLower(t); t != "" {
			where = append(where, s.dialect.contains)
			args = append(args, t)
		}
	}
	if tag := strings.ToLower(strings.TrimSpace(q.Tag)); tag != "" {
		where = append(where, s.dialect.hasTag)
		args = append(args, tag)
	}
	sqlText := `SELECT id, title, text, tags, created_at FROM notes`
	if len(where) > 0 {
		sqlText += " WHERE " + strings.Join(where, " AND ")
	}
	// Ids only grow (AUTOINCREMENT), so id order is store order even if
	// the wall clock steps back. One extra row tells us whether there is more.
	sqlText += " ORDER BY id DESC LIMIT ?"
	args = append(args, limit+1)

	rows, err := s.db.QueryContext(ctx, s.q(sqlText), args...)
	if err != nil {
		return nil, false, fmt.Errorf("find notes: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		note, err := scanNote(rows)
		if err != nil {
			return nil, false, fmt.Errorf("find notes: %w", err)
		}
		notes = append(notes, note)
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("find notes: %w", err)
	}
	if len(notes) > limit {
		return notes[:limit], true, nil
	}
	return notes, false, nil
}

func notFound(id int64) error {
	return fmt.Errorf("note %d %w (it never existed or was deleted; search_notes and list_notes show the ids in the archive)", id, errNotFound)
}

// scanNote reads one note from a row of (id, title, text, tags, created_at),
// and the columns after those into more.
func scanNote(row interface{ Scan(...any) error }, more ...any) (Note, error) {
	var (
		n       Note
		tags    string
		created string
	)
	if err := row.Scan(append([]any{&n.ID, &n.Title, &n.Text, &tags, &created}, more...)...); err != nil {
		return Note{}, err
	}
	if err := json.Unmarshal([]byte(tags), &n.Tags); err != nil {
		return Note{}, fmt.Errorf("note %d: tags %q: %w", n.ID, tags, err)
	}
	if len(n.Tags) == 0 {
		n.Tags = nil
	}
	t, err := time.Parse(time.RFC3339Nano, created)
	if err != nil {
		return Note{}, fmt.Errorf("note %d: created_at: %w", n.ID, err)
	}
	n.CreatedAt = t
	return n, nil
}

// normalize checks n and puts it in the form that is stored and compared:
// title and key trimmed; tags trimmed, lower-cased, deduplicated and sorted
// (a set: the same tags in another order are the same note to an
// idempotency check). The text is kept byte for byte.
func normalize(n newNote) (newNote, error) {
	if strings.TrimSpace(n.Text) == "" {
		return n, errEmptyText
	}
	if len(n.Text) > maxTextBytes {
		return n, fmt.Errorf("%w: text is %d bytes, more than the %d allowed", errInvalid, len(n.Text), maxTextBytes)
	}
	if !utf8.ValidString(n.Text) || !utf8.ValidString(n.Title) {
		return n, fmt.Errorf("%w: text and title must be valid UTF-8", errInvalid)
	}
	n.Title = strings.TrimSpace(n.Title)
	if c := utf8.RuneCountInString(n.Title); c > maxTitleRunes {
		return n, fmt.Errorf("%w: title is %d characters, more than the %d allowed", errInvalid, c, maxTitleRunes)
	}
	n.IdempotencyKey = strings.TrimSpace(n.IdempotencyKey)
	if c := utf8.RuneCountInString(n.IdempotencyKey); c > maxKeyRunes {
		return n, fmt.Errorf("%w: idempotency_key is %d characters, more than the %d allowed", errInvalid, c, maxKeyRunes)
	}
	if i := strings.IndexFunc(n.IdempotencyKey, unicode.IsControl); i >= 0 {
		// A control character starts the keys of recorded calls
		// (callKeyPrefix), and no one types one into a key.
		return n, fmt.Errorf("%w: idempotency_key has a control character at byte %d", errInvalid, i)
	}
	var tags []string
	for _, t := range n.Tags {
		t = strings.ToLower(strings.TrimSpace(t))
		if t == "" || slices.Contains(tags, t) {
			continue
		}
		if c := utf8.RuneCountInString(t); c > maxTagRunes {
			return n, fmt.Errorf("%w: tag %q is %d characters, more than the %d allowed", errInvalid, t, c, maxTagRunes)
		}
		tags = append(tags, t)
	}
	if len(tags) > maxTags {
		return n, fmt.Errorf("%w: %d tags, more than the %d allowed", errInvalid, len(tags), maxTags)
	}
	slices.Sort(tags)
	n.Tags = tags
	return n, nil
}

// fold is the lower-cased text that search matches against. Fields are
// joined by a newline so that a term cannot match across the title/text
// boundary unless it spans a newline itself.
func fold(n newNote) string {
	return strings.ToLower(n.Title + "\n" + n.Text + "\n" + strings.Join(n.Tags, "\n"))
}
