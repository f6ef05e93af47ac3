package tokenstore

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSaveLoadDelete(t *testing.T) {
	s := &Store{Dir: filepath.Join(t.TempDir(), "tokens")}
	alice := &Record{URL: "https://mcp.example/mcp", Identity: "alice", AccessToken: "at-alice", RefreshToken: "rt-alice", Expiry: time.Now().Add(time.Hour).Round(time.Second)}
	bob := &Record{URL: "https://mcp.example/mcp", Identity: "bob", AccessToken: "at-bob"}
	for _, r := range []*Record{alice, bob} {
		if err := s.Save(r); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Load(Key{URL: alice.URL, Identity: "alice"})
	if err != nil || got.AccessToken != "at-alice" || !got.Expiry.Equal(alice.Expiry) {
		t.Fatalf("Load(alice) = %v, %v", got, err)
	}
	if got, err := s.Load(Key{URL: alice.URL, Identity: "bob"}); err != nil || got.AccessToken != "at-bob" {
		t.Fatalf("Load(bob) = %v, %v", got, err)
	}
	if _, err := s.Load(Key{URL: alice.URL}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Load(no identity) err = %v, want ErrNotFound", err)
	}
	fi, err := os.Stat(s.Dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("dir mode %v, %v; want 0700", fi.Mode().Perm(), err)
	}
	files, _ := filepath.Glob(filepath.Join(s.Dir, "*"))
	if len(files) != 2 {
		t.Fatalf("files %v, want 2 (no temporary files left)", files)
	}
	for _, f := range files {
		if fi, _ := os.Stat(f); fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want 0600", f, fi.Mode().Perm())
		}
	}
	if err := s.Delete(Key{URL: alice.URL, Identity: "alice"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(Key{URL: alice.URL, Identity: "alice"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after Delete: %v", err)
	}
	if err := s.Delete(Key{URL: alice.URL, Identity: "alice"}); err != nil {
		t.Fatalf("second Delete: %v", err)
	}
}

func TestLoadRefusesAnotherKeysFile(t *testing.T) {
	s := &Store{Dir: t.TempDir()}
	if err := s.Save(&Record{URL: "https://a/mcp", AccessToken: "secret-a"}); err != nil {
		t.Fatal(err)
	}
	// A file copied over another key's name is not another key's token.
	src := filepath.Join(s.Dir, Key{URL: "https://a/mcp"}.file())
	dst := filepath.Join(s.Dir, Key{URL: "https://b/mcp"}.file())
	data, _ := os.ReadFile(src)
	os.WriteFile(dst, data, 0o600)
	if _, err := s.Load(Key{URL: "https://b/mcp"}); err == nil {
		t.Fatal("Load returned a record stored for another URL")
	}
	os.WriteFile(dst, []byte(`{"access_token": "secret-garbage`), 0o600)
	if _, err := s.Load(Key{URL: "https://b/mcp"}); err == nil || strings.Contains(err.Error(), "secret") {
		t.Fatalf("corrupt file: err = %v; want an error that does not quote the file", err)
	}
}

func TestRecordRedacts(t *testing.T) {
	r := Record{URL: "https://mcp.example/mcp", Scopes: []string{"read"}, AccessToken: "AT-SECRET", RefreshToken: "RT-SECRET", ClientSecret: "CS-SECRET"}
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("token", "record", r, "ptr", &r)
	slog.New(slog.NewTextHandler(&logs, nil)).Info("token", "record", r)
	for _, s := range []string{fmt.Sprint(r), fmt.Sprintf("%v %+v %#v %s %q", r, r, r, r, r), fmt.Sprintf("%v", &r), logs.String()} {
		for _, secret := range []string{"AT-SECRET", "RT-SECRET", "CS-SECRET"} {
			if strings.Contains(s, secret) {
				t.Fatalf("%s leaks in %q", secret, s)
			}
		}
	}
	if !strings.Contains(fmt.Sprint(r), "read") {
		t.Errorf("String() = %q; want the scopes shown", r.String())
	}
}

// TestLoadErrorsNameTheFile: a token file that exists but cannot be read, or
// is not a record, is an error that names the file and is not ErrNotFound,
// so that no caller takes it for "no token" and writes over it.
func TestLoadErrorsNameTheFile(t *testing.T) {
	s := &Store{Dir: t.TempDir()}
	k := Key{URL: "https://a/mcp", Identity: "alice"}
	path := filepath.Join(s.Dir, k.file())

	if err := os.WriteFile(path, []byte(`{"access_token": "secret-garbage`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := s.Load(k)
	if !errors.Is(err, ErrCorrupt) || errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), path) {
		t.Fatalf("corrupt file: err = %v; want ErrCorrupt naming %s", err, path)
	}

	// A directory where the file should be cannot be read, by root too
	// (a mode of 000 would not stop root).
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	_, err = s.Load(k)
	if _, ok := errors.AsType[*fs.PathError](err); !ok || errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), path) {
		t.Fatalf("unreadable file: err = %v; want a *fs.PathError naming %s, not ErrNotFound", err, path)
	}
}
