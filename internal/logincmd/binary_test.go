package logincmd

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-run/switchboard/internal/oauthtest"
	"github.com/switchboard-run/switchboard/internal/testbin"
)

// TestBinaryLoginThenClient: through the real binary, a person signs in
// with `switchboard login` (the test plays the browser on the printed
// URL), and a separate `switchboard client` process then calls the
// protected server with the stored token, asking nobody; `switchboard
// logout` ends it.
func TestBinaryLoginThenClient(t *testing.T) {
	bin, err := testbin.Switchboard()
	if err != nil {
		t.Fatal(err)
	}
	as := oauthtest.New(t, time.Hour)
	cfg := writeConfig(t, as.URL)
	env := append(os.Environ(), "SWITCHBOARD_TOKEN_DIR="+filepath.Join(t.TempDir(), "tokens"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	oauthtest.Login(t, ctx, bin, env, cfg, "remote", "carol")

	client := exec.CommandContext(ctx, bin, "client", "--config", cfg)
	client.Env = env
	client.Stdin = strings.NewReader(`{"id":1,"server":"remote","method":"tools/call","params":{"name":"whoami","arguments":{}}}` + "\n")
	got, err := client.Output()
	if err != nil || !strings.Contains(string(got), `"text":"carol"`) {
		t.Fatalf("switchboard client with the stored token: %v\n%s", err, got)
	}
	if c := as.Snapshot(); c.Authorizations != 1 {
		t.Fatalf("authorizations = %d, want the one of login", c.Authorizations)
	}

	logout := exec.CommandContext(ctx, bin, "logout", "--config", cfg, "remote")
	logout.Env = env
	if got, err := logout.CombinedOutput(); err != nil || !strings.Contains(string(got), "Signed out of remote") {
		t.Fatalf("switchboard logout: %v\n%s", err, got)
	}
	client = exec.CommandContext(ctx, bin, "client", "--config", cfg)
	client.Env = env
	client.Stdin = strings.NewReader(`{"id":1,"server":"remote","method":"tools/call","params":{"name":"whoami","arguments":{}}}` + "\n")
	if got, _ := client.Output(); !strings.Contains(string(got), `"error"`) {
		t.Fatalf("after logout the call still went through: %s", got)
	}
}
