// Package sqlitefile keeps a SQLite database's files private: the
// database and the sidecars SQLite makes next to it (-wal, -shm,
// -journal) 0600, its directory 0700 when created. SQLite gives a sidecar
// the database's mode when it creates one, but a file that already existed
// with a looser mode keeps it, so both are set explicitly: before SQLite
// opens the database (Secure) and once it has made its sidecars
// (TightenSidecars). The idempotency ledger and the session store hold
// what callers sent; nobody else on the machine reads them.
package sqlitefile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// sidecars are the files SQLite keeps next to a database.
var sidecars = []string{"-wal", "-shm", "-journal"}

// Secure prepares path before SQLite opens it: its directory created
// (0700), the database file created if missing and made 0600 whatever its
// mode was, and its existing sidecars made 0600.
func Secure(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("creating its directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	err = f.Chmod(0o600) // an existing file keeps its mode through OpenFile
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("making it 0600: %w", err)
	}
	return TightenSidecars(path)
}

// TightenSidecars makes path's -wal, -shm and -journal files 0600 where
// they exist.
func TightenSidecars(path string) error {
	for _, suffix := range sidecars {
		if err := os.Chmod(path+suffix, 0o600); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("making %s 0600: %w", filepath.Base(path+suffix), err)
		}
	}
	return nil
}
