// Package packrat is the archive agent's toolset: notes stored, searched,
// read and deleted through MCP tools, kept in a SQLite database (pure Go,
// modernc.org/sqlite) in the agent's data directory so that nothing stored is
// lost when the agent process restarts.
//
// Stores are made safe to retry with an idempotency key: the key is UNIQUE
// in the database and checked under SQLite's write lock, so any number of
// concurrent stores with one key leave exactly one note.
package packrat

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// DBFile is the database's file name inside the data directory.
const DBFile = "packrat.db"

// Register opens (creating if needed) the archive in dataDir/packrat.db and
// adds packrat's tools to s: store_note, search_notes, list_notes, get_note
// and delete_note. The returned Closer closes the database; call it after s
// has stopped serving. A nil logger discards.
func Register(s *mcp.Server, dataDir string, logger *slog.Logger) (io.Closer, error) {
	return RegisterWith(s, &Options{DataDir: dataDir, Logger: logger})
}

// Options configure RegisterWith.
type Options struct {
	// DataDir holds packrat.db when there is no DatabaseURL.
	DataDir string
	// DatabaseURL, when set, is the PostgreSQL database every replica of
	// the agent shares, its tables in Schema (required with
	// it: pgdb.SchemaFor(the agent's name)).
	DatabaseURL, Schema string
	Logger              *slog.Logger // nil discards
}

// RegisterWith is Register with the archive in PostgreSQL when
// o.DatabaseURL is set.
func RegisterWith(s *mcp.Server, o *Options) (io.Closer, error) {
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var (
		st  *store
		err error
	)
	switch {
	case o.DatabaseURL != "":
		st, err = openPGStore(context.Background(), o.DatabaseURL, o.Schema)
	case o.DataDir == "":
		return nil, errors.New("packrat: no data directory")
	default:
		st, err = openStore(context.Background(), filepath.Join(o.DataDir, DBFile))
	}
	if err != nil {
		return nil, fmt.Errorf("packrat: %w", err)
	}
	addTools(s, st, logger)
	return st, nil
}
