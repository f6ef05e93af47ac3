package authstate_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/authstate"
	"github.com/switchboard-run/switchboard/internal/oauthtest"
	"github.com/switchboard-run/switchboard/internal/proctest"
	"github.com/switchboard-run/switchboard/internal/projecttest"
	"github.com/switchboard-run/switchboard/internal/testbin"
	"github.com/switchboard-run/switchboard/internal/tokenstore"
)

// TestStudioShowsSignIn runs the real binaries: a studio (`switchboard up`)
// whose agent names an OAuth-protected server in its tools/mcp.json shows
// the server signed out on /api/auth, in `switchboard status` and on the
// page; after `switchboard login` (the test plays the browser) all three
// show it signed in, with the granted scopes and the expiry, and after
// `switchboard logout` signed out again. No token reaches any of them, nor
// the studio's logs.
func TestStudioShowsSignIn(t *testing.T) {
	bin, err := testbin.Switchboard()
	if err != nil {
		t.Fatal(err)
	}
	as := oauthtest.New(t, time.Hour, "notes")
	dir := projecttest.New(t)
	scout := filepath.Join(dir, "agents", "scout")
	if err := os.MkdirAll(filepath.Join(scout, "tools"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(scout, "agent.json"), []byte(`{"name":"scout","description":"reads the remote notes"}`), 0o644)
	// "static" carries its own Authorization header: not the pool's to sign
	// in to, so not shown.
	mcpJSON := filepath.Join(scout, "tools", "mcp.json")
	os.WriteFile(mcpJSON, []byte(`{"mcpServers":{
		"remote":{"url":"`+as.URL+`","oauth":{"scopes":"notes"}},
		"static":{"url":"http://127.0.0.1:9/mcp","headers":{"Authorization":"Bearer static"}}}}`), 0o644)
	env := []string{tokenstore.EnvDir + "=" + filepath.Join(t.TempDir(), "tokens")}
	up := proctest.StartProcess(t, dir, env, 60*time.Second, "switchboard studio listening on ", bin, "up", "--dir", dir, "--listen", "127.0.0.1:0")
	base := up.Ready
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// seen is everything shown to a person, to look for tokens in at the end.
	var seen strings.Builder
	show := func() (authstate.Server, string, string) {
		t.Helper()
		var r authstate.Report
		body := get(t, base+"/api/auth")
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatalf("/api/auth: %v\n%s", err, body)
		}
		if len(r.Servers) != 1 || r.Servers[0].Server != "remote" || !slices.Equal(r.Servers[0].Agents, []string{"scout"}) {
			t.Fatalf("/api/auth = %s; want remote alone, used by scout", body)
		}
		status := exec.CommandContext(ctx, bin, "status", "--studio", base)
		status.Env = append(os.Environ(), env...)
		out, err := status.CombinedOutput()
		if err != nil {
			t.Fatalf("switchboard status: %v\n%s", err, out)
		}
		page := get(t, base+"/")
		seen.WriteString(body + string(out) + page)
		return r.Servers[0], string(out), page
	}

	s, status, page := show()
	if s.State != authstate.SignedOut || s.Expires != nil || len(s.Scopes) != 0 || !strings.Contains(status, "remote") || !strings.Contains(status, "not signed in: switchboard login remote") || !strings.Contains(page, "not signed in: switchboard login remote") {
		t.Fatalf("before login: %+v\nstatus:\n%s\npage has the sentence: %v", s, status, strings.Contains(page, "switchboard login remote"))
	}

	oauthtest.Login(t, ctx, bin, append(os.Environ(), env...), mcpJSON, "remote", "alice")
	s, status, page = show()
	if s.State != authstate.SignedIn || !slices.Contains(s.Scopes, "notes") || s.Issuer != as.AS.URL || s.Expires == nil || !s.Refreshable {
		t.Fatalf("after login: %+v", s)
	}
	if left := time.Until(*s.Expires); left <= 0 || left > time.Hour+time.Minute {
		t.Fatalf("after login: expires %v, %v from now; want within the hour the server grants", s.Expires, left)
	}
	exp := s.Expires.Format(time.RFC3339)
	for what, text := range map[string]string{"status": status, "page": page} {
		if !strings.Contains(text, "signed in at "+as.AS.URL) || !strings.Contains(text, "notes") || !strings.Contains(text, exp) {
			t.Errorf("after login, %s does not show the sign-in with its scopes and expiry %s:\n%s", what, exp, text)
		}
	}

	logout := exec.CommandContext(ctx, bin, "logout", "--config", mcpJSON, "remote")
	logout.Env = append(os.Environ(), env...)
	if out, err := logout.CombinedOutput(); err != nil || !strings.Contains(string(out), "Signed out of remote") {
		t.Fatalf("switchboard logout: %v\n%s", err, out)
	}
	if s, status, _ = show(); s.State != authstate.SignedOut || !strings.Contains(status, "not signed in") {
		t.Fatalf("after logout: %+v\nstatus:\n%s", s, status)
	}

	// Every token the server issued, against all that was shown and logged.
	if len(as.Tokens()) < 2 {
		t.Fatalf("the server issued %d tokens, want an access and a refresh token", len(as.Tokens()))
	}
	for _, tok := range as.Tokens() {
		if strings.Contains(seen.String(), tok) || strings.Contains(up.Stderr(), tok) {
			t.Fatalf("a token issued by the server was shown or logged")
		}
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s\n%s", url, resp.Status, body)
	}
	return string(body)
}
