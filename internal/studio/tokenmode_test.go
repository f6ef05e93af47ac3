package studio

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-run/switchboard/internal/projecttest"
	"github.com/switchboard-run/switchboard/internal/studioapi"
)

// Token mode works out of the box: with a token, the bundled oracle reaches
// abacus through the studio (the studio gives the agents it starts the
// token, which the bundled tools/mcp.json sends), and the studio knows the
// hop came from oracle itself.
func TestTokenModeBundledTeam(t *testing.T) {
	const token = "tok-mode-test-0123456789"
	s := startStudio(t, projecttest.New(t, "oracle", "abacus"), &Options{Token: token})
	res := callThroughProxy(t, s, token, "oracle", "ask", map[string]any{"task": "calculate 17 * 3"})
	if res.IsError || !strings.Contains(toolText(res), "51") {
		t.Fatalf("ask with a token: %s", toolText(res))
	}
	var seen bool
	for _, d := range s.Delegations(50) {
		if d.Agent == "abacus" && d.From == "oracle" {
			seen = true
			if d.FromSource != studioapi.FromSourceAgent {
				t.Errorf("the hop oracle → abacus: from_source %q, want %q", d.FromSource, studioapi.FromSourceAgent)
			}
		}
	}
	if !seen {
		t.Errorf("no delegation from oracle to abacus in %+v", s.Delegations(50))
	}
}

// An agent's mcp.json may name ${SWITCHBOARD_STUDIO_URL} without a default:
// the studio reads it with its own address, and the agent gets it set.
func TestStudioURLWithoutDefault(t *testing.T) {
	dir := projecttest.New(t, "oracle", "abacus")
	mcpJSON := `{"mcpServers": {"abacus": {"url": "${SWITCHBOARD_STUDIO_URL}/api/agents/abacus/mcp"}}}`
	if err := os.WriteFile(filepath.Join(dir, "agents", "oracle", "tools", "mcp.json"), []byte(mcpJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(studioapi.EnvStudioURL, "") // not the test's environment
	os.Unsetenv(studioapi.EnvStudioURL)
	s := startStudio(t, dir, nil)
	res := callThroughProxy(t, s, "", "oracle", "ask", map[string]any{"task": "calculate 6 * 7"})
	if res.IsError || !strings.Contains(toolText(res), "42") {
		t.Fatalf("ask: %s", toolText(res))
	}
}
