package logging_test

import (
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/switchboard-run/switchboard/internal/logging"
)

func TestScrub(t *testing.T) {
	t.Setenv("HOSTILE_API_KEY", "env-secret-value-123")
	for _, c := range []struct{ in, leak string }{
		{`Incorrect API key provided: Bearer sk-abcdefghijklmnop1234`, "sk-abcdefghijklmnop1234"},
		{`invalid URL "http://[::1/x?key=hunter2hunter2&q=1"`, "hunter2hunter2"},
		{`GET http://127.0.0.1/x?api_key=abcdef123456: refused`, "abcdef123456"},
		{`dial http://user:p4ssw0rd@host/: refused`, "p4ssw0rd"},
		{`the variable holds env-secret-value-123`, "env-secret-value-123"},
		{`known: caller-known-secret`, "caller-known-secret"},
	} {
		got := logging.Scrub(c.in, "caller-known-secret")
		if strings.Contains(got, c.leak) || !strings.Contains(got, logging.Redacted) {
			t.Errorf("Scrub(%q) = %q", c.in, got)
		}
	}
	if got := logging.Scrub("plain text, q=1, 42"); got != "plain text, q=1, 42" {
		t.Errorf("Scrub changed text without secrets: %q", got)
	}
	err := logging.RedactError(fmtErr("open ?token=abcdefgh12: %w", fs.ErrNotExist))
	if !errors.Is(err, fs.ErrNotExist) || strings.Contains(err.Error(), "abcdefgh12") {
		t.Errorf("RedactError: %v", err)
	}
}

type wrapped struct {
	msg string
	err error
}

func (w *wrapped) Error() string { return w.msg + ": " + w.err.Error() }
func (w *wrapped) Unwrap() error { return w.err }

func fmtErr(msg string, err error) error {
	return &wrapped{strings.TrimSuffix(msg, ": %w"), err}
}
