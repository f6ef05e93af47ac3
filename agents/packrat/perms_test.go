package packrat

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// The archive's directory is 0700 and its files 0600 whatever the umask and
// whatever mode the directory already had.
func TestStoreFileModes(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	st, err := openStore(context.Background(), filepath.Join(dir, DBFile))
	if err != nil {
		t.Fatal(err)
	}
	// A write makes sure the WAL and shared-memory files exist.
	if _, _, err := st.put(context.Background(), newNote{Text: "secret"}); err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	check := func(p string, want fs.FileMode) {
		t.Helper()
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %o, want %o", filepath.Base(p), got, want)
		}
	}
	check(dir, 0o700)
	for _, name := range []string{DBFile, DBFile + "-wal", DBFile + "-shm"} {
		check(filepath.Join(dir, name), 0o600)
	}
}

// A data directory or database that is a symbolic link out of its directory
// is refused with errSymlink, and nothing is written where it leads; a link
// that stays inside is followed.
func TestStoreRefusesEscapingSymlinks(t *testing.T) {
	root := t.TempDir()
	elsewhere := filepath.Join(t.TempDir(), "elsewhere")
	if err := os.Mkdir(elsewhere, 0o700); err != nil {
		t.Fatal(err)
	}

	linkedDir := filepath.Join(root, "a", "data")
	os.MkdirAll(filepath.Dir(linkedDir), 0o700)
	if err := os.Symlink(elsewhere, linkedDir); err != nil {
		t.Fatal(err)
	}
	if _, err := openStore(context.Background(), filepath.Join(linkedDir, DBFile)); !errors.Is(err, errSymlink) {
		t.Errorf("a data directory linked elsewhere: %v, want errSymlink", err)
	}

	dir := filepath.Join(root, "b")
	os.MkdirAll(dir, 0o700)
	if err := os.Symlink(filepath.Join(elsewhere, "notes.db"), filepath.Join(dir, DBFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := openStore(context.Background(), filepath.Join(dir, DBFile)); !errors.Is(err, errSymlink) {
		t.Errorf("a database file linked elsewhere: %v, want errSymlink", err)
	}
	if ents, _ := os.ReadDir(elsewhere); len(ents) != 0 {
		t.Errorf("something was written through the link: %v", ents)
	}

	inside := filepath.Join(root, "c")
	os.MkdirAll(filepath.Join(root, "c-real"), 0o700)
	if err := os.Symlink(filepath.Join(root, "c-real"), inside); err != nil {
		t.Fatal(err)
	}
	st, err := openStore(context.Background(), filepath.Join(inside, DBFile))
	if err != nil {
		t.Fatalf("a data directory linked to a sibling: %v", err)
	}
	st.Close()
}
