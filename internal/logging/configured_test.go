package logging_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-run/switchboard/internal/logging"
)

// TestServerSecrets: a configured server's credentials are found wherever
// mcp.json put them, a path segment from a variable whose name says
// nothing included; its host and the words of its path are not, so an
// error scrubbed with them still says where.
func TestServerSecrets(t *testing.T) {
	environ := []string{"ROUTE=planted-route-333", "HOME=/root", "PLAIN=mcp"}
	got := logging.ServerSecrets("http://user:planted-password@example.test:8080/v1/planted-route-333/mcp?api_key=planted-query-111&mode=fast-mode",
		map[string]string{"Authorization": "Bearer planted-bearer-222", "X-Short": "abc"},
		map[string]string{"API_TOKEN": "planted-env-444"}, environ)
	want := []string{"Bearer planted-bearer-222", "fast-mode", "planted-bearer-222", "planted-env-444", "planted-password", "planted-query-111", "planted-route-333"}
	if !slices.Equal(got, want) {
		t.Errorf("ServerSecrets = %q, want %q", got, want)
	}
	msg := logging.Scrub(`Post "http://example.test:8080/v1/planted-route-333/mcp?api_key=planted-query-111": connection refused`, got...)
	if want := `Post "http://example.test:8080/v1/[REDACTED]/mcp?api_key=[REDACTED]": connection refused`; msg != want {
		t.Errorf("scrubbed: %q, want %q", msg, want)
	}
	if strings.Contains(strings.Join(got, " "), "example.test") {
		t.Errorf("the host is taken for a secret: %q", got)
	}
	if got := logging.ServerSecrets("", nil, nil, environ); len(got) != 0 {
		t.Errorf("no server: %q", got)
	}
}

// TestArgSecrets: a stdio server's args give the environment's values they
// hold, whole or after "--flag=" or "user:"; the words of the command line
// and a short value are not secrets.
func TestArgSecrets(t *testing.T) {
	environ := []string{"ARG_TOKEN=planted-arg-555", "USER_PASS=planted-pass-666", "PLAIN=stdio", "WHOLE=planted-whole-777"}
	got := logging.ArgSecrets([]string{"-c", "serve --fast", "--token=planted-arg-555", "admin:planted-pass-666", "planted-whole-777", "stdio"}, environ)
	want := []string{"planted-arg-555", "planted-pass-666", "planted-whole-777"}
	if !slices.Equal(got, want) {
		t.Errorf("ArgSecrets = %q, want %q", got, want)
	}
	if got := logging.ArgSecrets(nil, environ); len(got) != 0 {
		t.Errorf("no args: %q", got)
	}
}
