package oauthtest

import (
	"bufio"
	"context"
	"net/http"
	"os/exec"
	"strings"
	"testing"
)

// Login runs `switchboard login --config config server` with the binary
// bin and environment env (the whole of it), and plays user's browser on
// the authorization URL it prints: it follows the URL through this
// package's authorization server and then the redirect back to the
// command's loopback listener. It fails the test unless the command signs
// in, and returns what it printed.
func Login(t testing.TB, ctx context.Context, bin string, env []string, config, server, user string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, "login", "--config", config, server)
	cmd.Env = env
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		out.WriteString(line + "\n")
		if strings.HasPrefix(line, "http") && strings.Contains(line, "/authorize?") {
			_, _, back, err := FollowAuthorize(ctx, line, user)
			if err != nil {
				t.Fatalf("following the printed URL: %v", err)
			}
			resp, err := http.Get(back)
			if err != nil {
				t.Fatalf("back to the loopback redirect: %v", err)
			}
			resp.Body.Close()
		}
	}
	if err := cmd.Wait(); err != nil || !strings.Contains(out.String(), "Signed in to "+server) {
		t.Fatalf("switchboard login: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), stderr.String())
	}
	return out.String()
}
