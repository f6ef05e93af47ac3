// Package pgdb is what Switchboard's PostgreSQL stores share (the
// idempotency ledger and packrat's notes, when an agent runs with
// --database): checking a database URL, opening a pool on it with an error
// that names host and database but never the password, and applying
// versioned schema migrations once, whichever replica starts first.
//
// Every agent keeps its tables in a schema of its own (SchemaFor), so the
// replicas of one agent share them and two agents on one database never
// see each other's keys or notes.
package pgdb

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// EnvURL is the environment variable that carries the database URL to
// `agent serve` (and through `up` to every agent it supervises).
const EnvURL = "SWITCHBOARD_DATABASE_URL"

// ErrScheme: a database URL whose scheme is not postgres or postgresql.
var ErrScheme = errors.New("want postgres:// or postgresql://")

// ErrUnavailable: the database could not be reached or refused us.
var ErrUnavailable = errors.New("database unavailable")

// connectTimeout bounds the first connection at start.
const connectTimeout = 10 * time.Second

// CheckURL checks that raw is a PostgreSQL URL; the error names the scheme
// it has instead (never the rest, which may hold a password).
func CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("database URL: cannot be parsed: %w", ErrScheme)
	}
	switch u.Scheme {
	case "postgres", "postgresql":
		return nil
	case "":
		return fmt.Errorf("database URL has no scheme: %w", ErrScheme)
	}
	return fmt.Errorf("database URL scheme %q: %w", u.Scheme, ErrScheme)
}

// Describe names the database of cfg as user@host:port/database, without
// the password, for errors and logs.
func Describe(cfg *pgx.ConnConfig) string {
	return fmt.Sprintf("%s@%s:%d/%s", cfg.User, cfg.Host, cfg.Port, cfg.Database)
}

// SchemaFor is the schema the tables of agent live in.
func SchemaFor(agent string) (string, error) {
	s := "switchboard_" + strings.ToLower(agent)
	if len(s) > 63 {
		return "", fmt.Errorf("agent name %q is too long for a PostgreSQL schema name (%s is %d bytes, at most 63)", agent, s, len(s))
	}
	return s, nil
}

// Options configure Open.
type Options struct {
	// Schema the connections' search_path is set to; created if missing.
	// Required.
	Schema string
	// MinConns kept open; default 1.
	MinConns int32
	// MaxConns bounds the pool; default pgxpool's (4 on 2 cores), or the
	// URL's pool_max_conns.
	MaxConns int32
	// AfterConnect runs on every new connection (after search_path is set).
	AfterConnect func(context.Context, *pgx.Conn) error
	// StatementTimeout bounds one statement: PostgreSQL's statement_timeout
	// on every connection, and, a little longer, how long the client waits
	// for an answer before it closes the connection with ErrNoAnswer
	// (bounds.go). Zero means DefaultStatementTimeout; negative, no bound
	// (for connections that wait on purpose, as on an advisory lock under
	// the caller's deadline). A statement_timeout in the URL wins.
	StatementTimeout time.Duration
	// DeadAfter bounds how long a connection whose peer is gone goes
	// unnoticed (TCP keepalive and TCP_USER_TIMEOUT). Zero means
	// DefaultDeadAfter; at least 4 s.
	DeadAfter time.Duration
}

// bounds applies o's bounds to cfg: the dialer, and the server's
// statement_timeout unless the URL sets one.
func (o Options) bounds(cfg *pgconn.Config) {
	st := o.StatementTimeout
	if st == 0 {
		st = DefaultStatementTimeout
	}
	if v, ok := cfg.RuntimeParams["statement_timeout"]; ok {
		// The URL's value (PostgreSQL's syntax: ms by default, or
		// with a unit) is the server's; the client's bound follows it
		// when it reads as a duration, and keeps st otherwise.
		if d, err := parsePGDuration(v); err == nil {
			st = d
		}
	} else if st > 0 {
		cfg.RuntimeParams["statement_timeout"] = strconv.FormatInt(st.Milliseconds(), 10)
	}
	answer := time.Duration(0)
	if st > 0 {
		answer = st + answerMargin
	}
	dead := o.DeadAfter
	if dead == 0 {
		dead = DefaultDeadAfter
	}
	cfg.DialFunc = dialer(cfg.ConnectTimeout, max(dead, minDeadAfter), answer)
}

