package logincmd

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/switchboard-run/switchboard/internal/authstate"
	"github.com/switchboard-run/switchboard/internal/oauthtest"
	"github.com/switchboard-run/switchboard/internal/tokenstore"
	"github.com/switchboard-run/switchboard/pool"
	"github.com/switchboard-run/switchboard/pool/mcpconfig"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func writeConfig(t *testing.T, url string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(path, []byte(`{"mcpServers":{"remote":{"type":"http","url":"`+url+`"},"local":{"command":"true"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// login runs Login, plays the browser on the URL it prints, and returns
// its exit code and output.
func login(t *testing.T, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pr, pw := io.Pipe()
	var stderr bytes.Buffer
	done := make(chan int, 1)
	go func() {
		code := Login(ctx, args, nil, pw, &stderr)
		pw.Close()
		done <- code
	}()
	var out strings.Builder
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		line := sc.Text()
		out.WriteString(line + "\n")
		if u, ok := strings.CutPrefix(strings.TrimSpace(line), "http"); ok && strings.Contains(u, "/authorize?") {
			_, _, back, err := oauthtest.FollowAuthorize(ctx, "http"+u, "alice")
			if err != nil {
				t.Errorf("following the printed URL: %v", err)
				continue
			}
			// The browser comes back to the loopback redirect.
			resp, err := http.Get(back)
			if err != nil {
				t.Errorf("redirect back: %v", err)
				continue
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !strings.Contains(string(body), "Signed in to remote") {
				t.Errorf("callback page = %q", body)
			}
		}
	}
	code := <-done
	return code, out.String() + stderr.String()
}

func TestLoginCallLogout(t *testing.T) {
	as := oauthtest.New(t, time.Hour, "notes")
	cfg := writeConfig(t, as.URL)
	dir := t.TempDir()

	code, out := login(t, "--config", cfg, "--token-dir", dir, "remote")
	// The scopes granted are notes, and offline_access when go-sdk's flow
	// asked for it (the server lists it in scopes_supported): either way
	// the line names what was granted.
	_, granted, _ := strings.Cut(out, "Signed in to remote (1 tools); scopes ")
	granted, _, _ = strings.Cut(granted, ";")
	if code != 0 || !strings.Contains(out, "To sign in to remote, open this URL") || !slices.Contains(strings.Fields(granted), "notes") {
		t.Fatalf("login: exit %d, output:\n%s", code, out)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	if len(files) != 1 {
		t.Fatalf("token files %v", files)
	}
	if fi, _ := os.Stat(files[0]); fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %v", fi.Mode().Perm())
	}
	if len(as.Tokens()) < 2 {
		t.Fatalf("the server issued %d tokens, want an access and a refresh token", len(as.Tokens()))
	}
	for _, tok := range as.Tokens() { // access and refresh tokens alike
		if strings.Contains(out, tok) {
			t.Fatalf("login printed a token")
		}
	}

	// An agent's pool (headless) uses the stored token.
	p := pool.New(&pool.Options{OAuth: &pool.OAuthOptions{TokenDir: dir}})
	res, err := p.CallTool(context.Background(), &pool.Server{Name: "remote", URL: as.URL}, &mcp.CallToolParams{Name: "whoami"})
	p.Close()
	if err != nil || res.Content[0].(*mcp.TextContent).Text != "alice" {
		t.Fatalf("call with the stored token: %v", err)
	}

	states := authStates(t, cfg, dir)
	if len(states) != 1 || states[0].State != authstate.SignedIn || !states[0].Refreshable || states[0].Issuer != as.AS.URL || !slices.Contains(states[0].Scopes, "notes") {
		t.Fatalf("sign-in state = %+v", states)
	}
	var table bytes.Buffer
	authstate.Write(&table, authstate.Report{Servers: states})
	if !strings.Contains(table.String(), "remote") || !strings.Contains(table.String(), "signed in at "+as.AS.URL) || strings.Contains(table.String(), tokenOfFile(t, files[0])) {
		t.Fatalf("status table: %q", table.String())
	}

	// A second login finds the token working and asks nobody.
	code, out = login(t, "--config", cfg, "--token-dir", dir, "remote")
	if code != 0 || !strings.Contains(out, "Already signed in to remote") || strings.Contains(out, "open this URL") {
		t.Fatalf("second login: exit %d, output:\n%s", code, out)
	}

	var stdout, stderr bytes.Buffer
	if code := Logout(context.Background(), []string{"--config", cfg, "--token-dir", dir, "remote"}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("logout: exit %d: %s", code, stderr.String())
	}
	if states := authStates(t, cfg, dir); states[0].State != authstate.SignedOut {
		t.Fatalf("still signed in after logout: %+v", states)
	}
	if !strings.Contains(stdout.String(), "Signed out of remote (revoked at the authorization server)") || as.Snapshot().Revocations != 2 {
		t.Fatalf("logout: %q, revocations %d", stdout.String(), as.Snapshot().Revocations)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "*.json")); len(files) != 0 {
		t.Fatalf("token files left after logout: %v", files)
	}
	p = pool.New(&pool.Options{OAuth: &pool.OAuthOptions{TokenDir: dir}})
	_, err = p.CallTool(context.Background(), &pool.Server{Name: "remote", URL: as.URL}, &mcp.CallToolParams{Name: "whoami"})
	p.Close()
	if pe, ok := errors.AsType[*pool.Error](err); !ok || pe.Status != http.StatusUnauthorized {
		t.Fatalf("after logout: err = %v, want a 401", err)
	}
	stdout.Reset()
	if code := Logout(context.Background(), []string{"--config", cfg, "--token-dir", dir, "remote"}, nil, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "Not signed in to remote") {
		t.Fatalf("second logout: exit %d, %q", code, stdout.String())
	}
}

func TestLoginBadInput(t *testing.T) {
	cfg := writeConfig(t, "http://127.0.0.1:1/mcp")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--config", cfg, "--token-dir", t.TempDir()}, 2, "want one SERVER"},
		{[]string{"--config", cfg, "--token-dir", t.TempDir(), "nope"}, 1, `names no server "nope"; it has remote, local`},
		{[]string{"--config", cfg, "--token-dir", t.TempDir(), "local"}, 1, "stdio server"},
		{[]string{"--config", filepath.Join(t.TempDir(), "missing.json"), "--token-dir", t.TempDir(), "remote"}, 1, "cannot read file"},
	} {
		var stdout, stderr bytes.Buffer
		code := Login(context.Background(), tc.args, nil, &stdout, &stderr)
		if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("login %q: exit %d, stderr %q; want %d and %q", tc.args, code, stderr.String(), tc.code, tc.want)
		}
	}
	var stdout bytes.Buffer
	if code := Login(context.Background(), []string{"--help"}, nil, &stdout, io.Discard); code != 0 || !strings.Contains(stdout.String(), "usage: switchboard login") {
		t.Errorf("--help: exit %d, %q", code, stdout.String())
	}
}

// authStates is what `switchboard status --auth` shows for cfg.
func authStates(t *testing.T, cfg, dir string) []authstate.Server {
	t.Helper()
	c, err := mcpconfig.Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return authstate.ForConfig(c, "", &tokenstore.Store{Dir: dir}, time.Now()).Servers
}

func tokenOfFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(data), `"access_token":"`)
	tok, _, _ := strings.Cut(rest, `"`)
	if tok == "" {
		t.Fatal("no access token in the file")
	}
	return tok
}
