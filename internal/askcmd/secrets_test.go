package askcmd

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-run/switchboard/internal/logging"
	"github.com/switchboard-run/switchboard/internal/mcptest"
	"github.com/switchboard-run/switchboard/internal/proctest"
	"github.com/switchboard-run/switchboard/pool"
)

// TestSecretsStayOutOfAsk: secrets planted in the environment and in the
// oracle's tools/mcp.json (a URL path segment and query value from
// ${GITHUB_TOKEN} and ${OPENAI_API_KEY}, a path segment from a variable
// whose name says nothing, a literal Authorization header, a header from
// a variable) reach nobody through an ask that finds that sibling
// unavailable (nothing listens at its URL): not in the ask tool's result
// (text and structured) or its progress notifications, as any MCP caller
// receives them, and not on ask's stdout or stderr, text or --json; where
// they were, [REDACTED] stands.
func TestSecretsStayOutOfAsk(t *testing.T) {
	secrets := map[string]string{
		"GITHUB_TOKEN":   "ghp-planted-github-token-111",
		"OPENAI_API_KEY": "sk-planted-openai-key-222",
		"ROUTE":          "planted-route-under-a-plain-name-333",
		"HEADER_VALUE":   "planted-header-from-a-variable-444",
	}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	const literal = "planted-literal-bearer-555"
	deadURL := mcptest.DeadURL(t) // the sibling is unavailable
	url := oracleStudio(t, deadURL+"/${GITHUB_TOKEN}/${ROUTE}/mcp?api_key=${OPENAI_API_KEY}",
		`, "headers": {"Authorization": "Bearer `+literal+`", "X-Custom": "${HEADER_VALUE}"}`)
	planted := []string{literal}
	for _, v := range secrets {
		planted = append(planted, v)
	}
	check := func(channel, text string) {
		t.Helper()
		for _, s := range planted {
			if strings.Contains(text, s) {
				t.Errorf("%s holds the secret %q:\n%s", channel, s, text)
			}
		}
	}

	// An MCP caller of the ask tool, with a progress token.
	var mu sync.Mutex
	var progress []string
	p := pool.New(&pool.Options{})
	defer p.Close()
	ctx := pool.WithProgress(t.Context(), func(n *mcp.ProgressNotificationParams) {
		mu.Lock()
		progress = append(progress, n.Message)
		mu.Unlock()
	})
	res, err := p.CallTool(ctx, &pool.Server{Name: "oracle", URL: url + "/api/agents/oracle/mcp"}, &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"task": "what is 2+2"}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), logging.Redacted) || !strings.Contains(string(b), "unavailable") {
		t.Errorf("the ask result does not say the sibling is unavailable, with [REDACTED] for its secrets:\n%s", b)
	}
	check("the ask tool's result", string(b))
	mu.Lock()
	check("the ask tool's progress notifications", strings.Join(progress, "\n"))
	mu.Unlock()

	// switchboard ask, text and --json.
	for _, args := range [][]string{{"what is 2+2"}, {"--json", "what is 2+2"}} {
		stderr := &proctest.SyncBuffer{}
		var stdout strings.Builder
		code := Main(context.Background(), append([]string{"--studio", url}, args...), nil, &stdout, stderr)
		if code != exitUnavailable {
			t.Errorf("ask %q: exit %d, want %d\nstderr:\n%s", args, code, exitUnavailable, stderr)
		}
		if !strings.Contains(stderr.String()+stdout.String(), logging.Redacted) {
			t.Errorf("ask %q says nothing redacted:\nstdout:\n%s\nstderr:\n%s", args, stdout.String(), stderr)
		}
		check("ask "+strings.Join(args, " ")+": stdout", stdout.String())
		check("ask "+strings.Join(args, " ")+": stderr", stderr.String())
	}
}
