package sqlitefile_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/switchboard-run/switchboard/internal/sqlitefile"
)

// TestSecure: a missing directory is made 0700, a database file left 0644
// and its sidecars are made 0600, whatever the umask.
func TestSecure(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), "new", "x.db")
	if err := sqlitefile.Secure(path); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("directory: %v %v", fi, err)
	}
	for _, f := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(f, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := sqlitefile.Secure(path); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{path, path + "-wal", path + "-shm"} {
		if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want 0600", filepath.Base(f), fi.Mode().Perm(), err)
		}
	}
	if _, err := os.Stat(path + "-journal"); !os.IsNotExist(err) {
		t.Errorf("a sidecar that did not exist was created: %v", err)
	}
}