// Open opens a pool on the database at rawURL, creates o.Schema in it, and
// checks that it answers. Its errors name host and database, never the
// password, and wrap ErrUnavailable when the database did not answer.
func Open(ctx context.Context, rawURL string, o Options) (*pgxpool.Pool, error) {
	if err := CheckURL(rawURL); err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		// pgx's parse errors quote the URL, password included: not passed on.
		return nil, fmt.Errorf("database URL cannot be parsed (check its host, port and parameters): %w", ErrScheme)
	}
	if o.Schema == "" {
		return nil, errors.New("pgdb: no schema")
	}
	where := Describe(cfg.ConnConfig)
	cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{o.Schema}.Sanitize()
	o.bounds(&cfg.ConnConfig.Config)
	cfg.MinConns = max(o.MinConns, 1)
	if o.MaxConns > 0 && !strings.Contains(rawURL, "pool_max_conns") {
		cfg.MaxConns = o.MaxConns
	}
	cfg.MinConns = min(cfg.MinConns, cfg.MaxConns)
	// Connections live as long as the process: a session-level advisory
	// lock held by them (the ledger's owner lock) must not lapse because a
	// connection was recycled for age.
	cfg.MaxConnLifetime = 1<<63 - 1
	cfg.MaxConnIdleTime = 1<<63 - 1
	if o.AfterConnect != nil {
		cfg.AfterConnect = o.AfterConnect
	}
	// A connection the server ended while it sat in the pool (a restart)
	// is discarded before a statement is sent on it, and the pool takes
	// or makes another: the statement is then provably not run, and
	// Retry may wait for the server (retry.go).
	cfg.PrepareConn = func(_ context.Context, c *pgx.Conn) (bool, error) {
		return CheckIdle(c) == nil, nil
	}
	// pgx's connect errors (pgconn.ConnectError) name host, user and
	// database, never the password, so they are passed on as they are.
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("database %s: %w", where, err)
	}
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	conn, err := pool.Acquire(cctx)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("database %s: %w: %w", where, ErrUnavailable, err)
	}
	// Under the migration lock: two replicas' CREATE SCHEMA IF NOT EXISTS
	// at once can fail with a unique violation.
	err = withMigrationLock(cctx, conn.Conn(), func() error {
		_, err := conn.Exec(cctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{o.Schema}.Sanitize())
		return err
	})
	conn.Release()
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("database %s: creating schema %s: %w", where, o.Schema, err)
	}
	return pool, nil
}

// withMigrationLock runs f holding migrationLock on c.
func withMigrationLock(ctx context.Context, c *pgx.Conn, f func() error) error {
	if _, err := c.Exec(ctx, `SELECT pg_advisory_lock($1)`, migrationLock); err != nil {
		return err
	}
	defer c.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, migrationLock)
	return f()
}

// Ping connects once to the database at rawURL and closes the connection:
// the check at start of a command that does not open a store itself. Its
// error names host and database, never the password, and wraps
// ErrUnavailable (ErrScheme for a bad URL).
func Ping(ctx context.Context, rawURL string) error {
	if err := CheckURL(rawURL); err != nil {
		return err
	}
	cfg, err := pgx.ParseConfig(rawURL)
	if err != nil {
		return fmt.Errorf("database URL cannot be parsed (check its host, port and parameters): %w", ErrScheme)
	}
	Options{}.bounds(&cfg.Config)
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	c, err := pgx.ConnectConfig(cctx, cfg)
	if err != nil {
		return fmt.Errorf("database %s: %w: %w", Describe(cfg), ErrUnavailable, err)
	}
	return c.Close(cctx)
}

// migrationLock is the advisory lock key under which migrations run
// (an arbitrary constant: "sbmigr" in ASCII).
const migrationLock int64 = 0x7362_6d69_6772

// A Migration moves a component's schema from version i to i+1 (its index
// in the list). Append; never edit one that has shipped.
type Migration = string

// Migrate brings component's tables in the pool's schema to the newest of
// migrations: under pg_advisory_lock, so replicas starting together apply
// each migration once, recording the version in schema_version. A schema
// newer than migrations is refused with an error wrapping ErrNewer.
func Migrate(ctx context.Context, pool *pgxpool.Pool, component string, migrations []Migration) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("migrate %s: %w: %w", component, ErrUnavailable, err)
	}
	defer conn.Release()
	return withMigrationLock(ctx, conn.Conn(), func() error { return migrateLocked(ctx, conn.Conn(), component, migrations) })
}

func migrateLocked(ctx context.Context, conn *pgx.Conn, component string, migrations []Migration) error {
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_version (component TEXT PRIMARY KEY, version INTEGER NOT NULL)`); err != nil {
			return fmt.Errorf("migrate %s: create schema_version: %w", component, err)
		}
		var version int
		err := tx.QueryRow(ctx, `SELECT version FROM schema_version WHERE component = $1`, component).Scan(&version)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("migrate %s: read schema version: %w", component, err)
		}
		if version > len(migrations) {
			return fmt.Errorf("migrate %s: schema version %d is %w (%d)", component, version, ErrNewer, len(migrations))
		}
		for i := version; i < len(migrations); i++ {
			if _, err := tx.Exec(ctx, migrations[i]); err != nil {
				return fmt.Errorf("migrate %s to version %d: %w", component, i+1, err)
			}
		}
		if _, err := tx.Exec(ctx, `INSERT INTO schema_version (component, version) VALUES ($1, $2)
			ON CONFLICT (component) DO UPDATE SET version = excluded.version`, component, len(migrations)); err != nil {
			return fmt.Errorf("migrate %s: write schema version: %w", component, err)
		}
		return nil
	})
}

// ErrNewer: the database's schema was written by a newer Switchboard.
var ErrNewer = errors.New("newer than this version understands")

// parsePGDuration reads a statement_timeout value as PostgreSQL does for
// the units a URL would carry: a bare number of milliseconds, or a number
// with ms, s or min. 0 means none.
func parsePGDuration(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	unit := time.Millisecond
	for _, u := range []struct {
		suffix string
		d      time.Duration
	}{{"ms", time.Millisecond}, {"min", time.Minute}, {"s", time.Second}} {
		if strings.HasSuffix(v, u.suffix) {
			v, unit = strings.TrimSpace(strings.TrimSuffix(v, u.suffix)), u.d
			break
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("statement_timeout %q: want milliseconds, or a number with ms, s or min", v)
	}
	if n == 0 {
		return -1, nil
	}
	return time.Duration(n) * unit, nil
}
