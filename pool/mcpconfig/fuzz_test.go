package mcpconfig_test

import (
	"errors"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/switchboard-run/switchboard/pool/mcpconfig"
)

// FuzzParse checks that Parse never panics, that every error is a
// *ConfigError, and that what it accepts is a usable server list. The
// realistic seeds are in testdata/fuzz/FuzzParse; run it with
//
//	go test -fuzz=FuzzParse -fuzztime=20s ./pool/mcpconfig
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		``,
		`{}`,
		`{"mcpServers": {"a": {"url": "http://a"}}}`,
		`{"servers": {"a": {"type": "stdio", "command": "${SET_X}", "args": ["$$", "${U:-d}"]}}}`,
		`{"mcpServers": {"a": {"command": "x", "env": {"K": "${env:EMPTY:-v}"}}}, "mcpServers": 1}`,
		`{"servers": {"a": {"type": "sse", "url": "http://a"}}, "inputs": [{"id": "k"}]}`,
		`{"mcpServers": {"a": {"url": "https://${SET_H}/${", "headers": {"A": "${input:k}"}}}}`,
		"{\"mcpServers\": {\"\\u00e9\": {\"url\": \"\\ud800\"}}}",
	} {
		f.Add([]byte(seed))
	}
	validName := regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	lookup := func(name string) (string, bool) {
		switch {
		case strings.HasPrefix(name, "SET"):
			return "v" + name, true
		case name == "EMPTY":
			return "", true
		}
		return "", false
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := mcpconfig.Parse("mcp.json", data, lookup)
		if err != nil {
			if _, ok := errors.AsType[*mcpconfig.ConfigError](err); !ok {
				t.Fatalf("error %q is %T, not a *ConfigError", err, err)
			}
			if !strings.HasPrefix(err.Error(), "mcp.json") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		seen := make(map[string]bool)
		for _, s := range cfg.Servers {
			if !validName.MatchString(s.Name) || seen[s.Name] {
				t.Fatalf("invalid or duplicate server name %q", s.Name)
			}
			seen[s.Name] = true
			switch s.Type {
			case "http":
				u, err := url.Parse(s.URL)
				if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
					t.Fatalf("server %q: accepted bad URL %q", s.Name, s.URL)
				}
				if s.Command != "" || s.Args != nil || s.Env != nil {
					t.Fatalf("server %q: http server with stdio fields: %+v", s.Name, s)
				}
			case "stdio":
				if s.Command == "" || s.URL != "" || s.Headers != nil {
					t.Fatalf("server %q: bad stdio server: %+v", s.Name, s)
				}
			default:
				t.Fatalf("server %q: type %q", s.Name, s.Type)
			}
		}
	})
}
