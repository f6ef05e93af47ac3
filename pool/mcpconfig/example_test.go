package mcpconfig_test

import (
	"errors"
	"fmt"
	"log"

	"github.com/switchboard-run/switchboard/pool"
	"github.com/switchboard-run/switchboard/pool/mcpconfig"
)

// LoadWith reads an mcp.json with its ${VARIABLES} taken from a function
// (Load takes them from the environment). A disabled server is checked but
// left out; each server's Pool method is what a pool.Pool dials.
func ExampleLoadWith() {
	vars := map[string]string{"NOTES_TOKEN": "t0ken"}
	cfg, err := mcpconfig.LoadWith("testdata/mcp.json", func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range cfg.Servers {
		switch s.Type {
		case mcpconfig.TypeHTTP:
			fmt.Printf("%s: %s %s, calls bounded by %v\n", s.Name, s.Type, s.URL, s.Timeout)
		case mcpconfig.TypeStdio:
			fmt.Printf("%s: %s %s %q\n", s.Name, s.Type, s.Command, s.Args)
		}
	}
	var srv *pool.Server = cfg.Servers[0].Pool()
	fmt.Println("the pool dials", srv.Name, "with", len(srv.Headers), "header")
	// Output:
	// notes: http http://127.0.0.1:8080/mcp, calls bounded by 30s
	// git: stdio uvx ["mcp-server-git" "--repository" "."]
	// the pool dials notes with 1 header
}

// Every error is a *ConfigError naming the file, the server, the field and
// the value as written (before expansion, so never a secret).
func ExampleParse_error() {
	data := []byte(`{"mcpServers": {"notes": {"url": "${NOTES_URL}/mcp"}}}`)
	_, err := mcpconfig.Parse("tools/mcp.json", data, nil)
	fmt.Println(err)
	var ce *mcpconfig.ConfigError
	if errors.As(err, &ce) {
		fmt.Printf("server %q, field %q, value %q\n", ce.Server, ce.Field, ce.Value)
	}
	// Output:
	// tools/mcp.json: server "notes": field "url": undefined variable ${NOTES_URL} (no default)
	// server "notes", field "url", value "${NOTES_URL}/mcp"
}

// A server's tool filter leaves tools out of what the model is offered:
// "disabledTools" names the ones to hide, "allowedTools" the only ones to
// keep (Gemini CLI's "excludeTools" and "includeTools" are read as these).
func ExampleParse_toolFilter() {
	data := []byte(`{"mcpServers": {
  "abacus": {"url": "http://127.0.0.1:8081/mcp", "disabledTools": ["calculate"]},
  "packrat": {"url": "http://127.0.0.1:8082/mcp", "includeTools": ["store_note", "find_notes"]}
}}`)
	cfg, err := mcpconfig.Parse("tools/mcp.json", data, nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range cfg.Servers {
		fmt.Printf("%s: allowed %q, disabled %q\n", s.Name, s.AllowedTools, s.DisabledTools)
	}
	_, err = mcpconfig.Parse("tools/mcp.json", []byte(`{"mcpServers": {"abacus": {"url": "http://127.0.0.1:8081/mcp", "allowedTools": ["add"], "disabledTools": ["calculate"]}}}`), nil)
	fmt.Println(err)
	// Output:
	// abacus: allowed [], disabled ["calculate"]
	// packrat: allowed ["store_note" "find_notes"], disabled []
	// tools/mcp.json: server "abacus": field "disabledTools": not allowed with "allowedTools", which already leaves out every tool it does not name; give one of them
}
