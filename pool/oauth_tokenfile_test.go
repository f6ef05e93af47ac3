package pool_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/oauthtest"
	"github.com/switchboard-run/switchboard/pool"
)

// TestOAuthUnreadableTokenFileIsReported: a token file that exists but is
// not a token record, or cannot be read, fails the call with an error
// wrapping pool.ErrTokenStore that names the file. The pool does not take
// it for "no token": nobody is sent to sign in, no grant runs, and the
// file is left as it was.
func TestOAuthUnreadableTokenFileIsReported(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spoil func(t *testing.T, path string)
	}{
		{"corrupt", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte(`{"access_token": "half a tok`), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"unreadable", func(t *testing.T, path string) {
			// A directory where the file is: unreadable by root too.
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			as := oauthtest.New(t, time.Hour)
			dir := t.TempDir()
			srv := &pool.Server{Name: "remote", URL: as.URL}
			b := &browser{user: "alice"}
			p := pool.New(&pool.Options{OAuth: &pool.OAuthOptions{TokenDir: dir, Interactive: b.interactive()}})
			mustWhoami(t, p, srv, "alice") // a sign-in leaves the one token file
			p.Close()
			files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
			if len(files) != 1 {
				t.Fatalf("token files %v, want one", files)
			}
			path := files[0]
			tc.spoil(t, path)
			before, _ := os.ReadFile(path)
			signIns := as.Snapshot().Authorizations

			p = pool.New(&pool.Options{OAuth: &pool.OAuthOptions{TokenDir: dir, Interactive: b.interactive()}})
			defer p.Close()
			_, err := whoami(t, p, srv)
			t.Logf("the call's error: %v", err)
			if !errors.Is(err, pool.ErrTokenStore) || errors.Is(err, pool.ErrLoginRequired) || !strings.Contains(err.Error(), path) {
				t.Fatalf("err = %v; want pool.ErrTokenStore naming %s, not a sign-in", err, path)
			}
			if n := as.Snapshot().Authorizations; n != signIns {
				t.Fatalf("%d sign-ins over a token file that cannot be read; want none", n-signIns)
			}
			after, _ := os.ReadFile(path)
			if fi, serr := os.Stat(path); serr != nil || !bytes.Equal(before, after) || (tc.name == "unreadable") != fi.IsDir() {
				t.Fatalf("the token file was changed (%v)", serr)
			}
		})
	}
}
