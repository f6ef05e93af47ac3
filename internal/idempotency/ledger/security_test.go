package ledger_test

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/idempotency"
	"github.com/switchboard-run/switchboard/internal/idempotency/ledger"
)

func checkMode(t *testing.T, p string, want fs.FileMode) {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != want {
		t.Errorf("%s: mode %o, want %o", filepath.Base(p), got, want)
	}
}

// begin records a call, so that SQLite has its -wal and -shm files open.
func begin(t *testing.T, l *ledger.Ledger) {
	t.Helper()
	if _, err := l.Begin(context.Background(), idempotency.NewKey(time.Now()), "effect", "fp"); err != nil {
		t.Fatal(err)
	}
}

// The ledger holds every keyed call's result: a directory Open creates is
// 0700, the database and its -wal and -shm files 0600, whatever the umask
// (SQLite's own default is 0644).
func TestLedgerFilesArePrivate(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "data", "oracle")
	path := filepath.Join(dir, "idempotency.db")
	l, err := ledger.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	begin(t, l)
	checkMode(t, dir, 0o700)
	checkMode(t, filepath.Dir(dir), 0o700)
	for _, name := range []string{"idempotency.db", "idempotency.db-wal", "idempotency.db-shm"} {
		checkMode(t, filepath.Join(dir, name), 0o600)
	}
}

// Files an earlier version left 0644 (here: the database, its WAL and its
// shared memory, as a process that crashed leaves them) are made 0600 when
// the ledger is opened again. A directory that already existed keeps its
// mode: it may be shared, and is not the ledger's.
func TestLedgerTightensExistingFiles(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "idempotency.db")
	first, err := ledger.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	begin(t, first)
	files := []string{path, path + "-wal", path + "-shm"}
	for _, p := range files {
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	again, err := ledger.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	for _, p := range files {
		checkMode(t, p, 0o600)
	}
	checkMode(t, dir, 0o755)
}

// A path the ledger cannot create says which ledger and why.
func TestLedgerOpenNamesThePath(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(file, "idempotency.db") // a directory that is a file
	_, err := ledger.Open(path, nil)
	if err == nil || !strings.Contains(err.Error(), path) || !errors.Is(err, syscall.ENOTDIR) {
		t.Fatalf("Open under a file: %v", err)
	}
}

// bearer adds a credential to every request.
type bearer struct {
	token string
	base  *http.Transport
}

func (b bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(req)
}

// A key used once is refused for any other call with one message, the same
// whether another caller tries it (with the same tool and arguments, or
// another tool) or the same caller with other arguments: it says that the
// key cannot be used for this call, never that it was used, for which tool
// or when. Nothing runs.
func TestConflictConfirmsNothing(t *testing.T) {
	r := newRig(t, backends[0], filepath.Join(t.TempDir(), "l.db"), nil)
	key := idempotency.NewKey(time.Now())
	if _, err := r.call("effect", "secret-plan", key); err != nil {
		t.Fatal(err)
	}

	c := mcp.NewClient(&mcp.Implementation{Name: "other", Version: "1"}, nil)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	other, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: r.url, HTTPClient: &http.Client{Transport: bearer{"someone-else", tr}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	otherCall := func(tool, id string) error {
		_, err := other.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"id": id}, Meta: mcp.Meta{idempotency.MetaKey: key}})
		return err
	}

	var messages []string
	for _, c := range []struct {
		what string
		err  error
	}{
		{"another caller, same call", otherCall("effect", "secret-plan")},
		{"another caller, another tool", otherCall("slow", "probe")},
		{"same caller, other arguments", func() error { _, err := r.call("effect", "other", key); return err }()},
	} {
		var w *jsonrpc.Error
		if !errors.As(c.err, &w) || w.Code != idempotency.CodeConflict {
			t.Fatalf("%s: want a conflict, got %v", c.what, c.err)
		}
		for _, leak := range []string{"effect", "secret-plan", "first used", "tool"} {
			if strings.Contains(w.Message, leak) {
				t.Errorf("%s: the message %q says %q about the key's first call", c.what, w.Message, leak)
			}
		}
		messages = append(messages, w.Message)
	}
	for _, m := range messages[1:] {
		if m != messages[0] {
			t.Fatalf("the conflicts' messages differ, so they tell the cases apart: %q", messages)
		}
	}
	if !strings.Contains(messages[0], "cannot be used for this call") {
		t.Fatalf("message %q", messages[0])
	}
	if r.runsOf("secret-plan") != 1 || r.runsOf("probe") != 0 || r.runsOf("other") != 0 {
		t.Fatalf("runs: %d, %d, %d; want 1, 0, 0", r.runsOf("secret-plan"), r.runsOf("probe"), r.runsOf("other"))
	}
}
