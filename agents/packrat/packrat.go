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
	if dataDir == "" {
		return nil, errors.New("packrat: no data directory")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	st, err := openStore(context.Background(), filepath.Join(dataDir, DBFile))
	if err != nil {
		return nil, fmt.Errorf("packrat: %w", err)
	}
	addTools(s, st, logger)
	return st, nil
}
