package mcpconfig_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/switchboard-run/switchboard/pool/mcpconfig"
)

// An error that quotes an expanded value does not carry the secret the
// expansion put in it: the rendering gets the logs' redaction, by value (a
// variable named like a credential) and by key (a credential's name in a
// URL query), wherever the error goes next (stderr, last_error, the API).
func TestConfigErrorsAreRedacted(t *testing.T) {
	t.Setenv("PROBE_API_KEY", "sk-planted-0123456789")
	lookup := func(k string) (string, bool) {
		v, ok := map[string]string{"PROBE_API_KEY": "sk-planted-0123456789", "OTHER": "hunter2hunter2"}[k]
		return v, ok
	}
	for _, url := range []string{
		`http://[::1/x?key=${PROBE_API_KEY}`,
		`http://[::1/x?token=${OTHER}`,
	} {
		_, err := mcpconfig.Parse("tools/mcp.json", []byte(`{"mcpServers":{"a":{"url":"`+url+`"}}}`), lookup)
		var ce *mcpconfig.ConfigError
		if !errors.As(err, &ce) {
			t.Fatalf("%s: %v, want a ConfigError", url, err)
		}
		if msg := err.Error(); strings.Contains(msg, "sk-planted") || strings.Contains(msg, "hunter2") || !strings.Contains(msg, "tools/mcp.json") {
			t.Errorf("%s: %q", url, msg)
		}
	}
}
